"""``store="DIR"`` is the store in that folder, as Chroma's ``persist_directory`` is: made when
missing, written as documents and memory change (each write call one transaction, none for a
read or a write that changed nothing: counted, not timed), and a folder that holds nothing is
never taken for an empty knowledge base.
``~`` is expanded in ``store=``, ``load``, ``save`` and the command line's ``--store``. Each test
failed on the code before the change."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document as LCDocument
from langchain_text_splitters import RecursiveCharacterTextSplitter

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.core.types import Document
from remindrag_integrations.errors import (
    EmptyCorpusWarning,
    StoreEmptyError,
    StoreExistsError,
    StoreNotFoundError,
)
from remindrag_integrations.stores import SQLiteGraphStore
from remindrag_integrations.testing import HashEmbedder

POLICY = (
    "Refunds are paid within 14 days of the return. The warehouse in Leeds checks every "
    "parcel first.\n\nParcels ship from the Leeds warehouse on Mondays and Thursdays. "
    "Express parcels ship every weekday.\n\nThe helpdesk answers calls on weekdays from nine."
)
QUESTION = "How long do refunds take?"


@pytest.fixture
def saves(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every write transaction of a folder store that changed rows, by folder."""
    done: list[Path] = []
    real = SQLiteGraphStore._persist

    def spy(self: SQLiteGraphStore, con: Any) -> None:
        if any(getattr(self, name).log for name in ("_docs", "_nodes", "_edges", "_memory")):
            done.append(self.root)
        real(self, con)

    monkeypatch.setattr(SQLiteGraphStore, "_persist", spy)
    return done


def _pieces() -> list[LCDocument]:
    splitter = RecursiveCharacterTextSplitter(chunk_size=120, chunk_overlap=0)
    return splitter.split_documents([LCDocument(POLICY, metadata={"source": "policy.txt"})])


def test_from_documents_with_a_new_folder_makes_it_and_writes_it(tmp_path: Path) -> None:
    where = tmp_path / "data" / "new"  # two levels missing
    retriever = ReMindRetriever.from_documents(
        _pieces(), embeddings=HashEmbedder(), store=str(where), k=2
    )
    assert where.is_dir() and SQLiteGraphStore.exists(where)
    again = ReMindRetriever.load(where, embeddings=HashEmbedder())
    assert sorted(again.engine.store.document_ids()) == sorted(
        retriever.engine.store.document_ids()
    )
    assert len(again.invoke(QUESTION)) == 2  # its k was saved with it


def test_from_texts_with_a_new_folder_writes_every_change(tmp_path: Path) -> None:
    where = tmp_path / "new"
    texts = POLICY.split("\n\n")
    retriever = ReMindRetriever.from_texts(
        texts, ids=["refunds", "shipping", "helpdesk"], embeddings=HashEmbedder(), store=where
    )
    docs = retriever.invoke(QUESTION)
    write = retriever.memorize(supporting=[docs[0].id])
    assert write.applied
    on_disk = SQLiteGraphStore.open(where)  # a second connection: what is on disk
    assert on_disk.counts()["documents"] == 3
    assert on_disk.export_memory() == retriever.engine.store.export_memory()
    retriever.delete(["helpdesk"])
    assert on_disk.document_ids() == retriever.engine.store.document_ids()


def test_one_save_per_write_call_and_none_for_reads_or_no_change(
    tmp_path: Path, saves: list[Path]
) -> None:
    where = tmp_path / "kb"
    eng = ReMindRAG(embeddings=HashEmbedder(), store=where, index_config=None)
    eng.index_config = eng.index_config.with_overrides(insert_batch_documents=1)
    docs = [Document(f"d{i}", t) for i, t in enumerate(POLICY.split("\n\n"))]
    eng.insert(docs)  # three batches: three transactions
    assert saves == [where.resolve()] * 3
    eng.insert(docs)  # unchanged: nothing to save
    r = eng.retrieve(QUESTION)
    eng.answer(QUESTION)
    assert len(saves) == 3
    eng.memorize(r.trace_id, supporting=[r.chunks[0].chunk.id])
    assert len(saves) == 4
    eng.memorize(r.trace_id, supporting=[r.chunks[0].chunk.id])  # once per trace: skipped
    eng.delete(["no-such-doc"])
    assert len(saves) == 4
    eng.delete(["d2"])
    eng.feedback(eng.retrieve(QUESTION).trace_id, helpful=True)
    eng.decay_memory(0.5)
    assert len(saves) == 7
    asyncio.run(eng.ainsert([Document("d9", "Gift cards never expire.")]))
    assert len(saves) == 8
    assert ReMindRAG.load(where, embeddings=HashEmbedder()).store.counts() == eng.store.counts()


def test_an_interrupted_insert_keeps_and_saves_the_batches_it_finished(tmp_path: Path) -> None:
    where = tmp_path / "kb"
    eng = ReMindRAG(embeddings=HashEmbedder(), store=where)
    eng.index_config = eng.index_config.with_overrides(insert_batch_documents=1)

    def stop(report: Any) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        eng.insert(
            [Document("a", "Refunds take 14 days."), Document("b", "Parcels ship.")], on_batch=stop
        )
    assert SQLiteGraphStore.open(where).document_ids() == ["a"]


def test_a_mistyped_folder_is_not_an_empty_knowledge_base(tmp_path: Path) -> None:
    real = tmp_path / "kb"
    ReMindRAG(embeddings=HashEmbedder(), store=real).insert([Document("a", POLICY)])
    typo = tmp_path / "kb-typo"
    with pytest.raises(StoreEmptyError, match="kb-typo holds no documents.*mistyped"):
        ReMindRAG(embeddings=HashEmbedder(), store=str(typo)).retrieve(QUESTION)
    with pytest.warns(EmptyCorpusWarning, match="kb-typo holds none"):  # made empty above
        retriever = ReMindRetriever.from_documents([], embeddings=HashEmbedder(), store=str(typo))
    with pytest.raises(StoreNotFoundError):  # StoreEmptyError is one
        retriever.invoke(QUESTION)
    other = tmp_path / "kb-other-typo"  # no documents and no store there: refused, nothing made
    with pytest.raises(StoreNotFoundError, match="no store at"):
        ReMindRetriever.from_documents([], embeddings=HashEmbedder(), store=str(other))
    assert not other.exists()
    with pytest.raises(StoreNotFoundError):
        ReMindRAG.load(tmp_path / "kb-other")  # the strict open refuses it outright
    # the right folder answers, with no need to save: every write was saved
    assert ReMindRAG(embeddings=HashEmbedder(), store=str(real)).retrieve(QUESTION).chunks


def test_a_store_emptied_by_deletes_says_so(tmp_path: Path) -> None:
    eng = ReMindRAG(embeddings=HashEmbedder(), store=tmp_path / "kb")
    eng.insert([Document("a", POLICY)])
    assert eng.retrieve(QUESTION).chunks
    eng.delete(["a"])
    with pytest.raises(StoreEmptyError, match="holds no documents"):
        eng.retrieve(QUESTION)


def test_a_folder_of_other_files_is_refused_before_any_work(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(StoreExistsError, match="not a saved store"):
        ReMindRAG(embeddings=HashEmbedder(), store=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_a_saved_engine_opens_with_its_configuration(tmp_path: Path) -> None:
    eng = ReMindRAG(embeddings=HashEmbedder(), store=tmp_path / "kb")
    eng.retrieval_config = eng.retrieval_config.with_overrides(k=2)
    eng.insert([Document("a", POLICY)])  # saved with k=2
    assert ReMindRAG(embeddings=HashEmbedder(), store=tmp_path / "kb").retrieval_config.k == 2


def test_two_engines_on_one_folder_keep_both_writes(tmp_path: Path) -> None:
    where = tmp_path / "kb"
    ReMindRAG(embeddings=HashEmbedder(), store=where).insert([Document("a", POLICY)])
    first = ReMindRAG(embeddings=HashEmbedder(), store=where)
    second = ReMindRAG(embeddings=HashEmbedder(), store=where)
    first.insert([Document("b", "Gift cards never expire.")])
    second.insert([Document("c", "Vouchers are sent by e-mail.")])  # no conflict to handle
    assert sorted(first.store.document_ids()) == ["a", "b", "c"]  # each sees the other's
    assert sorted(SQLiteGraphStore.open(where).document_ids()) == ["a", "b", "c"]


def test_a_tilde_is_the_home_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    eng = ReMindRAG(embeddings=HashEmbedder(), store="~/kb")
    eng.insert([Document("a", POLICY)])
    assert eng.directory == tmp_path / "kb" and SQLiteGraphStore.exists(tmp_path / "kb")
    assert not Path("~").exists()  # no folder named "~" in the working directory
    eng.save("~/copy")
    assert ReMindRAG.load("~/copy", embeddings=HashEmbedder()).store.document_ids() == ["a"]
    eng.export_memory("~/memory.json")  # memory files too
    assert (tmp_path / "memory.json").exists() and eng.import_memory("~/memory.json") >= 0


def test_the_command_line_and_an_mcp_config_expand_a_tilde(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remindrag_integrations.app.cli import build_parser, main
    from remindrag_integrations.app.mcp_service import check_store

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text(POLICY)
    # an MCP client's config passes its args with no shell between: "~" arrives as it is
    assert main(["index", str(tmp_path / "a.txt"), "--store", "~/kb"]) == 0
    assert SQLiteGraphStore.exists(tmp_path / "kb") and not (tmp_path / "~").exists()
    args = build_parser().parse_args(["mcp", "--store", "~/kb"])
    assert args.store == str(tmp_path / "kb")
    check_store(args)  # found
    dsn = "postgresql://u@h/db?x=~"
    assert build_parser().parse_args(["mcp", "--store", dsn]).store == dsn
