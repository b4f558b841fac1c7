"""Deleting reports unknown ids, a mistyped embedder name fails at once without ``HF_HUB_OFFLINE``,
and the polish a careful user notices (progress, logging, reprs, copying, typed keyword arguments,
one retriever shared between threads). Each test failed on the code before the change."""

from __future__ import annotations

import copy
import http.server
import logging
import pickle
import socket
import threading
import typing
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.documents import Document as LCDocument
from pydantic import BaseModel

from remindrag_integrations import IndexConfig, ReMindRetriever, RetrievalConfig
from remindrag_integrations.adapters.embeddings import SentenceTransformerEmbedder
from remindrag_integrations.errors import EmbeddingError, NotCopyableError
from remindrag_integrations.faces.options import RetrieverOptions
from remindrag_integrations.testing import HashEmbedder

TEXTS = [
    "Refunds are paid within 14 days of the return.",
    "Parcels ship from the Leeds warehouse on Mondays.",
    "The helpdesk answers calls on weekdays.",
]


def small(**kw: typing.Any) -> ReMindRetriever:
    return ReMindRetriever.from_texts(
        TEXTS, ids=["refunds", "shipping", "helpdesk"], embeddings=HashEmbedder(), **kw
    )


# --- 11 deleting ---------------------------------------------------------------------------
def test_delete_names_the_ids_it_did_not_know(caplog: pytest.LogCaptureFixture) -> None:
    r = small()
    with caplog.at_level(logging.WARNING, logger="remindrag_integrations"):
        out = r.delete(["refunds", "refundz"])
    assert out["documents"] == 1 and out["chunks"] == 1
    assert out["not_found"] == ["refundz"]
    assert any("refundz" in rec.getMessage() for rec in caplog.records)
    assert r.engine.store.document_ids() and "refunds" not in r.engine.store.document_ids()
    assert all(d.metadata["remindrag"]["doc_id"] != "refunds" for d in r.invoke("refunds"))
    assert r.delete(["refunds"])["not_found"] == ["refunds"]  # gone now
    assert "not_found" in (ReMindRetriever.delete.__doc__ or "")


# --- 12 a mistyped embedder name -----------------------------------------------------------
@pytest.fixture
def hub_online(monkeypatch: pytest.MonkeyPatch) -> Iterator[typing.Callable[[str], None]]:
    """The Hub as seen without HF_HUB_OFFLINE, pointed at a local address (no network)."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    def point_at(url: str) -> None:
        monkeypatch.setattr(constants, "ENDPOINT", url)

    yield point_at


class _NoSuchRepo(http.server.BaseHTTPRequestHandler):
    """What the Hub answers for a repository that does not exist."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's API
        self.send_response(404)
        self.send_header("X-Error-Code", "RepoNotFound")
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": "Repository not found"}')

    def log_message(self, *args: typing.Any) -> None:
        pass


def test_a_mistyped_model_name_is_an_error_at_once(hub_online) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), _NoSuchRepo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hub_online(f"http://127.0.0.1:{server.server_port}")
        with pytest.raises(EmbeddingError, match="no embedding model 'sentence-transformrs/"):
            SentenceTransformerEmbedder("sentence-transformrs/all-MiniLM-L6-v2")
    finally:
        server.shutdown()


def test_an_unreachable_hub_says_what_to_do(hub_online) -> None:
    with socket.socket() as s:  # a port nobody listens on: refused at once
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hub_online(f"http://127.0.0.1:{port}")
    with pytest.raises(EmbeddingError, match="could not be reached.*hf download"):
        SentenceTransformerEmbedder("BAAI/bge-smal-en-v1.5")


# --- 13 polish -----------------------------------------------------------------------------
def test_add_documents_shows_progress(capsys: pytest.CaptureFixture[str]) -> None:
    r = small()
    seen: list[tuple[int, int]] = []
    r.add_documents([LCDocument("Orders over 50 pounds ship free.", id="free")], progress=True)
    err = capsys.readouterr().err  # the tqdm bars, even when not a terminal
    assert "indexing: 100%" in err and "embedding: 100%" in err
    r.add_documents(
        [LCDocument("Gift cards never expire.", id="gift")],
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen and seen[-1][0] == seen[-1][1]


def _old_save(r: ReMindRetriever, root: Any) -> None:
    """What the previous release's ``r.save(root)`` wrote: a generation and engine.json."""
    from remindrag_integrations.adapters import embedder_record
    from remindrag_integrations.core import persist

    eng = r.engine
    used = embedder_record.record(eng.embedder, eng.store.dim, None)
    persist.save(eng.store, eng.index_config, eng.retrieval_config, root, used)


def test_load_reports_each_step_and_the_store_answers(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A big store of the older format takes seconds to load (reading, the graph, the ANN and
    BM25 indexes, the graph matrix) when an engine opens it, converting it once:
    ``progress=`` reports each step, and the converted store answers."""
    from remindrag_integrations import ReMindRAG
    from remindrag_integrations.errors import InvalidArgumentError
    from remindrag_integrations.stores import InMemoryGraphStore, sqlite_store
    from remindrag_integrations.stores.snapshot import LOAD_STEPS

    _old_save(small(), tmp_path / "r")
    _old_save(small(), tmp_path / "r2")
    seen: list[tuple[int, int]] = []
    engine = ReMindRAG.load(
        tmp_path / "r", embeddings=HashEmbedder(), progress=lambda d, t: seen.append((d, t))
    )
    n, m = len(LOAD_STEPS), len(sqlite_store.SQLiteGraphStore.OPEN_STEPS)
    # the conversion's load of the old files, then the open of the database it made
    assert seen == [(i, n) for i in range(1, n + 1)] + [(i, m) for i in range(1, m + 1)]
    assert sqlite_store.holds_database(tmp_path / "r")  # converted
    assert engine.retrieve("When are refunds paid?").chunks
    loaded = ReMindRetriever.load(tmp_path / "r2", embeddings=HashEmbedder(), progress=True)
    err = capsys.readouterr().err
    assert "loading the store: 100%" in err and f"| {n}/{n} [" in err
    assert loaded.invoke("When are refunds paid?")
    for bad in ("yes", 3):
        with pytest.raises(InvalidArgumentError, match="progress must be"):
            ReMindRAG.load(tmp_path / "r", embeddings=HashEmbedder(), progress=bad)
        with pytest.raises(InvalidArgumentError, match="progress must be"):
            InMemoryGraphStore.open(tmp_path / "empty", lock=False, progress=bad)
    # nothing saved there: an empty store, and no bar drawn for a load that never happened
    with InMemoryGraphStore.open(tmp_path / "empty", progress=True) as empty:
        assert empty.counts()["documents"] == 0
    assert "loading the store" not in capsys.readouterr().err


def test_a_store_kept_in_a_folder_opens_ready_for_the_first_query(tmp_path: Any) -> None:
    """Opening a big store kept in a folder (its database) takes seconds too: ``progress=``
    reports its steps, and what the first query needs (the BM25 index, the graph matrix) is
    built by the time ``load`` returns, as the older format's load did."""
    from remindrag_integrations import ReMindRAG

    small().save(tmp_path / "r")
    seen: list[tuple[int, int]] = []
    engine = ReMindRAG.load(
        tmp_path / "r", embeddings=HashEmbedder(), progress=lambda d, t: seen.append((d, t))
    )
    assert seen and seen[-1][0] == seen[-1][1]
    assert {"lexical", "matrix"} <= set(engine.store._first_pass)  # type: ignore[attr-defined]
    assert engine.retrieve("When are refunds paid?").chunks


def test_the_library_logs_through_logging(caplog: pytest.LogCaptureFixture) -> None:
    assert logging.getLogger("remindrag_integrations").handlers == []  # the app decides
    with caplog.at_level(logging.DEBUG, logger="remindrag_integrations"):
        r = small()
        r.invoke("When are refunds paid?")
        r.memorize(answer="In 14 days.", supporting=[r.search("refunds").chunks[0].chunk.id])
    info = [m.getMessage() for m in caplog.records if m.levelno == logging.INFO]
    debug = [m.getMessage() for m in caplog.records if m.levelno == logging.DEBUG]
    assert any(m.startswith("indexed 3 documents") for m in info)
    assert any("When are refunds paid?" in m and "trace" in m for m in debug)
    assert any(m.startswith("memory write") for m in debug)


def test_reprs_are_short_and_useful() -> None:
    r = small(k=2)
    text = repr(r)
    assert text.startswith("ReMindRetriever(ReMindRAG(llm=None (zero-token), embeddings=")
    assert "documents=3" in text and "k=2" in text and " at 0x" not in text
    trace = r.search("refunds").trace
    head = ", ".join(map(str, trace.query_embedding[:4]))  # the vector's first numbers
    assert "query_embedding" not in repr(trace) and head not in repr(trace)
    assert "seeds=" in repr(trace)


def test_pickle_and_deepcopy_are_a_typed_error() -> None:
    r = small()
    for attempt in (
        lambda: pickle.dumps(r),
        lambda: copy.deepcopy(r),
        lambda: pickle.dumps(r.engine),
    ):
        with pytest.raises(NotCopyableError, match="save\\(path\\)"):
            attempt()
    assert issubclass(NotCopyableError, TypeError)  # what pickle-aware code expects


def test_from_documents_keyword_arguments_are_typed() -> None:
    hints = typing.get_type_hints(RetrieverOptions)
    own = {"store", "namespace", "similarity_top_k", "search_kwargs", "search_type", "filters"}
    own.add("score_threshold")
    assert set(hints) == set(IndexConfig.model_fields) | set(RetrievalConfig.model_fields) | own
    for name, field in {**IndexConfig.model_fields, **RetrievalConfig.model_fields}.items():
        nested = isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
        # a nested config is given whole or as a dict of the fields to change
        want = field.annotation | dict[str, Any] if nested else field.annotation  # type: ignore[operator]
        assert hints[name] == want, name
    sig = typing.get_type_hints(ReMindRetriever.from_documents, include_extras=True)
    assert sig["options"] == typing.Unpack[RetrieverOptions]
    r = small(chunk_tokens=300, similarity_top_k=2, namespace="t", search_type="similarity")
    assert r.engine.index_config.chunk_tokens == 300 and r.engine.retrieval_config.k == 2


def test_one_retriever_shared_between_threads() -> None:
    """4 threads x 3 rounds of invoke, memorize and add_documents on one retriever."""
    r = ReMindRetriever.from_texts(TEXTS, ids=["refunds", "shipping", "helpdesk"])
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for n in range(3):
                docs = r.invoke(f"When are refunds paid? {t} {n}")
                r.memorize(docs[0].metadata["remindrag"]["trace_id"], supporting=[docs[0].id])
                r.add_documents([LCDocument(f"Store {t}-{n} opens at {n + 8} am.", id=f"s{t}{n}")])
        except BaseException as exc:  # reported below, with the thread's traceback
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    ids = set(r.engine.store.document_ids())
    assert {f"s{t}{n}" for t in range(4) for n in range(3)} <= ids
    stats = r.memory_stats()
    assert stats.writes_applied + stats.writes_skipped == 12 and stats.writes_applied > 0
    assert r.invoke("Store 2-1 opens")[0].metadata["remindrag"]["doc_id"] == "s21"
