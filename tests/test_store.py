"""The embedded store: round trips, atomic saves, corruption, sparse memory. An engine's folder
is an SQLite database (``stores/sqlite_store.py``); ``InMemoryGraphStore.save`` still writes the
generations format (the previous release's, converted once when an engine opens it), whose
atomic saves and checks are tested here at the store level."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.core.types import Edge
from remindrag_integrations.errors import StoreCorruptError, StoreNotFoundError
from remindrag_integrations.stores import InMemoryGraphStore, sqlite_store
from remindrag_integrations.testing import HashEmbedder

TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]


@pytest.fixture()
def engine() -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder())
    eng.insert([Document(i, t, {"source": "test"}) for i, t in TEXTS])
    return eng


def _node_ids(store: InMemoryGraphStore) -> list[str]:
    """Every node id, through the public API (chunks share their anchor's hex part)."""
    q = np.ones(store.dim or 1, dtype=np.float32)
    ids = [n for n, _ in store.search(q, 10**6, ("entity", "anchor", "chunk"))]
    return sorted(ids)


def _edges(store: InMemoryGraphStore) -> dict[str, Edge]:
    return {e.id: e for n in _node_ids(store) for e in store.neighbors(n)}


def _snapshot(store: InMemoryGraphStore, trace_ids: tuple[str, ...] = ()) -> dict:
    ids = _node_ids(store)
    return {
        "counts": store.counts(),
        "nodes": [n.to_dict() for n in store.get_nodes(ids)],
        "edges": sorted(_edges(store)),
        "memory": store.export_memory(),
        "docs": {d: store.document_hash(d) for d in sorted(store.document_ids())},
        "traces": [store.load_trace(t) for t in trace_ids],
    }


def test_round_trip_keeps_everything_including_memory(engine: ReMindRAG, tmp_path: Path) -> None:
    # the cosine-only first pass: its walk reads the third passage (the prior seeds two of the
    # three and its walk finds nothing more); this test is about what a save keeps
    r = engine.retrieve(
        "Who directed Sinister?", navigator={"min_similarity": -1.0}, prior={"enabled": False}
    )
    walked = [m.node_id for m in r.trace.moves if m.action == "read" and m.node_id]
    assert walked, "the zero-token walk should have reached a chunk"
    engine.memorize(r.trace_id, supporting=walked)
    assert engine.store.touched_edges() > 0
    engine.save(tmp_path / "s")
    loaded = ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder())
    traces = (r.trace_id,)
    assert _snapshot(loaded.store, traces) == _snapshot(engine.store, traces)
    ids = _node_ids(engine.store)
    assert np.array_equal(loaded.store.node_embeddings(ids), engine.store.node_embeddings(ids))
    # the trace survives too: memorize after reload is refused as a duplicate, not unknown
    assert loaded.memorize(r.trace_id).skipped_reason == "already memorized"
    assert (
        loaded.retrieve("Who directed Sinister?", prior={"enabled": False}).trace.stop_reason
        == "replay"
    )


def _shares_strings(store: InMemoryGraphStore) -> None:
    nodes = {n.id: n for n in store.whole_graph()[0]}
    edges = list(_edges(store).values())
    assert all(e.u is nodes[e.u].id and e.v is nodes[e.v].id for e in edges)
    mentions = [e for e in edges if e.kind == "mention"]
    assert len(mentions) > 2
    assert all(e.kind is mentions[0].kind and e.text is mentions[0].text for e in mentions)


def test_a_loaded_store_shares_strings_like_a_built_one(engine: ReMindRAG, tmp_path: Path) -> None:
    """JSON gives every value its own string; the load of a generation makes an edge's ends
    its nodes' id strings and one string per kind and per mention / context text (RESULTS §6:
    memory of a served 1 M-edge store)."""
    root = engine.store.save(tmp_path / "s")  # type: ignore[attr-defined]
    store = InMemoryGraphStore.load(root)
    _shares_strings(store)
    assert _snapshot(store) == _snapshot(engine.store)


def test_a_store_opened_from_its_folder_shares_strings_like_a_built_one(
    engine: ReMindRAG, tmp_path: Path
) -> None:
    """An engine's folder is a database: each row read gives every value its own string too;
    the store an engine opens there shares them as a built one does (RESULTS §6)."""
    engine.save(tmp_path / "s")
    store = ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder()).store
    _shares_strings(store)
    assert _snapshot(store) == _snapshot(engine.store)


@pytest.mark.parametrize(
    "edges_json",
    [b'[{"id": "e", "v": "a", "kind": "relation", "text": "t"}]', b"[1]", b'{"id": "e"}'],
)
def test_malformed_edges_are_refused_when_loading(edges_json: bytes) -> None:
    from remindrag_integrations.stores.snapshot import _graph

    nodes = b'[{"id": "a", "kind": "entity", "name": "A"}]'
    with pytest.raises((TypeError, ValueError)):
        _graph(nodes, edges_json)


def test_memory_is_sparse(engine: ReMindRAG) -> None:
    assert engine.store.counts()["edges"] > 10
    assert engine.store.touched_edges() == 0
    assert engine.store.memory(["m-ffffffffff"]).shape == (1, engine.store.dim)


def test_no_pickle_files(engine: ReMindRAG, tmp_path: Path) -> None:
    root = engine.store.save(tmp_path / "s")  # type: ignore[attr-defined]
    gen = root / (root / "CURRENT").read_text().split()[0]
    for f in gen.iterdir():
        if f.suffix == ".npy":
            np.load(f, allow_pickle=False)  # raises if an object array was written
        else:
            json.loads(f.read_text())


def test_no_pickles_in_the_database(engine: ReMindRAG, tmp_path: Path) -> None:
    """An engine's database holds vectors as raw float arrays and its other values as JSON:
    nothing a load would have to unpickle."""
    engine.retrieve("Who directed Sinister?")
    engine.save(tmp_path / "s")
    dim = engine.store.dim
    con = sqlite3.connect(tmp_path / "s" / sqlite_store.DB_FILE)
    try:
        vectors = [b for (b,) in con.execute("SELECT vector FROM nodes")]
        vectors += [b for (b,) in con.execute("SELECT vector FROM memory")]
        texts = [v for (v,) in con.execute("SELECT value FROM settings")]
        texts += [v for (v,) in con.execute("SELECT meta FROM documents")]
        texts += [v for (v,) in con.execute("SELECT metadata FROM chunks")]
        texts += [v for (v,) in con.execute("SELECT body FROM traces")]
    finally:
        con.close()
    assert vectors and all(len(b) in (2 * dim, 4 * dim) for b in vectors)  # type: ignore[operator]
    assert texts and all(isinstance(json.loads(t), (dict, list)) for t in texts)


def test_corrupt_file_is_a_typed_error(engine: ReMindRAG, tmp_path: Path) -> None:
    """A damaged file of a generations folder is a typed error, to the store's load and to an
    engine's, whose conversion of the folder refuses it and leaves it as it was."""
    root = engine.store.save(tmp_path / "s")  # type: ignore[attr-defined]
    gen = root / (root / "CURRENT").read_text().split()[0]
    (gen / "edges.json").write_text("[{]")
    with pytest.raises(StoreCorruptError):
        InMemoryGraphStore.load(root)
    before = sorted(p.name for p in root.iterdir())
    for _ in range(2):
        with pytest.raises(StoreCorruptError):
            ReMindRAG.load(root, embeddings=HashEmbedder())
    assert not sqlite_store.holds_database(root)
    assert sorted(p.name for p in root.iterdir()) == before  # no half-made database left


def test_missing_store_is_a_typed_error(tmp_path: Path) -> None:
    with pytest.raises(StoreNotFoundError, match="no saved store"):  # missing, not damaged
        InMemoryGraphStore.load(tmp_path / "nothing")


def test_crash_mid_save_leaves_previous_generation(
    engine: ReMindRAG, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = engine.store.save(tmp_path / "s")  # type: ignore[attr-defined]
    before = _snapshot(InMemoryGraphStore.load(root))
    engine.insert([Document("d4", "Ethan Hawke is an American actor.")])

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(np, "save", boom)
    with pytest.raises(OSError):
        engine.store.save(root)
    monkeypatch.undo()
    assert _snapshot(InMemoryGraphStore.load(root)) == before


def test_saves_keep_the_current_and_the_previous_generation(
    engine: ReMindRAG, tmp_path: Path
) -> None:
    root = engine.store.save(tmp_path / "s")  # type: ignore[attr-defined]
    names = []
    for _ in range(3):
        engine.store.save(root)  # type: ignore[attr-defined]
        names.append((root / "CURRENT").read_text().split()[0])
    # the previous one stays for readers still reading it; older ones go
    assert sorted(p.name for p in root.glob("gen-*")) == sorted(names[-2:])


def test_delete_document_removes_orphans_and_keeps_other_memory(engine: ReMindRAG) -> None:
    r = engine.retrieve("Ed Wood filmmaker Conrad Brooks")
    engine.memorize(r.trace_id, supporting=r.trace.chunk_ids)
    edges = _edges(engine.store)
    kept = {
        e: v
        for e, v in engine.store.export_memory().items()
        if all(engine.store.get_node(n).doc_id != "d1" for n in (edges[e].u, edges[e].v))
    }
    engine.delete(["d1"])
    s = engine.store
    assert "d1" not in s.document_ids()
    nodes = s.get_nodes(_node_ids(s))
    assert all(n.doc_id != "d1" for n in nodes)
    node_ids = {n.id for n in nodes}
    remaining = _edges(s)
    for e in remaining.values():
        assert e.u in node_ids and e.v in node_ids
    names = {n.name for n in nodes if n.kind == "entity"}
    assert "Scott Derrickson" not in names and "Sinister" in names  # Sinister still in d3
    after = s.export_memory()
    for eid, v in kept.items():
        if eid in remaining:
            assert after[eid] == v


def test_reinserting_unchanged_document_is_a_noop(engine: ReMindRAG) -> None:
    before = engine.store.counts()
    report = engine.insert([Document(i, t) for i, t in TEXTS])
    assert report.documents == 0 and report.skipped_documents == 3
    assert engine.store.counts() == before


def test_update_replaces_the_old_version(engine: ReMindRAG) -> None:
    engine.insert([Document("d2", "Conrad Brooks was born in Baltimore, Maryland.")])
    nodes = engine.store.get_nodes(_node_ids(engine.store))
    texts = [
        engine.store.get_chunk(n.id).text for n in nodes if n.kind == "chunk" and n.doc_id == "d2"
    ]
    assert texts == ["Conrad Brooks was born in Baltimore, Maryland."]
    assert "Ed Wood" not in {n.name for n in nodes}
