"""The packaged embedder on onnxruntime gives sentence-transformers' vectors; bad embedder
names fail at once; a saved engine records its embedder and ``load`` uses or checks it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from remindrag_integrations import ReMindRAG
from remindrag_integrations.adapters.embeddings import (
    SentenceTransformerEmbedder,
    as_embedder,
    identity_of,
    packaged_model_path,
)
from remindrag_integrations.errors import ConfigError, EmbeddingError, StoreNotFoundError
from remindrag_integrations.stores.sqlite_store import read_settings
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


FACT = "The Zorblax lighthouse at the end of the pier is painted a vivid orange."


def long_text() -> str:
    """Real passages well past the model's 256 word pieces, a fact planted at the end."""
    return "\n".join([*passages(10), FACT])


@pytest.mark.parametrize("backend", ["onnx", "onnx-fp32", "torch"])
def test_a_long_text_is_read_whole_not_cut_at_the_window(backend):
    """The packaged model reads 256 word pieces: a longer chunk's vector was its first
    window alone, so a question about its end did not match it. Now it is the mean of its
    windows on every backend; ``long_texts="truncate"`` keeps the first window."""
    if backend != "torch":
        pytest.importorskip("onnxruntime")
    from remindrag_integrations.adapters import embeddings

    def make(how: str):
        if backend == "torch":
            return SentenceTransformerEmbedder(long_texts=how)
        from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

        return OnnxEmbedder(packaged_model_path(), quantized=backend == "onnx", long_texts=how)

    text, question = long_text(), "What colour is the Zorblax lighthouse painted?"
    whole, cut = make("windows"), make("truncate")
    assert embeddings.default_embedder().long_texts == "windows"  # type: ignore[attr-defined]
    first = cut.embed([passages(1)[0], text])
    q = whole.embed([question])[0]
    v_whole, v_cut = whole.embed([text])[0], first[1]
    assert float(q @ v_whole) > float(q @ v_cut) + 0.05
    # a text inside the window gets the same vector either way
    np.testing.assert_allclose(whole.embed(passages(1))[0], first[0], atol=1e-5)
    # and a long text's vector does not depend on what else is in the call
    np.testing.assert_allclose(whole.embed(["Paris", text, *passages(3)])[1], v_whole, atol=1e-5)


def test_backends_agree_on_long_texts():
    pytest.importorskip("onnxruntime")
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    texts = [long_text(), "Paris", *passages(2), long_text()[500:]]
    ref = SentenceTransformerEmbedder(batch_size=2).embed(texts)
    exact = OnnxEmbedder(packaged_model_path(), quantized=False).embed(texts)
    assert np.sum(exact * ref, axis=1).min() >= 0.999


def test_an_unknown_long_texts_mode_is_a_config_error(monkeypatch):
    from remindrag_integrations.adapters.embeddings import default_embedder

    with pytest.raises(ConfigError, match="long_texts"):
        default_embedder("mean")
    with pytest.raises(ConfigError, match="long_texts"):
        SentenceTransformerEmbedder(long_texts="first")
    monkeypatch.setenv("REMINDRAG_LONG_TEXTS", "truncate")
    assert default_embedder().long_texts == "truncate"  # type: ignore[attr-defined]
    assert default_embedder("windows").long_texts == "windows"  # type: ignore[attr-defined]
    monkeypatch.setenv("REMINDRAG_LONG_TEXTS", "half")
    with pytest.raises(ConfigError, match="REMINDRAG_LONG_TEXTS"):
        default_embedder()


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


def test_the_int8_products_are_exact_on_every_x86_processor():
    """The int8 session runs onnxruntime's exact uint8 x uint8 kernel where its uint8 x int8
    one can saturate (AVX2): every x86-64 processor computes the same integers (issue 32,
    docs/offline.md "Another processor"); ``exact_int8 = False`` keeps the processor's own."""
    pytest.importorskip("onnxruntime")
    from remindrag_integrations.adapters.onnx_embedder import OnnxEmbedder

    emb = OnnxEmbedder(packaged_model_path())
    exact = emb.embed(passages(2))
    opts = emb._int8.get_session_options()
    assert opts.get_session_config_entry("session.x64quantprecision") == "1"
    old = OnnxEmbedder(packaged_model_path())
    old.exact_int8 = False
    own = old.embed(passages(2))
    with pytest.raises(RuntimeError, match="x64quantprecision"):  # not set: the own kernel
        old._int8.get_session_options().get_session_config_entry("session.x64quantprecision")
    assert np.all(np.sum(exact * own, axis=1) > 0.99)  # the same model either way


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
    saved = read_settings(tmp_path / "s")["engine"]
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
