"""What a LangChain or LlamaIndex developer hits in the first hour: each trap gave a wrong result
or lost work without an error; each test here failed on the code before the fix.

1 NumPy metadata, 2 LlamaIndex hidden keys and templates, 3 save over another store, 4 the
embedder's identity, 5 loader documents named by their source, 6 empty and repeated documents,
7 fusion, 8 conflicting / invalid ``k``, 9 ``--llm`` specs in Python."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pg_fixture
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from llama_index.core import Document as LIDocument
from llama_index.core import SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import MetadataMode

from remindrag_integrations import ConfigError, InvalidDocumentError, ReMindRAG, ReMindRetriever
from remindrag_integrations.adapters.llm import LangChainLLM
from remindrag_integrations.errors import (
    EmbedderMismatchError,
    EmptyCorpusWarning,
    InvalidArgumentError,
    StoreConflictError,
    StoreExistsError,
)
from remindrag_integrations.stores.sqlite_store import read_settings
from remindrag_integrations.testing import HashEmbedder

pg_dsn = pg_fixture.pg_dsn  # a real PostgreSQL, started once per process when a test needs it

PLACES = [
    ("curie.txt", "Marie Curie was born in Warsaw. She studied physics in Paris."),
    ("warsaw.txt", "Warsaw lies on the Vistula river in Poland."),
    ("paris.txt", "Paris lies on the Seine river in France."),
]


def _places(**extra: Any) -> list[LCDocument]:
    return [LCDocument(page_content=t, metadata={"source": s, **extra}) for s, t in PLACES]


def _texts(docs: Sequence[Any]) -> list[str]:
    return [d.page_content for d in docs]


# --- 1. NumPy numbers in metadata -------------------------------------------------------------


def test_numpy_numbers_in_metadata_stay_numbers_for_filters_and_a_save(tmp_path: Path) -> None:
    new = LCDocument(
        page_content="Kiwis are flightless birds of New Zealand.",
        metadata={
            "year": np.int64(2023),
            "score": np.float32(0.5),
            "reviewed": np.bool_(True),
            "tags": np.array([1, 2]),
        },
    )
    old = LCDocument(page_content="Moas were flightless birds, extinct.", metadata={"year": 1500})
    r = ReMindRetriever.from_documents([new, old], embeddings=HashEmbedder())
    for retriever in (r, _saved_and_loaded(r, tmp_path / "s")):
        got = retriever.invoke("Which birds are flightless?", filter={"year": {"$gte": 2020}})
        assert _texts(got) == [new.page_content]
        meta = got[0].metadata
        assert meta["year"] == 2023 and type(meta["year"]) is int
        assert meta["score"] == 0.5 and type(meta["score"]) is float
        assert meta["reviewed"] is True and meta["tags"] == [1, 2]


def _saved_and_loaded(r: ReMindRetriever, path: Path) -> ReMindRetriever:
    r.save(path)
    return ReMindRetriever.load(path, embeddings=HashEmbedder())


# --- 2. LlamaIndex hidden keys and templates --------------------------------------------------


def test_llamaindex_hidden_keys_and_templates_carry_onto_result_nodes(tmp_path: Path) -> None:
    doc = LIDocument(
        text="The vault code is kept by Alice in the ops team.",
        metadata={"secret_key": "s3cr3t", "team": "ops"},
        excluded_llm_metadata_keys=["secret_key"],
        excluded_embed_metadata_keys=["team"],
        metadata_template="{key}=>{value}",
        metadata_separator=" | ",
        text_template="META {metadata_str}\nBODY {content}",
    )
    r = ReMindRetriever.from_documents([doc], embeddings=HashEmbedder())
    for retriever in (r, _saved_and_loaded(r, tmp_path / "s")):
        (n,) = retriever.retrieve("Who keeps the vault code?")
        llm_view = n.node.get_content(MetadataMode.LLM)
        assert "s3cr3t" not in llm_view and "remindrag" not in llm_view
        assert llm_view == doc.get_content(MetadataMode.LLM)  # what LlamaIndex shows itself
        assert n.node.get_content(MetadataMode.EMBED) == doc.get_content(MetadataMode.EMBED)
        assert n.node.metadata["secret_key"] == "s3cr3t"  # hidden from the LLM, still there


def test_simple_directory_reader_keeps_its_file_keys_hidden(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "policy.txt").write_text("Refunds are accepted within 14 days of purchase.")
    docs = SimpleDirectoryReader(str(folder)).load_data()
    r = ReMindRetriever.from_documents(docs, embeddings=HashEmbedder())
    (n,) = r.retrieve("How long do I have for a refund?")
    view = n.node.get_content(MetadataMode.LLM)
    assert "file_size" not in view and "last_modified_date" not in view
    assert "file_path" in view and view == docs[0].get_content(MetadataMode.LLM)


# --- 3. save over another store or among the user's files -------------------------------------


def test_save_does_not_replace_another_store_unless_told_to(tmp_path: Path) -> None:
    d = tmp_path / "store"
    a = ReMindRetriever.from_documents(_places(), embeddings=HashEmbedder())
    a.invoke("Which river flows through Marie Curie's birthplace?")
    a.feedback(None, helpful=True)
    learned = a.memory_stats().touched_edges
    assert learned > 0
    a.save(d)
    b = ReMindRetriever.from_texts(["Emus live in Australia."], embeddings=HashEmbedder())
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        b.save(d)
    kept = ReMindRetriever.load(d, embeddings=HashEmbedder())
    assert sorted(kept.engine.store.document_ids()) == ["curie.txt", "paris.txt", "warsaw.txt"]
    assert kept.memory_stats().touched_edges == learned
    a.add_documents([LCDocument(page_content="Lyon lies on the Rhone.", metadata={"source": "l"})])
    a.save(d)  # the same store again: an update, which the live ``kept`` sees
    assert "l" in kept.engine.store.document_ids()
    kept.add_documents([LCDocument(page_content="Nice is by the sea.", metadata={"source": "n"})])
    with pytest.raises(StoreConflictError):  # kept wrote there since a's save: not replaced
        a.save(d)
    assert "n" in ReMindRetriever.load(d, embeddings=HashEmbedder()).engine.store.document_ids()
    (d / "NOTES.md").write_text("my notes on this store")  # a store folder stays one
    a.save(d, overwrite=True)
    b.save(d, overwrite=True)
    assert ReMindRetriever.load(d, embeddings=HashEmbedder()).engine.store.document_ids() == [
        b.engine.store.document_ids()[0]
    ]


def test_save_refuses_a_folder_of_the_users_own_files(tmp_path: Path) -> None:
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("buy milk")
    r = ReMindRetriever.from_texts(["Emus live in Australia."], embeddings=HashEmbedder())
    for overwrite in (False, True):
        with pytest.raises(StoreExistsError, match="todo.txt"):
            r.save(mine, overwrite=overwrite)
    assert [p.name for p in mine.iterdir()] == ["todo.txt"]  # nothing written among them
    with pytest.raises(StoreExistsError, match="a file"):
        r.save(mine / "todo.txt")
    engine = ReMindRAG(embeddings=HashEmbedder())
    with pytest.raises(StoreExistsError):
        engine.save(mine)


@pytest.mark.postgres
def test_a_database_engine_keeps_its_config_out_of_the_users_folder(
    pg_dsn: str, tmp_path: Path
) -> None:
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    store = PostgresGraphStore(pg_dsn, namespace="first-hour-save")
    try:
        engine = ReMindRAG(embeddings=HashEmbedder(), store=store)
        engine.insert(["Emus live in Australia."])
        mine = tmp_path / "notes"
        mine.mkdir()
        (mine / "todo.txt").write_text("buy milk")
        with pytest.raises(StoreExistsError, match="todo.txt"):
            engine.save(mine)
        assert [p.name for p in mine.iterdir()] == ["todo.txt"]
        for _ in range(2):  # its own folder: saved again as often as wanted
            assert (engine.save(tmp_path / "cfg") / "engine.json").is_file()
    finally:
        store.drop_namespace()
        store.close()


def test_the_cli_refuses_a_folder_of_the_users_own_files_before_indexing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from remindrag_integrations.app.cli import main

    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("Emus live in Australia.")
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("buy milk")
    assert main(["index", str(tmp_path / "docs"), "--store", str(mine), "--no-cache"]) == 2
    assert "todo.txt" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["todo.txt"]


# --- 4. the embedder's identity ---------------------------------------------------------------


class ModelEmbeddings(Embeddings):
    """A LangChain embedding class whose vectors depend on its ``model`` (as an API's do)."""

    def __init__(self, model: str, dim: int = 64) -> None:
        self.model, self.dim = model, dim

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        shift = sum(map(ord, self.model)) % self.dim
        return np.roll(HashEmbedder(self.dim).embed(texts), shift, axis=1).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


class SeededEmbeddings(ModelEmbeddings):
    """The same, with its model in an attribute no one would look for."""

    def __init__(self, seed: str) -> None:
        super().__init__(seed)
        self.seed = seed
        del self.model

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.model = self.seed
        try:
            return super().embed_documents(texts)
        finally:
            del self.model


def _saved(tmp_path: Path, embeddings: Any) -> Path:
    r = ReMindRetriever.from_documents(_places(), embeddings=embeddings)
    return r.save(tmp_path / "s")


def test_another_model_of_the_same_class_is_refused_at_load(tmp_path: Path) -> None:
    d = _saved(tmp_path, ModelEmbeddings("model-A"))
    saved = read_settings(d)["engine"]["embedder"]  # kept in the store's settings
    assert saved["name"] == "langchain:ModelEmbeddings" and saved["model"] == "model-A"
    assert saved["dimension"] == 64 and len(saved["fingerprint"]) == 64
    with pytest.raises(EmbedderMismatchError, match="model-A"):
        ReMindRetriever.load(d, embeddings=ModelEmbeddings("model-B"))
    back = ReMindRetriever.load(d, embeddings=ModelEmbeddings("model-A"))
    assert back.invoke("Where was Marie Curie born?")[0].metadata["source"] == "curie.txt"


def test_an_embedder_without_a_model_name_is_told_apart_by_its_vectors(tmp_path: Path) -> None:
    d = _saved(tmp_path, SeededEmbeddings("one"))
    with pytest.raises(EmbedderMismatchError, match="cosine"):
        ReMindRetriever.load(d, embeddings=SeededEmbeddings("two"))
    assert ReMindRetriever.load(d, embeddings=SeededEmbeddings("one")).invoke("Warsaw")


def test_the_errors_advice_for_a_framework_embedder_works(tmp_path: Path) -> None:
    d = _saved(tmp_path, DeterministicFakeEmbedding(size=64))
    with pytest.raises(ConfigError, match="DeterministicFakeEmbedding object") as asked:
        ReMindRetriever.load(d)
    with pytest.raises(EmbedderMismatchError, match="DeterministicFakeEmbedding object"):
        ReMindRetriever.load(d, embeddings=DeterministicFakeEmbedding(size=32))
    with pytest.raises(ConfigError, match="pass the object"):  # a name is not the object
        ReMindRetriever.load(d, embeddings="langchain:DeterministicFakeEmbedding")
    assert "embeddings='langchain:" not in str(asked.value)
    back = ReMindRetriever.load(d, embeddings=DeterministicFakeEmbedding(size=64))  # as advised
    assert len(back.invoke("Which river flows through Warsaw?")) == 3


class ProbeShy(ModelEmbeddings):
    """Fails on the identity probe only, as a provider that is down at save time would."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if any(t.startswith("ReMindRAG embedder fingerprint") for t in texts):
            raise ConnectionError("provider down")
        return super().embed_documents(texts)


def test_a_failing_probe_does_not_fail_the_save_and_the_model_is_still_checked(
    tmp_path: Path,
) -> None:
    d = _saved(tmp_path, ProbeShy("model-A"))
    saved = read_settings(d)["engine"]["embedder"]  # kept in the store's settings
    assert saved["model"] == "model-A" and "fingerprint" not in saved
    with pytest.raises(EmbedderMismatchError, match="model-A"):
        ReMindRetriever.load(d, embeddings=ProbeShy("model-B"))
    with pytest.raises(ConfigError, match="pass embeddings="):
        ReMindRetriever.load(d)
    assert ReMindRetriever.load(d, embeddings=ProbeShy("model-A")).invoke("Warsaw")


# --- 5. loader documents are named by their source --------------------------------------------


def test_a_reloaded_edited_file_replaces_its_old_version_langchain() -> None:
    r = ReMindRetriever.from_documents(_places(), embeddings=HashEmbedder())
    policy = "Refunds are accepted within {} days of purchase."
    r.add_documents([LCDocument(page_content=policy.format(14), metadata={"source": "p.txt"})])
    report = r.add_documents(
        [LCDocument(page_content=policy.format(30), metadata={"source": "p.txt"})]
    )
    assert report.documents == 1 and "p.txt" in r.engine.store.document_ids()
    got = _texts(r.invoke("Within how many days are refunds accepted?", k=5))
    assert policy.format(30) in got and policy.format(14) not in got
    assert len(r.engine.store.document_ids()) == 4


def test_a_reloaded_edited_file_replaces_its_old_version_llamaindex(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    path = folder / "policy.txt"
    path.write_text("Refunds are accepted within 14 days of purchase.")
    r = ReMindRetriever.from_documents(
        SimpleDirectoryReader(str(folder)).load_data(), embeddings=HashEmbedder()
    )
    path.write_text("Refunds are accepted within 30 days of purchase.")
    r.add_documents(SimpleDirectoryReader(str(folder)).load_data())
    assert r.engine.store.document_ids() == [str(path)]
    (n,) = r.retrieve("Within how many days are refunds accepted?")
    assert "30 days" in n.node.get_content()


def test_pieces_of_one_source_are_one_document() -> None:
    pages = [
        LCDocument(
            page_content=f"Page {i} of the handbook: rule {i}.", metadata={"source": "h.pdf"}
        )
        for i in range(3)
    ]
    with pytest.warns(EmptyCorpusWarning):  # an empty start, on purpose here
        r = ReMindRetriever.from_documents([], embeddings=HashEmbedder())
    assert r.add_documents([*pages, pages[1]]).duplicate_documents == 1
    assert r.engine.store.document_ids() == ["h.pdf"]  # issue 33: one document, its pages
    assert len(r.engine.store.document_chunks("h.pdf")) == 3  # the repeated page once
    again = r.add_documents(pages)
    assert again.documents == 0 and again.skipped_documents == 1


# --- 6. empty and repeated documents ----------------------------------------------------------


def test_an_empty_page_or_a_repeated_text_does_not_fail_the_insert() -> None:
    docs = [
        *_places(),
        LCDocument(page_content="  \n", metadata={"source": "blank.pdf"}),
        LCDocument(page_content="Emus live in Australia."),
        LCDocument(page_content="Emus live in Australia."),
    ]
    r = ReMindRetriever.from_documents(docs, embeddings=HashEmbedder())
    assert len(r.engine.store.document_ids()) == 4
    report = r.add_documents([*docs, LIDocument(text="", metadata={"file_path": "/x/e.txt"})])
    assert report.empty_documents == ("blank.pdf", "/x/e.txt")
    assert report.duplicate_documents == 1 and report.skipped_documents == 4
    twice = ReMindRetriever.from_texts(
        ["Kiwis fly not.", "Kiwis fly not."], embeddings=HashEmbedder()
    )
    assert len(twice.engine.store.document_ids()) == 1


def test_errors_name_the_file_and_a_single_item_is_refused() -> None:
    big = LCDocument(page_content="A long page. " * 20, metadata={"source": "big.txt"})
    with pytest.raises(InvalidDocumentError, match=r"big\.txt"):
        ReMindRetriever.from_documents([big], embeddings=HashEmbedder(), max_document_chars=100)
    nan = LCDocument(id="row-17", page_content="Odd.", metadata={"source": "n.txt", "v": np.nan})
    with pytest.raises(InvalidDocumentError, match=r"'row-17' \(n\.txt\): metadata"):
        ReMindRetriever.from_documents([nan], embeddings=HashEmbedder())
    clash = [LCDocument(id="x", page_content=t, metadata={"source": "a.txt"}) for t in "ab"]
    with pytest.raises(InvalidDocumentError, match=r"'x' \(a\.txt\).*different texts"):
        ReMindRetriever.from_documents(clash, embeddings=HashEmbedder())
    with pytest.raises(InvalidArgumentError, match="list of texts"):
        ReMindRetriever.from_texts("a string", embeddings=HashEmbedder())  # type: ignore[arg-type]
    r = ReMindRetriever.from_texts(["Emus live in Australia."], embeddings=HashEmbedder())
    for one in (big, LIDocument(text="Kiwis."), "Kiwis."):
        with pytest.raises(InvalidArgumentError, match="list"):
            r.add_documents(one)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="list"):
        ReMindRetriever.from_documents(big, embeddings=HashEmbedder())  # type: ignore[arg-type]


# --- 7. fusion ----------------------------------------------------------------------------------


class LIHashEmbedding(BaseEmbedding):
    """A deterministic LlamaIndex embedding (the test suite's bag-of-words hash)."""

    def _get_text_embedding(self, text: str) -> list[float]:
        return HashEmbedder(64).embed([text])[0].tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_text_embedding(query)


def test_query_fusion_merges_a_passage_both_retrievers_return() -> None:
    docs = [LIDocument(text=t, metadata={"source": s}) for s, t in PLACES]
    mine = ReMindRetriever.from_documents(docs, embeddings=HashEmbedder(), similarity_top_k=2)
    vector = VectorStoreIndex.from_documents(docs, embed_model=LIHashEmbedding())
    q = "Which river flows through Warsaw?"
    ours, theirs = mine.retrieve(q), vector.as_retriever(similarity_top_k=2).retrieve(q)
    again = mine.retrieve(q)
    assert (
        ours[0].node.metadata["remindrag"]["trace_id"]
        != again[0].node.metadata["remindrag"]["trace_id"]
    )
    assert ours[0].node.hash == again[0].node.hash  # per-call data is not in the hash
    both = {n.node.hash for n in ours} & {n.node.hash for n in theirs}
    assert both  # the same passage, the same hash
    fusion = QueryFusionRetriever(
        [mine, vector.as_retriever(similarity_top_k=2)],
        llm=MockLLM(),
        mode="reciprocal_rerank",
        num_queries=1,
        similarity_top_k=4,
        use_async=False,
    )
    fused = fusion.retrieve(q)
    hashes = [n.node.hash for n in fused]
    assert len(hashes) == len(set(hashes))  # each passage once
    assert set(hashes) == {n.node.hash for n in ours} | {n.node.hash for n in theirs}
    expected = {h: 0.0 for h in hashes}  # reciprocal ranks (k=60), summed over both lists
    for results in (ours, theirs):
        for rank, n in enumerate(sorted(results, key=lambda x: x.score or 0.0, reverse=True)):
            expected[n.node.hash] += 1.0 / (rank + 60)
    assert {n.node.hash: n.score for n in fused} == pytest.approx(expected)
    assert all(expected[h] > 1.0 / 60 for h in both)  # a merged passage outranks any single
    # which retriever's node a fusion keeps for a merged passage: the last one in
    # reciprocal_rerank, the first in the other modes (README); ours keeps its trace there
    for mode, order in (("reciprocal_rerank", 1), ("relative_score", -1)):
        pair = [vector.as_retriever(similarity_top_k=2), mine][::order]
        kept = QueryFusionRetriever(
            pair, llm=MockLLM(), mode=mode, num_queries=1, similarity_top_k=4, use_async=False
        ).retrieve(q)
        assert {n.node.hash for n in kept} >= both
        assert all("remindrag" in n.node.metadata for n in kept if n.node.hash in both)


# --- 8. k: conflicting or invalid --------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"k": 2, "similarity_top_k": 3}, {"k": 2, "search_kwargs": {"k": 3}}, {"k": 0}],
)
def test_from_texts_and_from_documents_refuse_what_the_constructor_refuses(kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        ReMindRetriever.from_texts(["Emus live in Australia."], embeddings=HashEmbedder(), **kwargs)
    with pytest.raises(ConfigError):
        ReMindRetriever.from_documents(_places(), embeddings=HashEmbedder(), **kwargs)


def test_an_invalid_constructor_argument_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="engine="):
        ReMindRetriever()
    engine = ReMindRAG(embeddings=HashEmbedder())
    with pytest.raises(ConfigError, match="k"):
        ReMindRetriever(engine=engine, k=0)
    with pytest.raises(ConfigError, match="engine"):
        ReMindRetriever(engine="not an engine")
    r = ReMindRetriever.from_documents(_places(), embeddings=HashEmbedder(), similarity_top_k=2)
    assert len(r.invoke("Which river flows through Warsaw?")) == 2


# --- 9. --llm specs in Python -----------------------------------------------------------------


def test_llm_specs_work_in_python_as_on_the_command_line() -> None:
    r = ReMindRetriever.from_texts(
        ["Emus live in Australia."], llm="none", embeddings=HashEmbedder()
    )
    assert r.engine.llm is None  # zero-token mode
    with pytest.raises(ConfigError, match="expected 'none'"):
        ReMindRetriever.from_texts(["Emus."], llm="nonsense", embeddings=HashEmbedder())
    with pytest.raises(ConfigError, match="no GGUF file"):
        ReMindRAG(llm="local:/no/such/model.gguf", embeddings=HashEmbedder())
    with pytest.raises(ConfigError, match="no-such-provider"):
        ReMindRAG(llm="no-such-provider:some-model", embeddings=HashEmbedder())


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="extra 'local'")
def test_a_local_model_spec_gives_the_packaged_model() -> None:
    from remindrag_integrations.adapters.local_llm import LlamaCppChatModel, smollm2_path

    r = ReMindRetriever.from_texts(["Emus."], llm="local:smollm2", embeddings=HashEmbedder())
    assert isinstance(r.engine.llm, LangChainLLM)
    model = r.engine.llm.model
    assert isinstance(model, LlamaCppChatModel) and model.model_path == "smollm2"
    assert smollm2_path().is_file()
