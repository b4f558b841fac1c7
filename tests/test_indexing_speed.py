"""Indexing at speed: distinct strings embedded once, synonym merge equal to the one-by-one
merge it replaced (on real text and the packaged embedder), insert committed in batches of
documents so an interrupted insert continues where it stopped."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from remindrag_integrations import ReMindRAG
from remindrag_integrations.adapters.embeddings import as_embedder
from remindrag_integrations.core.config import IndexConfig
from remindrag_integrations.core.extract_rules import rule_based_extraction
from remindrag_integrations.core.ids import norm_name
from remindrag_integrations.core.indexing import embed_unique, search_many, synonym_targets
from remindrag_integrations.core.steps import current_ask
from remindrag_integrations.errors import ExtractionError
from remindrag_integrations.testing import HashEmbedder, ScriptedLLM

DATA = Path(__file__).parent / "data" / "hotpotqa_train100_sample.corpus.jsonl"


def passages(n: int) -> list[str]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return [r["text"] for r in rows[:n]]


class MatrixStore:
    """The store side of synonym merge: exact top-1 search over fixed entity vectors."""

    def __init__(self, ids: list[str], vecs: np.ndarray) -> None:
        self.ids, self.vecs = ids, vecs

    def search(self, query: np.ndarray, k: int, kinds: Sequence[str]) -> list[tuple[str, float]]:
        sims = self.vecs @ query
        order = np.argsort(-sims, kind="stable")[:k]
        return [(self.ids[i], float(sims[i])) for i in order]


class BatchedMatrixStore(MatrixStore):
    def search_many(
        self, queries: np.ndarray, k: int, kinds: Sequence[str]
    ) -> list[list[tuple[str, float]]]:
        return [self.search(q, k, kinds) for q in queries]


def one_by_one(vecs: np.ndarray, store: MatrixStore, threshold: float) -> list[object]:
    """The merge as it was: per name, the store's top-1 then every entity accepted so far."""
    accepted: list[int] = []
    out: list[object] = []
    for i, vec in enumerate(vecs):
        best_id: object = None
        best = threshold
        for nid, sim in store.search(vec, 1, ("entity",)):
            if sim >= best:
                best_id, best = nid, sim
        if accepted:
            sims = vecs[accepted] @ vec
            j = int(np.argmax(sims))
            if sims[j] >= best:
                best_id = accepted[j]
        out.append(best_id)
        if best_id is None:
            accepted.append(i)
    return out


@pytest.fixture(scope="module")
def real_names() -> tuple[np.ndarray, np.ndarray]:
    """Entity names the rule-based extractor finds in real passages, embedded by the packaged
    model: the first 40 passages' names play the store's entities, the next 60's the batch."""
    embedder = as_embedder(None)

    def names(texts: list[str]) -> list[str]:
        found: dict[str, str] = {}
        for t in texts:
            for n in rule_based_extraction(t, 40).entities:
                found.setdefault(norm_name(n), n)
        return list(found.values())

    texts = passages(100)
    store_names, batch_names = names(texts[:40]), names(texts[40:])
    unit = lambda m: m / np.linalg.norm(m, axis=1, keepdims=True)  # noqa: E731
    return unit(embedder.embed(store_names)), unit(embedder.embed(batch_names))


@pytest.mark.parametrize("threshold", [0.85, 0.6])
@pytest.mark.parametrize("block", [7, 512])
def test_blocked_merge_equals_one_by_one_on_real_names(real_names, threshold, block):
    store_vecs, vecs = real_names
    store = MatrixStore([f"e-{i}" for i in range(len(store_vecs))], store_vecs)
    expected = one_by_one(vecs, store, threshold)
    got = synonym_targets(vecs, search_many(store, vecs, ("entity",)), threshold, block)
    assert got == expected
    assert any(isinstance(t, str) for t in got)  # merged into the store's entities
    assert any(isinstance(t, int) for t in got)  # merged into an earlier new entity
    assert any(t is None for t in got)
    batched = BatchedMatrixStore(store.ids, store_vecs)
    assert synonym_targets(vecs, search_many(batched, vecs, ("entity",)), threshold) == got


class RecordingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += list(texts)
        return super().embed(texts)


def test_each_distinct_string_is_embedded_once_rows_in_order():
    texts = ["b c", "a", "b c", "long text here", "a", "z"]
    rec = RecordingEmbedder()
    got = embed_unique(rec, texts, batch_size=2, dim=None)
    assert sorted(rec.seen) == sorted(set(texts))
    direct = HashEmbedder(64).embed(texts)
    direct /= np.linalg.norm(direct, axis=1, keepdims=True)
    np.testing.assert_allclose(got, direct, atol=1e-6)


def test_repeated_entity_names_across_chunks_are_embedded_once():
    rec = RecordingEmbedder()
    engine = ReMindRAG(embeddings=rec)
    docs = [(f"d{i}", f"Marie Curie met Pierre Curie in Paris, story {i}.") for i in range(6)]
    engine.insert(docs)
    names = [t for t in rec.seen if t in ("Marie Curie", "Pierre Curie", "Paris")]
    assert sorted(names) == ["Marie Curie", "Paris", "Pierre Curie"]


def extraction_llm(prompt: str) -> str:
    ask = current_ask()
    text = ask.context["text"] if ask is not None else ""
    if "BROKEN" in text:
        return "no json here"
    words = [w.strip(".,") for w in text.split() if w[:1].isupper()]
    return json.dumps({"title": text[:30], "entities": words, "triples": []})


def test_an_interrupted_insert_keeps_finished_batches_and_continues():
    docs = [(f"d{i}", f"Alice Smith wrote chapter {i} in Berlin.") for i in range(7)]
    docs[5] = ("d5", "BROKEN chapter in Rome.")
    cfg = IndexConfig(insert_batch_documents=2)
    engine = ReMindRAG(
        llm=ScriptedLLM(extraction_llm), embeddings=HashEmbedder(64), index_config=cfg
    )
    batches: list[int] = []
    with pytest.raises(ExtractionError):
        engine.insert(docs, on_batch=lambda r: batches.append(r.documents))
    assert batches == [2, 2]  # d0-d3 written; the batch with d5 wrote nothing
    assert sorted(engine.store.document_ids()) == ["d0", "d1", "d2", "d3"]
    docs[5] = ("d5", "Chapter five in Rome.")
    report = engine.insert(docs)
    assert (report.documents, report.skipped_documents) == (3, 4)
    assert sorted(engine.store.document_ids()) == [f"d{i}" for i in range(7)]


def test_batched_insert_builds_the_same_graph_as_one_batch():
    texts = passages(12)
    one = ReMindRAG(embeddings=HashEmbedder(64))
    many = ReMindRAG(
        embeddings=HashEmbedder(64), index_config=IndexConfig(insert_batch_documents=5)
    )
    r1, r2 = one.insert(texts), many.insert(texts)
    assert (r1.documents, r1.chunks) == (r2.documents, r2.chunks) == (12, r1.chunks)
    assert one.store.counts() == many.store.counts()
