"""Every error a caller can cause is a typed ``ReMindError`` that says what to do, and loose types
are refused, not coerced; an LLM timeout ends cleanly."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from remindrag_integrations import ConfigError, Document, ReMindError, ReMindRAG
from remindrag_integrations.errors import EmbeddingError, InvalidArgumentError
from remindrag_integrations.testing import HashEmbedder


def _engine() -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(16))
    eng.insert([Document("d1", "Alice lives in Paris. Bob visits Alice in Paris.")])
    return eng


@pytest.mark.parametrize("k", [True, "3", 3.0, None])
def test_loose_types_in_overrides_are_refused_not_coerced(k: Any) -> None:
    eng = _engine()
    with pytest.raises(ConfigError, match="k"):
        eng.retrieve("Who lives in Paris?", k=k)
    with pytest.raises(ConfigError):
        asyncio.run(eng.aretrieve("Who lives in Paris?", k=k))
    assert len(eng.retrieve("Who lives in Paris?", k=1).chunks) == 1  # a real int works


@pytest.mark.parametrize(
    "field,value",
    [
        ("pre_query", 1),
        ("llm_timeout", "5"),
        ("seeds", False),
        ("memory", {"alpha": "0.1"}),  # nested configs are as strict
        ("prior", {"damping": True}),
        ("navigator", {"enough_chunks": 2.0}),
        ("prior", 1),  # neither a dict nor a PriorConfig
    ],
)
def test_every_config_field_is_strict(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=field):
        _engine().retrieve("Who lives in Paris?", **{field: value})


def test_a_float_field_takes_an_int() -> None:
    r = _engine().retrieve(
        "Who lives in Paris?", memory={"alpha": 1}, navigator={"min_similarity": 0}
    )
    assert r.chunks


@pytest.mark.parametrize("factor", [2, -0.1, float("nan"), "0.5", True, None])
def test_decay_memory_refuses_bad_factors(factor: Any) -> None:
    eng = _engine()
    with pytest.raises(InvalidArgumentError, match=r"\[0, 1\]"):
        eng.decay_memory(factor)
    with pytest.raises(InvalidArgumentError):
        eng.store.decay_memory(factor)


@pytest.mark.parametrize("bad", [None, 3, object()])
def test_none_or_a_number_where_a_list_belongs(bad: Any) -> None:
    eng = _engine()
    before = eng.store.counts()
    calls = [
        lambda: eng.insert(bad),
        lambda: eng.estimate_insert(bad),
        lambda: eng.delete(bad),
        lambda: eng.teach(bad),
        lambda: eng.memorize(eng.retrieve("Alice").trace_id, supporting=bad or 3),
    ]
    for call in calls:
        with pytest.raises(InvalidArgumentError, match="list"):
            call()
    assert eng.store.counts() == before


@pytest.mark.parametrize("bad", [None, 3, b"dir", ""])
def test_paths_must_be_paths(bad: Any) -> None:
    eng = _engine()
    for call in (
        lambda: eng.save(bad),
        lambda: ReMindRAG.load(bad),
        lambda: eng.export_memory(bad),
        lambda: eng.import_memory(bad),
    ):
        with pytest.raises(InvalidArgumentError, match="path"):
            call()


class _Down:
    """An embedder whose server is down once the engine is built."""

    def __init__(self) -> None:
        self.inner, self.up = HashEmbedder(16), True

    def embed(self, texts: list[str]) -> np.ndarray:
        if not self.up:
            raise ConnectionError("connection refused: localhost:11434")
        return self.inner.embed(texts)


def test_an_embedder_that_cannot_connect_is_an_embedding_error() -> None:
    emb = _Down()
    eng = ReMindRAG(embeddings=emb)
    eng.insert([Document("d1", "Alice lives in Paris.")])
    emb.up = False
    for call in (
        lambda: eng.retrieve("Who lives in Paris?"),
        lambda: asyncio.run(eng.aretrieve("Who lives in Paris?")),
        lambda: eng.insert([Document("d2", "Bob lives in Rome.")]),
        lambda: eng.inspect_memory(query="Paris"),
    ):
        with pytest.raises(EmbeddingError, match="connection refused") as info:
            call()
        assert isinstance(info.value.__cause__, ConnectionError)
    assert eng.store.document_ids() == ["d1"]


def test_nan_in_a_memory_import_says_so(tmp_path: Path) -> None:
    eng = _engine()
    r = eng.retrieve("Who lives in Paris?", navigator={"min_similarity": -1.0})
    eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
    eng.export_memory(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    eid = next(iter(doc["vectors"]))
    doc["vectors"][eid][0] = float("nan")
    (tmp_path / "m.json").write_text(json.dumps(doc))
    with pytest.raises(ReMindError, match="NaN"):
        eng.import_memory(tmp_path / "m.json")


_TIMEOUT_SCRIPT = """
import asyncio, sys, time
from pathlib import Path
from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.testing import HashEmbedder

done = Path(sys.argv[1])

def slow(prompt):
    time.sleep(60)  # far longer than the test waits for this process
    done.write_text("the abandoned call finished")
    return "{}"

eng = ReMindRAG(llm=slow, embeddings=HashEmbedder(16))
eng.store.add_graph(documents=[], chunks=[], nodes=[], embeddings=HashEmbedder(16).embed([]),
                    edges=[], entity_aliases={})
try:
    asyncio.run(eng.aretrieve("Who lives in Paris?", llm_timeout=0.5, pre_query=True))
except Exception as exc:
    print(type(exc).__name__)
print("returned", flush=True)
"""


def test_an_abandoned_llm_call_does_not_hold_up_the_exit(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parent.parent
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(_TIMEOUT_SCRIPT))
    done = tmp_path / "done"
    out = subprocess.run(
        [sys.executable, str(script), str(done)],
        capture_output=True,
        text=True,
        timeout=45,  # a guard against a hang: the exit must not wait for the 60 s call
        env={"PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().endswith("returned")
    assert not done.exists()  # the process ended while the abandoned call still slept
