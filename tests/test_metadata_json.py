"""Metadata is converted the same way, or refused with the same typed error, on every path in (the
engine's insert, LangChain documents through a text splitter, LlamaIndex nodes from a
``SentenceSplitter``, ``from_texts``, the MCP tool); list-valued metadata is filterable with
``$in`` / ``$contains`` / ``$all`` and LlamaIndex's ``IN`` / ``CONTAINS`` / ``ANY`` / ``ALL``, on
the embedded store and PostgreSQL. Each test failed on the code before the change."""

from __future__ import annotations

import argparse
import datetime
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pg_fixture
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.core.types import Document
from remindrag_integrations.errors import ConfigError, InvalidDocumentError
from remindrag_integrations.testing import HashEmbedder

pg_dsn = pg_fixture.pg_dsn
make_pg_store = pg_fixture.make_pg_store

TEXT = "Refunds are paid within 14 days of the return."
GIVEN: dict[str, Any] = {
    "published": datetime.date(2024, 5, 1),
    "updated": datetime.datetime(2024, 5, 1, 9, 30, tzinfo=datetime.UTC),
    "opens": datetime.time(9, 0),
    "tags": {"refunds", "billing"},
    "ids": frozenset({3, 1, 2}),
    "pair": (1, "a"),
    "count": np.int64(3),
    "share": np.float32(0.5),
    "vector": np.array([1, 2]),
    "file": PurePosixPath("/docs/policy.txt"),
    "ref": uuid.UUID(int=1),
    "nested": {"when": datetime.date(2023, 1, 2), "plain": [1, None, True]},
}
KEPT: dict[str, Any] = {
    "published": "2024-05-01",
    "updated": "2024-05-01T09:30:00+00:00",
    "opens": "09:00:00",
    "tags": ["billing", "refunds"],
    "ids": [1, 2, 3],
    "pair": [1, "a"],
    "count": 3,
    "share": 0.5,
    "vector": [1, 2],
    "file": "/docs/policy.txt",
    "ref": "00000000-0000-0000-0000-000000000001",
    "nested": {"when": "2023-01-02", "plain": [1, None, True]},
}


def _user(metadata: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metadata.items() if k in KEPT}


def test_the_engine_keeps_dates_sets_and_numpy_as_json() -> None:
    eng = ReMindRAG(embeddings=HashEmbedder())
    eng.insert([Document("refunds", TEXT, dict(GIVEN))])
    assert eng.store.documents()["refunds"][1] == KEPT
    (hit,) = eng.retrieve("How long do refunds take?").chunks
    assert _user(hit.chunk.metadata) == KEPT


def test_langchain_documents_through_a_splitter_are_converted_alike() -> None:
    pieces = RecursiveCharacterTextSplitter(chunk_size=200).split_documents(
        [LCDocument(TEXT, metadata={**GIVEN, "source": "policy.txt"})]
    )
    retriever = ReMindRetriever.from_documents(pieces, embeddings=HashEmbedder())
    (doc,) = retriever.invoke("How long do refunds take?")
    assert _user(doc.metadata) == KEPT  # was "{'billing', 'refunds'}", "2024-05-01 00:00..."


def test_llamaindex_nodes_are_converted_alike() -> None:
    nodes = SentenceSplitter().get_nodes_from_documents([LIDocument(text=TEXT, metadata=GIVEN)])
    retriever = ReMindRetriever.from_documents(nodes, embeddings=HashEmbedder())
    (hit,) = retriever.retrieve("How long do refunds take?")
    assert _user(hit.node.metadata) == KEPT


def test_from_texts_converts_alike() -> None:
    retriever = ReMindRetriever.from_texts([TEXT], [GIVEN], embeddings=HashEmbedder())
    assert _user(retriever.invoke("refunds")[0].metadata) == KEPT


BAD = [
    ({"raw": b"ab"}, "metadata['raw'] is a bytes", "decode it"),
    ({"nested": {"blob": bytearray(b"x")}}, "metadata['nested']['blob'] is a bytearray", "decode"),
    ({"price": __import__("decimal").Decimal("1.10")}, "is a Decimal", "float or a str"),
    ({"x": float("nan")}, "metadata['x'] is nan", "None"),
    ({"when": object()}, "is a object", "convert it"),
    ({1: "a"}, "has the key 1", "str(key)"),
]


@pytest.mark.parametrize(("meta", "what", "advice"), BAD)
def test_what_has_no_json_form_is_refused_alike_on_every_path(
    meta: dict[Any, Any], what: str, advice: str
) -> None:
    retriever = ReMindRetriever.from_texts(["Parcels ship on Mondays."], embeddings=HashEmbedder())
    calls = {
        "engine insert": lambda: retriever.engine.insert([Document("d", TEXT, meta)]),
        "langchain": lambda: retriever.add_documents([LCDocument(TEXT, metadata=meta)]),
        "llamaindex": lambda: (
            retriever.add_documents([LIDocument(text=TEXT, metadata=meta)])
            if all(isinstance(k, str) for k in meta)  # LlamaIndex itself refuses other keys
            else retriever.engine.insert([Document("d", TEXT, meta)])
        ),
        "from_texts": lambda: ReMindRetriever.from_texts([TEXT], [meta], embeddings=HashEmbedder()),
    }
    for path, call in calls.items():
        with pytest.raises(InvalidDocumentError) as err:
            call()
        assert what in str(err.value) and advice in str(err.value), path
    assert retriever.engine.store.counts()["documents"] == 1  # nothing was written


def test_the_mcp_tool_converts_and_refuses_alike(tmp_path: Path) -> None:
    from remindrag_integrations.app.mcp_service import StoreService

    root = tmp_path / "store"
    ReMindRAG(store=root).insert([Document("a", "Parcels ship on Mondays.")])  # packaged model
    args = argparse.Namespace(
        store=str(root), namespace="default", llm="none", cache=None, no_cache=True
    )
    service = StoreService(args)
    service.add_documents(texts=[TEXT], ids=["refunds"], metadata={"published": GIVEN["published"]})
    hits = service.search("How long do refunds take?")["passages"]
    assert {h["doc_id"]: h["metadata"] for h in hits}["refunds"]["published"] == "2024-05-01"
    with pytest.raises(InvalidDocumentError, match=r"metadata\['raw'\] is a bytes"):
        service.add_documents(texts=["x y"], metadata={"raw": b"ab"})


# --- list-valued metadata in filters -------------------------------------------------------

DOCS = [
    ("faq-billing", "Refunds are paid within 14 days.", ["faq", "billing"]),
    ("faq-shipping", "Parcels ship on Mondays.", ["faq", "shipping"]),
    ("guide", "Returns need the original receipt.", ["guide"]),
    ("plain", "The helpdesk answers on weekdays.", "faq"),  # a plain value, not a list
]
FILTERS = [
    ({"tags": {"$in": ["billing", "guide"]}}, {"faq-billing", "guide"}),
    ({"tags": {"$in": ["faq"]}}, {"faq-billing", "faq-shipping", "plain"}),
    ({"tags": {"$nin": ["faq"]}}, {"guide"}),
    ({"tags": {"$contains": "shipping"}}, {"faq-shipping"}),
    ({"tags": {"$contains": "faq"}}, {"faq-billing", "faq-shipping", "plain"}),
    ({"tags": {"$all": ["faq", "billing"]}}, {"faq-billing"}),
    ({"tags": {"$all": ["faq", "guide"]}}, set()),
    ({"tags": "faq"}, {"faq-billing", "faq-shipping", "plain"}),  # a list equals its items
]


def _engine(store: Any = None) -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(), store=store)
    eng.insert([Document(i, t, {"tags": tags}) for i, t, tags in DOCS])
    return eng


def _found(eng: Any, flt: dict[str, Any]) -> set[str]:
    r = eng.retrieve("refunds parcels returns helpdesk", k=10, filter=flt)
    return {c.chunk.doc_id for c in r.chunks}


@pytest.mark.parametrize(("flt", "want"), FILTERS)
def test_list_metadata_filters_on_the_embedded_store(flt: dict[str, Any], want: set[str]) -> None:
    assert _found(_engine(), flt) == want


@pytest.mark.postgres
def test_list_metadata_filters_on_postgres(make_pg_store: Any) -> None:
    eng = _engine(make_pg_store("i33_lists"))
    for flt, want in FILTERS:
        assert _found(eng, flt) == want, flt


LI_FILTERS = [
    (FilterOperator.IN, ["billing", "guide"], {"faq-billing", "guide"}),
    (FilterOperator.ANY, ["shipping", "guide"], {"faq-shipping", "guide"}),
    (FilterOperator.CONTAINS, "billing", {"faq-billing"}),
    (FilterOperator.ALL, ["faq", "shipping"], {"faq-shipping"}),
    (FilterOperator.NIN, ["faq"], {"guide"}),
]


@pytest.mark.parametrize(("op", "value", "want"), LI_FILTERS)
def test_llamaindex_filters_on_list_metadata(
    op: FilterOperator, value: Any, want: set[str]
) -> None:
    filters = MetadataFilters(filters=[MetadataFilter(key="tags", value=value, operator=op)])
    retriever = ReMindRetriever(engine=_engine(), filters=filters, similarity_top_k=10)
    hits = retriever.retrieve("refunds parcels returns helpdesk")
    assert {h.node.metadata["remindrag"]["doc_id"] for h in hits} == want


def test_a_filter_operator_given_the_wrong_value_says_what_to_use() -> None:
    eng = _engine()
    with pytest.raises(ConfigError, match=r"\$contains takes one plain value.*\$all"):
        eng.retrieve("refunds", filter={"tags": {"$contains": ["faq", "billing"]}})
    with pytest.raises(ConfigError, match=r"\$all takes a non-empty list"):
        eng.retrieve("refunds", filter={"tags": {"$all": []}})
