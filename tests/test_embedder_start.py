"""The packaged embedder on onnxruntime gives sentence-transformers' vectors; bad embedder
names fail at once; a saved engine records its embedder and ``load`` uses or checks it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from remindrag_integrations import EmbeddingError, ReMindRAG, StoreNotFoundError
from remindrag_integrations.adapters.embeddings import (
    SentenceTransformerEmbedder,
    as_embedder,
    identity_of,
    packaged_model_path,
)
from remindrag_integrations.core.persist import read_checked_json
from remindrag_integrations.core.types import ConfigError
from remindrag_integrations.testing import HashEmbedder

DATA = Path(__file__).parent / "data" / "hotpotqa_train100_sample.corpus.jsonl"


def passages(n: int) -> list[str]:
    rows = [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]
    return [r["text"] for r in rows[:n]]


def test_onnx_vectors_match_sentence_transformers_on_real_passages():
    pytest.importorskip("onnxruntime")
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    texts = [*passages(16), "Paris", "Marie Curie", "a"]
    ref = SentenceTransformerEmbedder().embed(texts)
    exact = OnnxEmbedder(packaged_model_path(), batch_size=5, quantized=False).embed(texts)
    assert exact.shape == ref.shape == (len(texts), 384)
    assert np.sum(exact * ref, axis=1).min() >= 0.999
    # the default: long texts through the int8 graph (close), short ones on float32 (exact)
    fast = OnnxEmbedder(packaged_model_path(), batch_size=5).embed(texts)
    cos = np.sum(fast * ref, axis=1)
    assert cos[:16].min() >= 0.99 and cos[:16].max() < 0.99999  # int8 did run
    assert cos[16:].min() >= 0.999


def test_a_text_gets_the_same_vector_in_any_batch():
    """Batches are cut by length and token budget: what else is in the call changes the
    batch a text lands in, never its vector."""
    pytest.importorskip("onnxruntime")
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    texts = [*passages(12), "Paris", "Marie Curie", "the Eiffel Tower in Paris, France"]
    emb = OnnxEmbedder(packaged_model_path(), token_budget=300)
    together = emb.embed(texts)
    alone = np.stack([emb.embed([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    reversed_ = emb.embed(texts[::-1])[::-1]
    np.testing.assert_allclose(together, reversed_, atol=1e-5)


def test_short_texts_never_load_the_int8_graph():
    """A question or an entity name stays on float32: the query path loads one session."""
    pytest.importorskip("onnxruntime")
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    emb = OnnxEmbedder(packaged_model_path())
    emb.embed(["Where did Marie Curie work?", "Paris"])
    assert emb._int8 is None
    emb.embed(passages(1))
    assert emb._int8 is not None


def test_the_onnx_session_does_not_busy_wait_between_calls():
    """Spinning onnxruntime threads held the 2 cores after each embed, so the query's
    searches right after it waited for them (RESULTS §10): the session must not spin."""
    pytest.importorskip("onnxruntime")
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    emb = OnnxEmbedder(packaged_model_path())
    emb.embed(["warm"])
    opts = emb._session.get_session_options()
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_default_embedder_uses_onnx_when_installed_and_torch_when_asked(monkeypatch):
    pytest.importorskip("onnxruntime")
    assert type(as_embedder(None)).__name__ == "OnnxEmbedder"
    assert as_embedder(None).quantized is True
    monkeypatch.setenv("REMINDRAG_EMBEDDER_BACKEND", "onnx-fp32")
    assert as_embedder(None).quantized is False
    monkeypatch.setenv("REMINDRAG_EMBEDDER_BACKEND", "torch")
    assert isinstance(as_embedder(None), SentenceTransformerEmbedder)
    monkeypatch.setenv("REMINDRAG_EMBEDDER_BACKEND", "gpu")
    with pytest.raises(ConfigError, match="REMINDRAG_EMBEDDER_BACKEND"):
        as_embedder(None)


@pytest.mark.parametrize(
    "name", ["sentence-transformers/all-MiniLM-L6-v3", "no such model", "./missing-dir"]
)
def test_a_bad_embedder_name_is_an_embedding_error_at_once(monkeypatch, name):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(EmbeddingError, match="embedder"):
        as_embedder(name)


def test_load_of_a_missing_directory_says_so(tmp_path):
    with pytest.raises(StoreNotFoundError, match="no such directory"):
        ReMindRAG.load(tmp_path / "nonexistent")


class NamedHash(HashEmbedder):
    def __init__(self, identity: str, dim: int = 64) -> None:
        super().__init__(dim)
        self.identity = identity


def test_save_records_the_embedder_and_load_uses_it(tmp_path):
    engine = ReMindRAG()  # the packaged embedder
    engine.insert(["Marie Curie worked in Paris."])
    engine.save(tmp_path / "s")
    saved = read_checked_json(tmp_path / "s" / "engine.json")
    assert saved["embedder"] == {"name": "all-MiniLM-L6-v2", "dimension": 384}
    back = ReMindRAG.load(tmp_path / "s")
    assert identity_of(back.embedder) == "all-MiniLM-L6-v2"
    assert back.retrieve("Where did Marie Curie work?").chunks


def test_load_with_another_embedder_than_recorded_is_a_clear_error(tmp_path):
    engine = ReMindRAG(embeddings=NamedHash("hash-a"))
    engine.insert(["Marie Curie worked in Paris."])
    engine.save(tmp_path / "s")
    with pytest.raises(EmbeddingError, match="'hash-a'.*64 dimensions"):
        ReMindRAG.load(tmp_path / "s", embeddings=NamedHash("hash-b"))
    assert ReMindRAG.load(tmp_path / "s", embeddings=NamedHash("hash-a")).retrieve("Paris")


def test_load_without_a_rebuildable_embedder_asks_for_one(tmp_path):
    engine = ReMindRAG(embeddings=HashEmbedder(64))
    engine.insert(["Marie Curie worked in Paris."])
    engine.save(tmp_path / "s")
    with pytest.raises(ConfigError, match="pass embeddings="):
        ReMindRAG.load(tmp_path / "s")
    assert ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder(64)).retrieve("Paris")
