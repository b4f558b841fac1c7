"""The frameworks' indexing idioms (issue 45): LangChain's ``index()`` with a record manager
(the retriever is a ``DocumentIndex``), parent documents (``ParentDocumentRetriever`` and
``MultiVectorRetriever`` over ``as_vectorstore()``, children added in one call or many), the
vector-store names (``add_texts``, ``get_by_ids``, ``adelete``), and documents without ids
(named by their content: the same text is one document, an edit is refused, never stored
beside its old version)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_classic.indexes import SQLRecordManager
from langchain_classic.retrievers import MultiVectorRetriever, ParentDocumentRetriever
from langchain_core.documents import Document
from langchain_core.indexing import DocumentIndex, InMemoryRecordManager, aindex, index
from langchain_core.stores import InMemoryStore
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core.node_parser import SentenceSplitter

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.errors import DocumentIdentityError, InvalidArgumentError
from remindrag_integrations.testing import HashEmbedder


class Counting(HashEmbedder):
    """The hash embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.texts = 0

    def embed(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        self.texts += len(texts)
        return super().embed(texts)


FERRY = "The Nordwind ferry carries 120 cars between Kiel and Oslo every night of the week."
PIER = "The ferry terminal in Kiel opened in {year} and has two berths for large ships."
BIKES = "Bike service costs 40 euros and takes two days at the Zephyr shop in Hamburg."
QUESTION = "When did the Kiel ferry terminal open?"


def folder(year: int, bikes: bool = True) -> list[Document]:
    """What a loader gives for a folder of two files, the ferry file split in two pieces."""
    docs = [
        Document(page_content=FERRY, metadata={"source": "ferry.txt"}),
        Document(page_content=PIER.format(year=year), metadata={"source": "ferry.txt"}),
    ]
    if bikes:
        docs.append(Document(page_content=BIKES, metadata={"source": "bikes.txt"}))
    return docs


def empty(embeddings: Any = None, **fields: Any) -> ReMindRetriever:
    """A retriever over an empty graph, as an app starts one that index() fills."""
    engine = ReMindRAG.from_fields(embeddings=embeddings or HashEmbedder(), **fields)
    return ReMindRetriever(engine=engine)


def texts_of(r: ReMindRetriever) -> list[str]:
    return sorted(d.page_content for d in r.get(r.engine.store.document_ids()))


def test_the_retriever_is_a_document_index_for_langchains_index_api() -> None:
    emb = Counting()
    r = empty(emb)
    assert isinstance(r, DocumentIndex)
    rm = InMemoryRecordManager("folder")
    rm.create_schema()
    first = index(
        folder(1865), rm, r, cleanup="incremental", source_id_key="source", key_encoder="sha256"
    )
    assert first["num_added"] == 3 and len(r.engine.store.document_ids()) == 3
    res = r.search(QUESTION)
    old = next(rc.chunk.id for rc in res.chunks if "1865" in rc.chunk.text)
    assert r.memorize(res.trace_id, supporting=[old]).applied

    spent = emb.texts
    again = index(
        folder(1865), rm, r, cleanup="incremental", source_id_key="source", key_encoder="sha256"
    )
    assert again == {"num_added": 0, "num_updated": 0, "num_skipped": 3, "num_deleted": 0}
    assert emb.texts == spent  # unchanged pieces cost no embedding

    edited = index(
        folder(1999), rm, r, cleanup="incremental", source_id_key="source", key_encoder="sha256"
    )
    assert edited["num_added"] == 1 and edited["num_deleted"] == 1
    assert texts_of(r) == sorted([BIKES, FERRY, PIER.format(year=1999)])
    assert r.memory_stats().moved >= 1  # the edited piece inherited the taught memory
    new = next(
        c
        for d in r.engine.store.document_ids()
        for c in r.engine.store.document_chunks(d)
        if "1999" in c.text
    )
    remembered = {e for e, _ in r.engine.store.top_memory(None, 50)}
    assert any(
        new.id in e or e in {x.id for x in r.engine.store.neighbors(new.id)} for e in remembered
    )
    assert all("1865" not in rc.chunk.text for rc in r.search(QUESTION).chunks)

    gone = index(
        folder(1999, bikes=False),
        rm,
        r,
        cleanup="full",
        source_id_key="source",
        key_encoder="sha256",
    )
    assert gone["num_deleted"] == 1
    assert all("Bike" not in t for t in texts_of(r))
    assert all(
        "Bike" not in rc.chunk.text for rc in r.search("What does bike service cost?").chunks
    )


def test_index_with_the_sql_record_manager_on_sqlite_and_aindex(tmp_path: Path) -> None:
    r = empty(store=tmp_path / "store")
    rm = SQLRecordManager("folder", db_url=f"sqlite:///{tmp_path / 'records.db'}")
    rm.create_schema()
    index(folder(1865), rm, r, cleanup="scoped_full", source_id_key="source", key_encoder="sha256")
    index(folder(1999), rm, r, cleanup="scoped_full", source_id_key="source", key_encoder="sha256")
    assert texts_of(r) == sorted([BIKES, FERRY, PIER.format(year=1999)])
    reopened = ReMindRetriever.load(tmp_path / "store", embeddings=HashEmbedder())
    assert texts_of(reopened) == texts_of(r)  # every write is in the folder store

    assert index([], rm, r, cleanup="full", key_encoder="sha256")["num_deleted"] == 3
    assert r.engine.store.document_ids() == []


def test_aindex_with_async_upsert_and_delete() -> None:
    r = empty()
    rm = InMemoryRecordManager("folder")
    rm.create_schema()

    async def run(docs: list[Document], cleanup: Any) -> dict:
        return await aindex(
            docs, rm, r, cleanup=cleanup, source_id_key="source", key_encoder="sha256"
        )

    assert asyncio.run(run(folder(1865), "incremental"))["num_added"] == 3
    assert asyncio.run(run(folder(1999), "incremental"))["num_deleted"] == 1
    assert asyncio.run(run([], "full"))["num_deleted"] == 3
    assert r.engine.store.document_ids() == []


def test_document_index_and_vector_store_names() -> None:
    r = empty()
    ids = r.add_texts([FERRY, BIKES], [{"topic": "sea"}, {"topic": "land"}])
    assert len(ids) == 2 and sorted(r.engine.store.document_ids()) == sorted(ids)
    got = r.get_by_ids([ids[1], "nope"])
    assert [(d.id, d.page_content, d.metadata) for d in got] == [(ids[1], BIKES, {"topic": "land"})]
    up = r.upsert([Document(id="pier", page_content=PIER.format(year=1865))])
    assert up == {"succeeded": ["pier"], "failed": []}
    r.upsert([Document(id="pier", page_content=PIER.format(year=1999))])  # replaced by id
    assert [d.page_content for d in r.get(["pier"])] == [PIER.format(year=1999)]
    with pytest.raises(InvalidArgumentError, match="needs the ids"):
        r.delete()
    with pytest.raises(InvalidArgumentError, match="not"):
        r.delete(["pier"], everything=True)

    async def run() -> tuple[Any, Any, Any]:
        added = await r.aadd_texts(["A third text about trams in Lisbon and their yellow cars."])
        fetched = await r.aget_by_ids(added)
        deleted = await r.adelete(["pier", *added])
        return added, fetched, deleted

    added, fetched, deleted = asyncio.run(run())
    assert [d.id for d in fetched] == added
    assert deleted["num_deleted"] == 2 and deleted["succeeded"] == ["pier", *added]
    assert sorted(r.engine.store.document_ids()) == sorted(ids)


STATIONS = [
    f"Station {n} of the Blue Line is {name}. It opened in {1900 + n} and serves "
    f"{n * 1000} riders a day."
    for n, name in enumerate(
        [
            "Alder",
            "Birch",
            "Cedar",
            "Dogwood",
            "Elm",
            "Fir",
            "Gum",
            "Hazel",
            "Ivy",
            "Juniper",
            "Kapok",
            "Larch",
        ],
        1,
    )
]
PARENTS = [
    Document(page_content=" ".join(STATIONS[i : i + 6]), metadata={"source": f"line{i}.txt"})
    for i in (0, 6)
]


def test_parent_document_retriever_over_as_vectorstore() -> None:
    r = empty(k=3)
    pdr = ParentDocumentRetriever(
        vectorstore=r.as_vectorstore(),
        docstore=InMemoryStore(),
        child_splitter=RecursiveCharacterTextSplitter(chunk_size=100, chunk_overlap=0),
    )
    pdr.add_documents(PARENTS)
    counts = r.engine.store.counts()
    assert counts["documents"] == 2 and counts["chunks"] == 12  # every child kept
    for station in STATIONS:
        name = station.split(" is ")[1].split(".")[0]
        parents = pdr.invoke(f"Which station is {name}?")
        assert any(station in p.page_content for p in parents), name
    assert r.last_trace_id is not None  # the children's search left a trace to memorize


@pytest.mark.parametrize("one_call", [True, False])
def test_multi_vector_children_added_in_one_call_or_many(one_call: bool) -> None:
    r = empty(k=3)
    docstore = InMemoryStore()
    mvr = MultiVectorRetriever(vectorstore=r.as_vectorstore(), docstore=docstore, id_key="doc_id")
    docstore.mset([("line-a", PARENTS[0]), ("line-b", PARENTS[1])])
    children = [
        Document(page_content=s, metadata={"doc_id": "line-a" if i < 6 else "line-b"})
        for i, s in enumerate(STATIONS)
    ]
    if one_call:
        r.add_documents(children)
    else:
        for child in children:  # the pattern's loop: one child at a time
            r.add_documents([child])
        r.add_documents(children[:2])  # given again: kept once
    assert len(r.engine.store.document_chunks("line-a")) == 6
    assert len(r.engine.store.document_chunks("line-b")) == 6
    for station in STATIONS:
        name = station.split(" is ")[1].split(".")[0]
        assert any(station in p.page_content for p in mvr.invoke(f"Which station is {name}?"))
    assert r.delete(["line-a"])["chunks"] == 6  # a parent goes with all its children


def test_llamaindex_documents_without_ids_are_one_document_and_an_edit_is_refused() -> None:
    text = (
        "Returns policy of the Zephyr bike shop in Hamburg. Customers may return any bicycle "
        "within 25 days of purchase for a full refund, provided the frame and the gears are "
        "undamaged and the receipt is shown at the counter. "
        + "Service plans renew each year in March and cover brakes, chains and tyres. "
        * 3
    )
    hours = "Opening hours are nine to six on weekdays, closed on Sundays and holidays."
    r = empty()
    splitter = SentenceSplitter(chunk_size=64, chunk_overlap=0)
    for _ in range(2):  # the same files read again: new random ids, the same documents
        nodes = splitter.get_nodes_from_documents([LIDocument(text=text), LIDocument(text=hours)])
        r.add_documents(nodes)
        assert len(r.engine.store.document_ids()) == 2
    edited = splitter.get_nodes_from_documents([LIDocument(text=text.replace("25", "30"))])
    with pytest.raises(DocumentIdentityError, match="give documents ids|Give documents ids") as e:
        r.add_documents(edited)
    assert e.value.stored and e.value.stored[0] in r.engine.store.document_ids()
    assert len(r.engine.store.document_ids()) == 2  # nothing written
    r.delete(list(e.value.stored))  # what the error says to do
    r.add_documents(edited)
    found = " ".join(rc.chunk.text for rc in r.search("How many days to return a bicycle?").chunks)
    assert "30 days" in found and "25 days" not in found


def test_langchain_pieces_without_id_or_source_resplit_edited_are_refused() -> None:
    text = (
        "The Old Bridge of Marlow was first built in 1865 by the river authority, using stone "
        "from the quarry north of the town and iron from the Severn works. "
    ) * 2
    r = empty()
    small = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0)
    r.add_documents(small.split_documents([Document(page_content=text)]))
    stored = sorted(r.engine.store.document_ids())
    r.add_documents(small.split_documents([Document(page_content=text)]))  # same: skipped
    assert sorted(r.engine.store.document_ids()) == stored
    large = RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0)
    with pytest.raises(DocumentIdentityError):
        r.add_documents(
            large.split_documents([Document(page_content=text.replace("1865", "1999"))])
        )
    with pytest.raises(DocumentIdentityError):  # unsplit too
        r.add_texts([text.replace("1865", "1999")])
    assert sorted(r.engine.store.document_ids()) == stored
    # short texts that share words are different documents, never refused
    r.add_texts(["How do I reset my password?", "How do I reset my PIN?"])
    assert len(r.engine.store.document_ids()) == len(stored) + 2


def test_unnamed_edits_add_keeps_both_versions_when_asked() -> None:
    text = (
        "The Old Bridge of Marlow was first built in 1865 by the river authority, using stone "
        "from the quarry north of the town and iron from the Severn works."
    )
    r = ReMindRetriever.from_documents(
        [Document(page_content=text)], embeddings=HashEmbedder(), unnamed_edits="add"
    )
    r.add_documents([Document(page_content=text.replace("1865", "1999"))])
    assert len(r.engine.store.document_ids()) == 2  # the caller said they are two documents
