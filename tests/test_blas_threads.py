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
