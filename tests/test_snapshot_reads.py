"""Snapshot reads on the embedded store: a retrieve reads one version of the graph while inserts,
updates, deletes and memory writes go on, and never waits for them. The same guarantee for every
store with snapshots is in the store contract (its ``snapshot`` case,
``stores/contract_optional.py``)."""

from __future__ import annotations

import random
import threading
from typing import Any

import numpy as np
import pytest

from remindrag_integrations import Document, ReMindRAG, StoreError
from remindrag_integrations.errors import UnknownNodeError
from remindrag_integrations.stores import InMemoryGraphStore
from remindrag_integrations.testing import HashEmbedder, contract_graph

TEXTS = [
    ("d1", "Scott Derrickson is an American director. He directed Sinister in Los Angeles."),
    ("d2", "Ed Wood was an American filmmaker. Conrad Brooks acted in films by Ed Wood."),
    ("d3", "Sinister is a horror film. Ethan Hawke starred in Sinister."),
]
QUERIES = ["Who directed Sinister?", "Who acted in films by Ed Wood?", "Who starred in Sinister?"]


def _engine() -> ReMindRAG:
    eng = ReMindRAG(embeddings=HashEmbedder(64))
    eng.insert([Document(i, t) for i, t in TEXTS])
    return eng


class _Paused(dict):
    """Entity aliases whose reading pauses a write in the middle of being applied."""

    def __init__(self, entered: threading.Event, go: threading.Event) -> None:
        super().__init__()
        self.entered, self.go = entered, go

    def items(self) -> Any:
        self.entered.set()
        self.go.wait(120)
        return super().items()


def test_a_retrieve_during_a_write_reads_the_version_before_it() -> None:
    eng = _engine()
    store = eng.store
    assert isinstance(store, InMemoryGraphStore)
    eng.retrieve(QUERIES[2])  # a reader read: the next write keeps its version aside
    entered, go = threading.Event(), threading.Event()
    write = threading.Thread(
        target=lambda: store.add_graph(  # replaces d3 by an empty new document
            documents=[("d3", "new", {})],
            chunks=[],
            nodes=[],
            embeddings=np.zeros((0, 64), np.float32),
            edges=[],
            entity_aliases=_Paused(entered, go),
            replace=["d3"],
        )
    )
    write.start()
    assert entered.wait(60)  # the write holds the lock and has already deleted d3's nodes
    got: list[Any] = []
    read = threading.Thread(target=lambda: got.append(eng.retrieve(QUERIES[2])))
    read.start()
    read.join(60)  # a guard against a hang, not a timing: the retrieve must not wait
    finished = not read.is_alive()
    go.set()
    write.join()
    read.join()
    assert finished, "the retrieve waited for the write"
    assert any(c.chunk.doc_id == "d3" for c in got[0].chunks)  # the version before
    assert store.document_hash("d3") == "new"  # the write went through
    assert not any(c.chunk.doc_id == "d3" for c in eng.retrieve(QUERIES[2]).chunks)


def test_writing_through_a_snapshot_is_refused() -> None:
    store = InMemoryGraphStore()
    store.add_graph(**contract_graph(dim=32))
    with store.snapshot() as view:
        with pytest.raises(StoreError, match="read only"):
            view.delete_documents(["d1"])
        with pytest.raises(StoreError, match="read only"):
            view.update_memory(["r-1000"], lambda cur: cur + 0.1)
    assert store.document_ids() == ["d1", "d2"] and store.touched_edges() == 0


def test_readers_never_fail_while_documents_change() -> None:
    eng = _engine()
    versions = {t for _, t in TEXTS} | {f"Scott Derrickson directed film {i}." for i in range(12)}
    stop = threading.Event()
    failures: list[BaseException] = []
    seen: list[set[str]] = []

    def read(seed: int) -> None:
        rng = random.Random(seed)
        while not stop.is_set():
            try:
                r = eng.retrieve(rng.choice(QUERIES), navigator={"min_similarity": -1.0})
            except Exception as exc:  # noqa: BLE001 - what this test looks for
                failures.append(exc)
                continue
            seen.append({c.chunk.text for c in r.chunks})
            try:  # a memory write: its trace's nodes may be gone by now (a typed error)
                eng.memorize(r.trace_id, supporting=[c.chunk.id for c in r.chunks])
            except UnknownNodeError:
                pass

    readers = [threading.Thread(target=read, args=(i,)) for i in range(3)]
    for t in readers:
        t.start()
    for i in range(12):
        eng.insert([Document("d1", f"Scott Derrickson directed film {i}.")])
        eng.delete(["d3"])
        eng.insert([Document("d3", TEXTS[2][1])])
    stop.set()
    for t in readers:
        t.join()
    assert failures == []  # before: ~25 % UnknownNodeError
    assert seen and all(texts <= versions for texts in seen)


def test_rows_of_deleted_nodes_are_reused_once_no_snapshot_needs_them() -> None:
    store = InMemoryGraphStore()
    store.add_graph(**contract_graph(dim=32))
    used = store._vectors.table.matrix().shape[0]
    for i in range(30):
        text, vec = store.get_chunk("c-1100").text, store.node_embeddings(["c-1100"])
        with store.snapshot() as view:
            store.delete_documents(["d1"])
            g = contract_graph(("d1",), dim=32, salt=str(i))
            store.add_graph(**{**g, "documents": [("d1", f"h{i}", {})]})
            assert view.get_chunk("c-1100").text == text
            assert np.array_equal(view.node_embeddings(["c-1100"]), vec)  # its row was held
            del view
    # each round held d1's rows while its snapshot lived, then freed them for the next
    assert store._vectors.table.matrix().shape[0] <= used + 2 * 5


def test_a_save_during_a_write_saves_the_version_before_it(tmp_path: Any) -> None:
    eng = _engine()
    store = eng.store
    assert isinstance(store, InMemoryGraphStore)
    eng.retrieve(QUERIES[2])
    entered, go = threading.Event(), threading.Event()
    write = threading.Thread(
        target=lambda: store.add_graph(
            documents=[("d3", "new", {})],
            chunks=[],
            nodes=[],
            embeddings=np.zeros((0, 64), np.float32),
            edges=[],
            entity_aliases=_Paused(entered, go),
            replace=["d3"],
        )
    )
    write.start()
    assert entered.wait(60)
    saved = threading.Thread(target=lambda: store.save(tmp_path / "s"))
    saved.start()
    saved.join(60)  # a guard against a hang: the save must not wait for the write
    finished = not saved.is_alive()
    go.set()
    write.join()
    saved.join()
    assert finished, "the save waited for the write"
    assert InMemoryGraphStore.load(tmp_path / "s").document_hash("d3") != "new"
    assert store.document_hash("d3") == "new"


@pytest.mark.parametrize("built_before", [True, False])
def test_ann_search_in_a_snapshot_sees_its_version(built_before: bool) -> None:
    from remindrag_integrations.stores import ann

    if not ann.available():
        pytest.skip("extra 'ann' (usearch) not installed")
    store = InMemoryGraphStore(ann=True)
    store.add_graph(**contract_graph(dim=32))
    old = store.node_embeddings(["c-1100"])[0]
    if built_before:
        store.search(old, 1, ("chunk",))  # the store builds its index
    with store.snapshot() as view:
        store.delete_documents(["d1"])
        g = contract_graph(("d1",), dim=32, salt="v2")
        store.add_graph(**{**g, "documents": [("d1", "v2", {})]})
        hit = view.search(old, 1, ("chunk",))[0]  # no index yet: an exact scan of its version
        assert hit[0] == "c-1100" and hit[1] == pytest.approx(1.0, abs=1e-3)
    new = store.node_embeddings(["c-1100"])[0]
    assert store.search(new, 1, ("chunk",))[0][0] == "c-1100"
    with store.snapshot() as view:  # no write since: the view builds the store's index
        view.search(new, 1, ("anchor",))
    assert "anchor" in store._vectors._ann  # built once, for the store and its snapshots
    g2 = contract_graph(("x1", "x2", "x3"), dim=32, salt="later")  # x3's nodes are new
    store.add_graph(**g2)
    assert g2["nodes"][9].id == "a-3100"
    top = store.search(g2["embeddings"][9], 1, ("anchor",))[0]
    assert top[0] == "a-3100"  # the index the view built followed the later insert
