"""A query's own numerical work runs on one BLAS thread (core/blas.py): numpy's OpenBLAS
otherwise spreads each small product over every core and, on a busy machine, waits longer
for the threads it woke than the product takes. Counted with threadpoolctl, not timed."""

from __future__ import annotations

import threading

import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from remindrag_integrations import ReMindRAG
from remindrag_integrations.core import prior
from remindrag_integrations.core.blas import one_blas_thread
from remindrag_integrations.testing import HashEmbedder


def _blas_threads() -> set[int]:
    return {lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"}


@pytest.fixture
def two_blas_threads():
    if not _blas_threads():
        pytest.skip("numpy has no BLAS library threadpoolctl can see")
    with threadpool_limits(limits=2, user_api="blas"):  # as on a machine with 2+ cores
        assert _blas_threads() == {2}
        yield


def test_one_thread_inside_then_as_before(two_blas_threads: None) -> None:
    with one_blas_thread():
        assert _blas_threads() == {1}
        with one_blas_thread():  # re-entrant
            assert _blas_threads() == {1}
        assert _blas_threads() == {1}
    assert _blas_threads() == {2}


def test_overlapping_threads_share_one_setting(two_blas_threads: None) -> None:
    """The first thread in sets one BLAS thread; the setting stays until the last leaves,
    whichever order they leave in."""
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, set[int]] = {}

    def first() -> None:
        with one_blas_thread():
            first_in.set()
            assert second_in.wait(10)
        first_out.set()

    def second() -> None:
        assert first_in.wait(10)
        with one_blas_thread():
            second_in.set()
            assert first_out.wait(10)
            seen["after the first left"] = _blas_threads()

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert seen == {"after the first left": {1}}
    assert _blas_threads() == {2}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_retrieval_runs_its_steps_on_one_blas_thread(
    two_blas_threads: None, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    import asyncio

    engine = ReMindRAG(llm=None, embeddings=HashEmbedder())
    engine.insert(["Scott Derrickson directed Sinister.", "Sinister stars Ethan Hawke."])
    during: list[set[int]] = []
    real = prior.build

    def build(*args, **kwargs):  # the prior: the query's largest products
        during.append(_blas_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(prior, "build", build)
    question = "Who starred in the film Scott Derrickson directed?"
    if mode == "sync":
        found = engine.retrieve(question)
    else:
        found = asyncio.run(engine.aretrieve(question))
    assert found.chunks and during == [{1}]
    assert _blas_threads() == {2}  # the caller's setting is back


def test_a_blas_loaded_after_the_first_query_is_limited_too() -> None:
    """SciPy's wheels bring their own OpenBLAS beside numpy's; imported after the first step
    (as in a long test run or an app), it is held to one thread as well."""
    import json
    import subprocess
    import sys

    code = (
        "import json, numpy\n"
        "from threadpoolctl import threadpool_info, threadpool_limits\n"
        "from remindrag_integrations.core.blas import one_blas_thread\n"
        "bt = lambda: [l['num_threads'] for l in threadpool_info() if l['user_api'] == 'blas']\n"
        "with one_blas_thread(): first = bt()\n"
        "import scipy.linalg\n"
        "with threadpool_limits(2, 'blas'):\n"
        "    before = bt()\n"
        "    with one_blas_thread(): inside = bt()\n"
        "print(json.dumps([first, before, inside]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    first, before, inside = json.loads(out.stdout.strip().splitlines()[-1])
    if len(before) == len(first):
        pytest.skip("SciPy shares numpy's BLAS here: nothing loads late")
    assert before == [2] * len(before) and inside == [1] * len(before)
