"""One document, one version, whatever the pieces.

The pieces of one document, as the frameworks make them (a text splitter's output, a loader's
pages, LlamaIndex nodes of one parent, an ``IngestionPipeline`` with or without a docstore),
are one document: re-adding its edited version replaces every old piece whatever their
number, memory carries over, ``delete([doc_id])`` removes it all, and a document named by a
file is the same however the path is spelled (Python, CLI, MCP)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pg_fixture
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core import SimpleDirectoryReader
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.storage.docstore import SimpleDocumentStore

from remindrag_integrations import Document, ReMindRAG, ReMindRetriever
from remindrag_integrations.errors import EmbeddingError, InvalidArgumentError
from remindrag_integrations.testing import HashEmbedder

REFUNDS_14 = "Refunds take 14 days from the day the warehouse receives the parcel."
REFUNDS_30 = "Refunds take 30 days from the day the warehouse receives the parcel."
SHIPPING = "Shipping is free for every order over fifty euros in the whole country."
RETURNS = "Returned items must be unused and in their original box with the receipt."
QUESTION = "How long do refunds take?"


def _texts(results: list[Any]) -> list[str]:
    return [getattr(r, "page_content", None) or r.node.get_content() for r in results]


def _splitter(start_index: bool) -> RecursiveCharacterTextSplitter:
    # one sentence a piece: chunk_size just above the longest sentence
    return RecursiveCharacterTextSplitter(
        chunk_size=80, chunk_overlap=0, separators=["\n\n"], add_start_index=start_index
    )


def _lc(text: str, key: str = "source", name: str = "policy") -> LCDocument:
    return LCDocument(page_content=text, metadata={key: name})


def _retriever(docs: list[Any]) -> ReMindRetriever:
    return ReMindRetriever.from_documents(docs, embeddings=HashEmbedder(), k=5)


# --- 1. LangChain splitter output: any piece count -------------------------------------------


@pytest.mark.parametrize("key", ["source", "file_path"])
@pytest.mark.parametrize("start_index", [False, True])
@pytest.mark.parametrize(
    ("before", "after"),
    [
        ([REFUNDS_14, SHIPPING], [REFUNDS_30]),  # 2 pieces -> 1
        ([REFUNDS_14], [SHIPPING, REFUNDS_30, RETURNS]),  # 1 -> 3
        ([SHIPPING, REFUNDS_14, RETURNS], [REFUNDS_30, SHIPPING]),  # 3 -> 2, moved
    ],
)
def test_a_split_document_edited_keeps_no_stale_piece(
    key: str, start_index: bool, before: list[str], after: list[str]
) -> None:
    split = _splitter(start_index).split_documents
    r = _retriever(split([_lc("\n\n".join(before), key)]))
    assert r.engine.store.document_ids() == ["policy"]
    r.add_documents(split([_lc("\n\n".join(after), key)]))
    got = _texts(r.invoke(QUESTION))
    assert REFUNDS_30 in got and REFUNDS_14 not in got
    assert sorted(c.text for c in r.engine.store.document_chunks("policy")) == sorted(after)
    assert r.engine.store.document_ids() == ["policy"]
    report = r.delete(["policy"])
    assert report["documents"] == 1 and report["chunks"] == len(after)
    assert r.engine.store.document_ids() == [] and r.invoke(QUESTION) == []


def test_a_piece_keeps_its_own_metadata_and_the_document_what_all_share() -> None:
    pieces = _splitter(True).split_documents(
        [LCDocument(page_content=f"{REFUNDS_14}\n\n{SHIPPING}", metadata={"source": "p", "x": 1})]
    )
    r = _retriever(pieces)
    docs = r.invoke("free shipping over fifty euros")
    ship = next(d for d in docs if d.page_content == SHIPPING)
    assert ship.metadata["start_index"] == len(REFUNDS_14) + 2 and ship.metadata["x"] == 1
    assert ship.metadata["remindrag"]["doc_id"] == "p"
    assert "piece" not in ship.metadata["remindrag"]  # the library's bookkeeping stays inside
    assert r.invoke("refunds", filter={"x": 1})  # a shared key filters the document


# --- 2. LlamaIndex nodes: SentenceSplitter, IngestionPipeline ----------------------------------


def _nodes(text: str, doc_id: str = "policy") -> list[Any]:
    doc = LIDocument(text=text, id_=doc_id)
    return SentenceSplitter(chunk_size=24, chunk_overlap=0).get_nodes_from_documents([doc])


def test_sentence_splitter_nodes_are_their_document() -> None:
    old = _nodes(f"{REFUNDS_14} {SHIPPING}")
    assert len(old) == 2 and old[0].ref_doc_id == "policy"
    r = _retriever(old)
    assert r.engine.store.document_ids() == ["policy"]
    r.add_documents(_nodes(REFUNDS_30))  # the edited document: 2 nodes -> 1
    got = _texts(r.retrieve(QUESTION))
    assert REFUNDS_30 in got and REFUNDS_14 not in got and SHIPPING not in got
    (n,) = r.retrieve(QUESTION)[:1]
    assert n.node.ref_doc_id == "policy"
    assert r.delete(["policy"])["not_found"] == [] and r.engine.store.document_ids() == []


@pytest.mark.parametrize("docstore", [False, True])
def test_ingestion_pipeline_output_replaces_the_old_version(docstore: bool) -> None:
    store = SimpleDocumentStore() if docstore else None
    pipeline = IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=24, chunk_overlap=0)],
        docstore=store,
        docstore_strategy=DocstoreStrategy.DUPLICATES_ONLY,  # no vector store of its own
    )
    first = pipeline.run(documents=[LIDocument(text=f"{REFUNDS_14} {SHIPPING}", id_="policy")])
    r = _retriever(first)
    edited = [LIDocument(text=f"{RETURNS} {REFUNDS_30} {SHIPPING}", id_="policy")]
    again = pipeline.run(documents=edited)
    assert len(again) == 3  # the docstore lets a changed document through
    r.add_documents(again)
    got = _texts(r.retrieve(QUESTION))
    assert REFUNDS_30 in got and REFUNDS_14 not in got
    assert r.engine.store.document_ids() == ["policy"]
    assert len(r.engine.store.document_chunks("policy")) == 3


def test_a_pdf_read_page_by_page_edited_to_one_page(tmp_path: Path) -> None:
    from fpdf import FPDF

    def pdf(pages: list[str]) -> None:
        out = FPDF()
        out.set_font("Helvetica", size=12)
        for text in pages:
            out.add_page()
            out.multi_cell(0, 8, text)
        out.output(str(tmp_path / "policy.pdf"))

    pdf([REFUNDS_14, SHIPPING])
    pages = SimpleDirectoryReader(str(tmp_path)).load_data()
    assert len(pages) == 2  # LlamaIndex reads a PDF page by page
    r = _retriever(pages)
    pdf([REFUNDS_30])
    r.add_documents(SimpleDirectoryReader(str(tmp_path)).load_data())
    got = " ".join(_texts(r.retrieve(QUESTION)))
    assert "30 days" in got and "14 days" not in got and "Shipping" not in got
    assert r.engine.store.document_ids() == [str((tmp_path / "policy.pdf").resolve())]


# --- 3. pieces over several calls --------------------------------------------------------------


def test_pieces_over_several_calls_inside_batches_are_one_version() -> None:
    split = _splitter(True).split_documents
    r = _retriever(split([_lc(f"{REFUNDS_14}\n\n{SHIPPING}\n\n{RETURNS}")]))
    pieces = split([_lc(f"{SHIPPING}\n\n{REFUNDS_30}\n\n{RETURNS}")])
    with r.batches():
        for piece in pieces:  # a batch of one piece each: the edited document in 3 calls
            r.add_documents([piece])
    stored = sorted(c.text for c in r.engine.store.document_chunks("policy"))
    assert stored == sorted([SHIPPING, REFUNDS_30, RETURNS])
    got = _texts(r.invoke(QUESTION))
    assert REFUNDS_30 in got and REFUNDS_14 not in got
    # outside the block, each call gives the whole document (the documented rule)
    r.add_documents(pieces[:1])
    assert [c.text for c in r.engine.store.document_chunks("policy")] == [SHIPPING]


class _Down(HashEmbedder):
    def embed(self, texts: Any) -> Any:
        raise ConnectionError("embedding provider down")


def test_a_failed_call_inside_batches_is_retried_as_the_first() -> None:
    split = _splitter(True).split_documents
    r = _retriever(split([_lc(f"{REFUNDS_14}\n\n{SHIPPING}")]))
    pieces = split([_lc(f"{REFUNDS_30}\n\n{RETURNS}")])
    working = r.engine.embedder
    with r.batches():
        r.engine.embedder = _Down()
        with pytest.raises(EmbeddingError):
            r.add_documents(pieces[:1])
        r.engine.embedder = working
        for piece in pieces:  # the retry: its first call still replaces the old version
            r.add_documents([piece])
    assert [c.text for c in r.engine.store.document_chunks("policy")] == [REFUNDS_30, RETURNS]


def test_llamaindex_nodes_of_one_parent_version_join_over_calls() -> None:
    r = _retriever(_nodes(f"{REFUNDS_14} {SHIPPING}"))
    nodes = _nodes(f"{RETURNS} {REFUNDS_30} {SHIPPING}")
    r.add_documents(nodes[:2])  # the edited document's nodes in two batches, no block
    r.add_documents(nodes[2:])
    stored = sorted(c.text.strip() for c in r.engine.store.document_chunks("policy"))
    assert stored == sorted([RETURNS, REFUNDS_30, SHIPPING])
    assert REFUNDS_14 not in _texts(r.retrieve(QUESTION))
    unchanged = r.add_documents(nodes[:1])  # the same node again: nothing lost or rewritten
    assert unchanged.documents == 0 and len(r.engine.store.document_chunks("policy")) == 3


# --- 4. one file, one id however its path is spelled ------------------------------------------


@pytest.fixture
def corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir()
    (folder / "policy.txt").write_text(REFUNDS_14, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return folder


def test_a_loader_path_spelled_relative_or_absolute_is_one_document(corpus: Path) -> None:
    absolute = str(corpus / "policy.txt")
    r = _retriever([_lc(REFUNDS_14, name=absolute)])  # DirectoryLoader("/abs/corpus")
    r.add_documents([_lc(REFUNDS_30, name="corpus/policy.txt")])  # DirectoryLoader("corpus")
    assert r.engine.store.document_ids() == [str(Path(absolute).resolve())]
    got = _texts(r.invoke(QUESTION))
    assert REFUNDS_30 in got and REFUNDS_14 not in got
    assert r.delete(["./corpus/policy.txt"])["documents"] == 1  # delete by any spelling


def test_simple_directory_reader_relative_or_absolute_is_one_document(corpus: Path) -> None:
    r = _retriever(SimpleDirectoryReader(str(corpus.resolve())).load_data())
    (corpus / "policy.txt").write_text(REFUNDS_30, encoding="utf-8")
    r.add_documents(SimpleDirectoryReader("corpus").load_data())
    assert len(r.engine.store.document_ids()) == 1
    assert REFUNDS_14 not in _texts(r.retrieve(QUESTION))
    filename_as_id = SimpleDirectoryReader("corpus", filename_as_id=True).load_data()
    assert r.add_documents(filename_as_id).documents == 0  # its id is the same file's
    # the same file through a LangChain loader, spelled relative (TextLoader("corpus/..."))
    r.add_documents([_lc(RETURNS, name="corpus/policy.txt")])
    assert r.engine.store.document_ids() == [str((corpus / "policy.txt").resolve())]
    assert _texts(r.retrieve("original box receipt")) == [RETURNS]


def test_cli_index_of_a_folder_then_of_its_file_is_one_document(corpus: Path) -> None:
    from test_cli import run

    from remindrag_integrations.stores import SQLiteGraphStore

    store = corpus.parent / "store"
    run("index", "corpus", "--store", str(store), cwd=corpus.parent)
    (corpus / "policy.txt").write_text(REFUNDS_30, encoding="utf-8")
    run("index", "corpus/policy.txt", "--store", str(store), cwd=corpus.parent)
    loaded = SQLiteGraphStore.load(store)
    try:
        assert loaded.document_ids() == [str((corpus / "policy.txt").resolve())]
        (chunk,) = loaded.document_chunks(loaded.document_ids()[0])
        assert chunk.text == REFUNDS_30
    finally:
        loaded.close()


def test_mcp_add_documents_paths_name_one_file_once(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remindrag_integrations.app.mcp_service import StoreService

    monkeypatch.setenv("HOME", str(corpus.parent))
    server = SimpleNamespace(local_files=True)
    spellings = ["~/corpus/policy.txt", "corpus/policy.txt", str(corpus / "policy.txt")]
    ids = {StoreService._documents(server, None, [p], None, None)[0].id for p in spellings}  # type: ignore[arg-type]
    assert ids == {str((corpus / "policy.txt").resolve())}


# --- 5. stores built before: their ids ---------------------------------------------------------


def test_an_old_stores_numbered_and_relative_ids_are_replaced(corpus: Path) -> None:
    engine = ReMindRAG(embeddings=HashEmbedder())
    # what earlier releases stored: a source's pieces numbered, a path as it was spelled
    engine.insert(
        [
            Document("corpus/policy.txt#0", REFUNDS_14, {"source": "corpus/policy.txt"}),
            Document("corpus/policy.txt#1", SHIPPING, {"source": "corpus/policy.txt"}),
            Document("faq.txt#0", "The office opens at nine.", {"source": "faq.txt"}),
            Document("faq.txt#1", "The office closes at five.", {"source": "faq.txt"}),
        ]
    )
    r = ReMindRetriever(engine=engine, k=5)
    trace = r.invoke(QUESTION)[0].metadata["remindrag"]["trace_id"]
    r.feedback(trace, True, [engine.store.document_chunks("corpus/policy.txt#0")[0].id])
    report = r.add_documents([_lc(REFUNDS_30, name="corpus/policy.txt")])
    assert report.memory["moved"] > 0  # the old piece's memory went to its successor
    assert sorted(engine.store.document_ids()) == sorted(
        ["faq.txt#0", "faq.txt#1", str((corpus / "policy.txt").resolve())]
    )
    assert REFUNDS_14 not in _texts(r.invoke(QUESTION))
    gone = r.delete(["faq.txt"])  # the document's old numbered pieces, by its id
    assert gone["documents"] == 2 and gone["not_found"] == []


# --- 6. memory carries over a change of piece count ------------------------------------------


def test_memory_carries_over_when_the_piece_count_changes() -> None:
    split = _splitter(False).split_documents
    r = _retriever(split([_lc(f"{REFUNDS_14}\n\n{SHIPPING}")]))
    docs = r.invoke(QUESTION)
    refund = next(d for d in docs if d.page_content == REFUNDS_14)
    assert r.feedback(None, True, [refund.id]).applied
    edited = "Refunds take 14 days from the day the warehouse receives the parcel back."
    report = r.add_documents(split([_lc(f"{RETURNS}\n\n{edited}\n\n{SHIPPING}")]))
    assert report.memory["moved"] + report.memory["kept"] > 0
    assert r.engine.store.touched_edges() > 0


# --- 7. what delete and add take --------------------------------------------------------------


def test_a_chunk_id_given_to_delete_is_refused_naming_its_document() -> None:
    r = _retriever(_splitter(False).split_documents([_lc(f"{REFUNDS_14}\n\n{SHIPPING}")]))
    chunk = r.invoke(QUESTION)[0].id
    with pytest.raises(InvalidArgumentError, match=r"chunk id .*'policy'.*delete\(\['policy'\]\)"):
        r.delete([chunk])
    with pytest.raises(InvalidArgumentError, match="chunk id"):
        r.delete(["policy", chunk])  # nothing deleted: the document is still there
    assert r.engine.store.document_ids() == ["policy"]
    assert r.delete(["c-0000000000"])["not_found"] == ["c-0000000000"]  # no such chunk


def test_none_instead_of_documents_is_a_typed_error_saying_what_to_pass() -> None:
    with pytest.raises(InvalidArgumentError, match="list of documents"):
        ReMindRetriever.from_documents(None, embeddings=HashEmbedder())  # type: ignore[arg-type]
    r = _retriever([_lc(REFUNDS_14)])
    with pytest.raises(InvalidArgumentError, match="list of documents"):
        r.add_documents(None)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="list of documents"):
        r.engine.insert(None)  # type: ignore[arg-type]


def test_the_engine_takes_a_document_in_pieces() -> None:
    from remindrag_integrations import Piece

    engine = ReMindRAG(embeddings=HashEmbedder())
    engine.insert([Document("policy", "", pieces=(Piece(REFUNDS_14), Piece(SHIPPING)))])
    assert len(engine.store.document_chunks("policy")) == 2
    engine.insert([Document("policy", REFUNDS_30)])
    got = [c.chunk.text for c in engine.retrieve(QUESTION).chunks]
    assert REFUNDS_30 in got and REFUNDS_14 not in got and SHIPPING not in got


def test_a_path_id_is_resolved_from_the_current_folder(corpus: Path) -> None:
    os.chdir(corpus)
    r = _retriever([_lc(REFUNDS_14, name="policy.txt")])
    assert r.engine.store.document_ids() == [str((corpus / "policy.txt").resolve())]
    r.add_documents([_lc(SHIPPING, name="no-such-file.txt")])  # not a file: kept as given
    assert "no-such-file.txt" in r.engine.store.document_ids()


def test_nodes_whose_parent_has_no_hash_are_a_new_version() -> None:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    def nodes(*texts: str) -> list[TextNode]:
        parent = RelatedNodeInfo(node_id="policy")  # built by hand: no hash to compare
        return [TextNode(text=t, relationships={NodeRelationship.SOURCE: parent}) for t in texts]

    r = _retriever(nodes(REFUNDS_14, SHIPPING))
    r.add_documents(nodes(REFUNDS_30))
    assert [c.text for c in r.engine.store.document_chunks("policy")] == [REFUNDS_30]


# --- 8. the same on PostgreSQL -----------------------------------------------------------------

pg_dsn = pg_fixture.pg_dsn  # the session's server (started once per process)
make_pg_store = pg_fixture.make_pg_store


def test_one_document_one_version_on_postgres(make_pg_store: Any) -> None:
    engine = ReMindRAG(embeddings=HashEmbedder(), store=make_pg_store("versions"))
    engine.insert(  # an old release's numbered pieces
        [
            Document("policy#0", REFUNDS_14, {"source": "policy"}),
            Document("policy#1", SHIPPING, {"source": "policy"}),
        ]
    )
    r = ReMindRetriever(engine=engine, k=5)
    split = _splitter(True).split_documents
    r.add_documents(split([_lc(f"{RETURNS}\n\n{REFUNDS_14}\n\n{SHIPPING}")]))
    assert engine.store.document_ids() == ["policy"]
    with r.batches():
        for piece in split([_lc(f"{REFUNDS_30}\n\n{SHIPPING}")]):
            r.add_documents([piece])
    assert [c.text for c in engine.store.document_chunks("policy")] == [REFUNDS_30, SHIPPING]
    got = _texts(r.invoke(QUESTION))
    assert REFUNDS_30 in got and REFUNDS_14 not in got and RETURNS not in got
    with pytest.raises(InvalidArgumentError, match="chunk id"):
        r.delete([r.invoke(QUESTION)[0].id])
    assert r.delete(["policy"])["chunks"] == 2 and engine.store.document_ids() == []


def test_a_bad_piece_is_a_typed_error_naming_its_document() -> None:
    from remindrag_integrations import Piece
    from remindrag_integrations.errors import InvalidDocumentError

    engine = ReMindRAG(embeddings=HashEmbedder())
    for bad in (Piece(b"bytes"), Piece("ok", None), Piece("ok", {"blob": b"ab"}), "text"):  # type: ignore[arg-type]
        with pytest.raises(InvalidDocumentError, match="'policy'"):
            engine.insert([Document("policy", "", pieces=(Piece(REFUNDS_14), bad))])  # type: ignore[arg-type]
    assert engine.store.document_ids() == []


def test_plain_texts_and_tuples_pass_beside_framework_documents() -> None:
    r = _retriever(["Kiwis are flightless birds.", ("emu", "Emus live in Australia.")])
    r.add_documents([_lc(REFUNDS_14), "Kiwis are flightless birds.", _lc(SHIPPING, name="s")])
    assert len(r.engine.store.document_ids()) == 4
