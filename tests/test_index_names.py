"""Issue 45 (LlamaIndex side): the index names LlamaIndex users reach for first
(``insert_nodes``, ``delete_ref_doc``, ``refresh_ref_docs``, ``ref_doc_info`` and their async
twins) with LlamaIndex's meanings, checked against LlamaIndex's own objects; the stored
document ids (engine, retriever); an empty corpus that says so; a refused ``store=`` path
that leaves nothing behind."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document as LCDocument
from llama_index.core import Document, SimpleDirectoryReader, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.storage.docstore.types import RefDocInfo

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.errors import (
    ConfigError,
    EmbeddingError,
    EmptyCorpusWarning,
    InvalidArgumentError,
    InvalidDocumentError,
    StoreNotFoundError,
)
from remindrag_integrations.testing import HashEmbedder

REFUNDS_30 = (
    "Refunds are accepted within 30 days of purchase. The receipt must be shown at the desk. "
    "Store credit is offered when the receipt is lost."
)
REFUNDS_45 = REFUNDS_30.replace("30 days", "45 days")
SHIPPING = (
    "Parcels ship from the Lyon warehouse every Monday. Tracking numbers are sent by e-mail. "
    "Heavy parcels travel by rail to Paris."
)
GIFTS = "Gift cards never expire and can be used in every shop of the chain."


class CountingEmbedder(HashEmbedder):
    """The hash embedder, recording every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed(texts)


def _pipeline(size: int = 24) -> IngestionPipeline:
    return IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=size, chunk_overlap=0)],
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,
    )


def _empty() -> ReMindRetriever:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmptyCorpusWarning)
        return ReMindRetriever.from_documents([], embeddings=HashEmbedder())


def _texts(r: ReMindRetriever, doc_id: str) -> str:
    return " ".join(c.text for c in r.engine.store.document_chunks(doc_id))


# --- insert_nodes and ref_doc_info, with an IngestionPipeline and its docstore ---------------


def test_insert_nodes_takes_an_ingestion_pipelines_nodes_and_ref_doc_info_lists_them() -> None:
    pipeline, r = _pipeline(), _empty()
    nodes = pipeline.run(
        documents=[Document(text=REFUNDS_30, id_="refunds"), Document(text=SHIPPING, id_="ship")]
    )
    assert len(nodes) > 2  # split: several nodes a document
    r.insert_nodes(nodes)
    info = r.ref_doc_info
    assert set(info) == {"refunds", "ship"} and all(
        isinstance(v, RefDocInfo) for v in info.values()
    )
    for doc_id, entry in info.items():  # node ids: the document's chunks, in order
        assert entry.node_ids == [c.id for c in r.engine.store.document_chunks(doc_id)]
        assert entry.node_ids and "remindrag" not in entry.metadata
    shipping_before = info["ship"].node_ids

    # the edited document: the pipeline's docstore passes on only its nodes
    again = pipeline.run(
        documents=[Document(text=REFUNDS_45, id_="refunds"), Document(text=SHIPPING, id_="ship")]
    )
    assert {n.ref_doc_id for n in again} == {"refunds"}
    r.insert_nodes(again)
    assert "45 days" in _texts(r, "refunds") and "30 days" not in _texts(r, "refunds")
    assert r.ref_doc_info["ship"].node_ids == shipping_before  # untouched
    assert r.document_ids() == ["refunds", "ship"]

    found = r.retrieve("Within how many days are refunds accepted?")
    known = {i for entry in r.ref_doc_info.values() for i in entry.node_ids}
    assert found and {n.node.node_id for n in found} <= known  # the same ids as results'


def test_insert_nodes_takes_nodes_only() -> None:
    r = _empty()
    with pytest.raises(
        InvalidArgumentError, match="insert_nodes takes LlamaIndex nodes.*add_documents"
    ):
        r.insert_nodes([LCDocument(page_content=GIFTS)])
    with pytest.raises(InvalidArgumentError, match="not one"):
        r.insert_nodes(Document(text=GIFTS))
    assert r.document_ids() == []


# --- refresh_ref_docs: what LlamaIndex's own index answers ------------------------------------


def test_refresh_ref_docs_answers_as_llama_indexs_vector_index_and_skips_the_unchanged() -> None:
    first = [Document(text=REFUNDS_30, id_="refunds"), Document(text=SHIPPING, id_="ship")]
    embedder = CountingEmbedder()
    ours = ReMindRetriever.from_documents(first, embeddings=embedder)
    theirs = VectorStoreIndex.from_documents(first, embed_model=MockEmbedding(embed_dim=8))

    edited = [
        Document(text=REFUNDS_30, id_="refunds"),  # unchanged
        Document(text=SHIPPING.replace("Monday", "Friday"), id_="ship"),  # edited
        Document(text=GIFTS, id_="gifts"),  # new
    ]
    embedder.texts.clear()
    assert ours.refresh_ref_docs(edited) == theirs.refresh_ref_docs(edited) == [False, True, True]
    assert embedder.texts and not any("Refunds" in t for t in embedder.texts)  # not re-embedded
    assert "Friday" in _texts(ours, "ship") and "Monday" not in _texts(ours, "ship")
    assert ours.document_ids() == ["gifts", "refunds", "ship"]

    embedder.texts.clear()  # all stored now: nothing to do, nothing embedded
    assert ours.refresh_ref_docs(edited) == theirs.refresh_ref_docs(edited) == [False] * 3
    assert embedder.texts == []


def test_refresh_ref_docs_flags_every_page_of_a_changed_file(tmp_path: Path) -> None:
    pages = [
        LCDocument(
            page_content=f"Page {i}: rule {i} of the handbook.", metadata={"source": "h.pdf"}
        )
        for i in range(3)
    ]
    r = _empty()
    assert (
        r.refresh_ref_docs([*pages, LCDocument(page_content=GIFTS, metadata={"source": "g"})])
        == [True] * 4
    )
    pages[1] = LCDocument(page_content="Page 1: a new rule.", metadata={"source": "h.pdf"})
    assert r.refresh_ref_docs(pages) == [True] * 3  # one document, its three pages
    assert r.refresh_ref_docs(pages) == [False] * 3
    with pytest.raises(InvalidArgumentError, match="refresh_ref_docs takes documents"):
        r.refresh_ref_docs(["a bare string has no id"])


# --- delete_ref_doc ---------------------------------------------------------------------------


def test_delete_ref_doc_removes_the_document_and_skips_an_unknown_one(caplog) -> None:
    r = ReMindRetriever.from_documents(
        [Document(text=REFUNDS_30, id_="refunds"), Document(text=GIFTS, id_="gifts")],
        embeddings=HashEmbedder(),
    )
    removed = r.delete_ref_doc("gifts", delete_from_docstore=True)
    assert removed["documents"] == 1 and "gifts" not in r.ref_doc_info
    assert all(n.node.ref_doc_id != "gifts" for n in r.retrieve("Do gift cards expire?"))
    with caplog.at_level(logging.WARNING):
        assert r.delete_ref_doc("no-such-doc")["not_found"] == ["no-such-doc"]  # as LlamaIndex
    assert "no-such-doc" in caplog.text
    with pytest.raises(InvalidArgumentError, match="one document id"):
        r.delete_ref_doc(["refunds"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="takes no verbose"):
        r.delete_ref_doc("refunds", verbose=True)
    assert r.document_ids() == ["refunds"]


def test_delete_ref_doc_finds_a_loaders_document_by_the_id_llama_index_made_up(
    tmp_path: Path, caplog
) -> None:
    (tmp_path / "policy.txt").write_text(REFUNDS_30)
    docs = SimpleDirectoryReader(str(tmp_path)).load_data()  # random ids, as by default
    r = _empty()
    r.insert_nodes(_pipeline(200).run(documents=docs))  # room for the file's metadata
    path = str((tmp_path / "policy.txt").resolve())
    assert r.document_ids() == [path]  # kept under its file: the same id at the next load
    assert r.delete_ref_doc(docs[0].id_)["documents"] == 1  # found by the parent's id
    assert r.document_ids() == []
    # a whole document keeps no record of the made-up id: not found, and the log says why
    r.add_documents(docs)
    with caplog.at_level(logging.WARNING):
        assert r.delete_ref_doc(docs[0].id_)["not_found"] == [docs[0].id_]
    assert "file_path" in caplog.text and r.document_ids() == [path]
    assert r.delete_ref_doc(docs[0].metadata["file_path"])["documents"] == 1


def test_the_async_twins() -> None:
    pipeline, r = _pipeline(), _empty()
    nodes = pipeline.run(documents=[Document(text=REFUNDS_30, id_="refunds")])

    async def session() -> tuple[list[bool], list[str]]:
        await r.ainsert_nodes(nodes)
        flags = await r.arefresh_ref_docs(
            [Document(text=REFUNDS_45, id_="refunds"), Document(text=GIFTS, id_="gifts")]
        )
        await r.adelete_ref_doc("gifts")
        return flags, r.document_ids()

    flags, ids = asyncio.run(session())
    assert flags == [True, True] and ids == ["refunds"]
    assert "45 days" in _texts(r, "refunds")


# --- the stored document ids ------------------------------------------------------------------


def test_document_ids_are_public_on_the_engine_and_the_retriever(tmp_path: Path) -> None:
    engine = ReMindRAG(embeddings=HashEmbedder(), store=tmp_path / "kb")
    engine.insert([("b", SHIPPING), ("a", REFUNDS_30)])
    assert engine.document_ids() == ["a", "b"]  # sorted
    r = ReMindRetriever.load(tmp_path / "kb", embeddings=HashEmbedder())
    assert r.document_ids() == ["a", "b"] == sorted(r.ref_doc_info)
    assert engine.changed_ids([("a", REFUNDS_30), ("b", GIFTS), ("c", GIFTS)]) == ["b", "c"]
    r.delete(["a"])
    assert engine.document_ids() == ["b"]  # the other writer's delete, seen


# --- an empty corpus is not silent -------------------------------------------------------------


def test_building_from_no_documents_warns_once_and_says_what_to_check(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "policy.txt").write_text(REFUNDS_30)
    loaded = [  # what a loader with glob="*.md" reads from a folder of .txt files: nothing
        LCDocument(page_content=p.read_text(), metadata={"source": str(p)})
        for p in folder.glob("*.md")
    ]
    with pytest.warns(EmptyCorpusWarning, match="glob that matched no file") as caught:
        r = ReMindRetriever.from_documents(loaded, embeddings=HashEmbedder())
    assert len(caught) == 1 and caught[0].filename == __file__  # the user's line
    assert issubclass(EmptyCorpusWarning, UserWarning)
    with pytest.warns(EmptyCorpusWarning, match="from_texts got no documents"):
        ReMindRetriever.from_texts([], embeddings=HashEmbedder())
    with pytest.warns(EmptyCorpusWarning, match="got only empty documents"):  # blank files
        ReMindRetriever.from_texts([" ", "\n"], embeddings=HashEmbedder())
    r.add_documents([LCDocument(page_content=REFUNDS_30, metadata={"source": "p.txt"})])
    assert r.invoke("How long do refunds take?")


def test_no_documents_over_a_store_that_holds_some_is_silent(tmp_path: Path) -> None:
    ReMindRetriever.from_texts(
        [REFUNDS_30], ids=["refunds"], embeddings=HashEmbedder(), store=tmp_path / "kb"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning: opening a store with nothing new is meant
        r = ReMindRetriever.from_documents([], embeddings=HashEmbedder(), store=tmp_path / "kb")
    assert r.document_ids() == ["refunds"]


def test_no_documents_over_a_folder_without_a_store_is_refused_and_makes_nothing(
    tmp_path: Path,
) -> None:
    typo = tmp_path / "kb-typo" / "inner"
    with pytest.raises(StoreNotFoundError, match="no store at .*kb-typo.*nothing was made"):
        ReMindRetriever.from_documents([], embeddings=HashEmbedder(), store=typo)
    with pytest.raises(StoreNotFoundError, match="from_texts got no documents"):
        ReMindRetriever.from_texts([], embeddings=HashEmbedder(), store=str(typo))
    assert list(tmp_path.iterdir()) == []


# --- a refused store= path leaves nothing behind ---------------------------------------------


def test_a_build_refused_after_its_folder_was_made_removes_it(tmp_path: Path) -> None:
    where = tmp_path / "new" / "kb"
    with pytest.raises(EmbeddingError, match="no such directory"):
        ReMindRetriever.from_texts([GIFTS], store=where, embeddings=str(tmp_path / "no-model"))
    with pytest.raises(ConfigError, match="LLM spec"):
        ReMindRAG(llm="nosuchprovider:model", embeddings=HashEmbedder(), store=where)
    with pytest.raises(InvalidDocumentError):  # refused by the insert, after the engine
        ReMindRetriever.from_texts(
            [GIFTS, SHIPPING], ids=["same", "same"], embeddings=HashEmbedder(), store=where
        )
    assert list(tmp_path.iterdir()) == []
    # a folder that was there already stays, without the store the refused call made in it
    (tmp_path / "mine").mkdir()
    with pytest.raises(EmbeddingError):
        ReMindRAG(embeddings=str(tmp_path / "no-model"), store=tmp_path / "mine")
    assert list((tmp_path / "mine").iterdir()) == []
