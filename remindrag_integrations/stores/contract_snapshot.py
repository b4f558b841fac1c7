"""Store contract, part three: a snapshot reads one version while others write (mixed into
:class:`~.contract.StoreContract`; a store without :class:`~..core.protocols.SnapshotStore`
skips it)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..core.protocols import GraphStore, SnapshotStore
from .contract_graph import contract_graph


class SnapshotContract:
    dim = 32

    def test_snapshot_sees_one_version_while_others_write(
        self, make_store: Callable[..., GraphStore]
    ) -> None:
        from ..core.memory.write import update

        store = make_store("contract")
        store.add_graph(**contract_graph(dim=self.dim))
        if not isinstance(store, SnapshotStore):
            return
        q = np.eye(self.dim, dtype=np.float32)[3]
        update(store, ["r-2000", "r-1000"], [], q)
        ids = ["c-1100", "a-1100", "e-1001", "e-2001"]
        before = (
            store.counts(),
            store.get_nodes(ids),
            store.node_embeddings(ids),
            store.memory(["r-1000", "r-2000"]),
            [e.id for e in store.neighbors("e-1002")],
            store.search(store.node_embeddings(["c-1100"])[0], 1, ("chunk",))[0][0],
        )
        with store.snapshot() as view:
            # others: delete d1, insert it again (same ids: new texts and vectors), and
            # write memory, all after the snapshot was taken
            store.delete_documents(["d1"])
            g = contract_graph(("d1",), dim=self.dim, salt="v2")
            store.add_graph(**{**g, "documents": [("d1", "hash-d1-v2", {})]})
            update(store, ["r-2000"], [], q)
            seen = (
                view.counts(),
                view.get_nodes(ids),
                view.node_embeddings(ids),
                view.memory(["r-1000", "r-2000"]),
                [e.id for e in view.neighbors("e-1002")],
                view.search(before[2][0], 1, ("chunk",))[0][0],
            )
            assert view.get_chunk("c-1100").text == "d1 part 1 "
            assert view.document_hash("d1") == "hash-d1"
            nodes, edges = view.whole_graph()
        assert seen[0] == before[0] and seen[1] == before[1]
        assert np.array_equal(seen[2], before[2]) and np.array_equal(seen[3], before[3])
        assert seen[4] == before[4] and seen[5] == before[5] == "c-1100"
        assert len(nodes) == sum(before[0][k] for k in ("chunks", "anchors", "entities"))
        assert len(edges) == before[0]["edges"]
        # the store itself has the writes
        assert store.get_chunk("c-1100").text.endswith("v2")
        assert store.document_hash("d1") == "hash-d1-v2"
        assert not np.any(store.memory(["r-1000"]))  # its edge was deleted with d1
        assert not np.array_equal(store.memory(["r-2000"]), before[3][1:])
