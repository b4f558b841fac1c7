"""One store contract, run against the embedded store and against a real PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pg_fixture
import pytest

from remindrag_integrations.core.memory.write import update
from remindrag_integrations.stores import InMemoryGraphStore, ann
from remindrag_integrations.testing import StoreContract, contract_graph, store_contract

make_pg_store = pg_fixture.make_pg_store  # fixtures: a real server, started once per process
pg_dsn = pg_fixture.pg_dsn


class TestInMemoryStore(StoreContract):
    embedding_atol = 1e-3  # float16 vectors

    @pytest.fixture()
    def make_store(self) -> Callable[..., InMemoryGraphStore]:
        return lambda namespace="contract": InMemoryGraphStore(namespace=namespace)

    def test_save_load_keeps_namespace_graph_and_memory(self, tmp_path: Path) -> None:
        store = InMemoryGraphStore(namespace="tenant-x")
        store.add_graph(**contract_graph(dim=self.dim))
        update(store, ["r-1000"], [], np.ones(self.dim, dtype=np.float32))
        store.save(tmp_path / "s")
        loaded = InMemoryGraphStore.load(tmp_path / "s")
        assert loaded.namespace == "tenant-x"
        assert loaded.counts() == store.counts()
        assert loaded.export_memory() == store.export_memory()


class TestInMemoryStoreFloat32(StoreContract):
    @pytest.fixture()
    def make_store(self) -> Callable[..., InMemoryGraphStore]:
        return lambda namespace="contract": InMemoryGraphStore(namespace, vectors="float32")


class TestInMemoryStoreAnn(StoreContract):
    """Every search through the HNSW index, however small the store."""

    embedding_atol = 1e-3

    @pytest.fixture()
    def make_store(self) -> Callable[..., InMemoryGraphStore]:
        if not ann.available():
            pytest.skip("extra 'ann' (usearch) not installed")
        return lambda namespace="contract": InMemoryGraphStore(namespace, ann=True)


@pytest.mark.postgres
class TestPostgresStore(StoreContract):
    @pytest.fixture()
    def make_store(self, make_pg_store: Callable[..., object]) -> Callable[..., object]:
        return make_pg_store


def test_store_contract_function_runs_every_check() -> None:
    ran = store_contract(
        lambda namespace="contract": InMemoryGraphStore(namespace=namespace), embedding_atol=1e-3
    )
    assert set(ran) == {n for n in dir(StoreContract) if n.startswith("test_")}


def test_open_store_maps_specs_without_importing_psycopg(tmp_path: Path) -> None:
    import subprocess
    import sys

    from remindrag_integrations.stores import is_postgres_dsn, open_store

    saved = InMemoryGraphStore(namespace="tenant-x")
    saved.add_graph(**contract_graph(dim=8))
    saved.save(tmp_path / "s")
    loaded = open_store(str(tmp_path / "s"))
    assert isinstance(loaded, InMemoryGraphStore) and loaded.namespace == "tenant-x"
    assert loaded.counts() == saved.counts()
    with pytest.raises(ValueError):
        open_store(tmp_path / "s", namespace="tenant-y")
    assert open_store(None, namespace="n").namespace == "n"  # type: ignore[attr-defined]
    assert open_store(saved) is saved
    assert is_postgres_dsn("postgresql://u@h/db") and is_postgres_dsn("postgres://h/db")
    assert not is_postgres_dsn(str(tmp_path))
    code = "import sys, remindrag_integrations; print('psycopg' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
