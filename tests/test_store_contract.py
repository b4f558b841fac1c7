"""One store contract, run against the embedded store and against a real PostgreSQL."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pg_fixture
import pytest
from doc_pages import section

from remindrag_integrations.core.memory.write import update
from remindrag_integrations.core.store import CAPABILITIES, GraphStore, capabilities
from remindrag_integrations.stores import (
    BaseGraphStore,
    InMemoryGraphStore,
    SQLiteGraphStore,
    ann,
    writes,
)
from remindrag_integrations.stores.contract import CASES, ContractFailure
from remindrag_integrations.stores.contract_case import StoreUnderTest, run
from remindrag_integrations.testing import StoreContract, contract_graph, store_contract

make_pg_store = pg_fixture.make_pg_store  # fixtures: a real server, started once per process
pg_dsn = pg_fixture.pg_dsn


class Documents:
    """``documents()``, the BaseGraphStore essential both shipped stores implement too."""

    def test_documents_lists_hash_and_metadata(self, make_store: Callable[..., object]) -> None:
        store = make_store("contract")
        g = contract_graph(("d1", "d2", "d3"), dim=8)
        g["documents"][1] = ("d2", "hash-d2", {"year": 2023, "tags": ["a"]})
        store.add_graph(**g)  # type: ignore[attr-defined]
        assert store.documents() == {d: (h, m) for d, h, m in g["documents"]}  # type: ignore[attr-defined]


class TestInMemoryStore(StoreContract, Documents):
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


class TestFolderStore(StoreContract, Documents):
    """The store kept in a folder (SQLite): each store the contract asks for a new folder."""

    embedding_atol = 1e-3

    @pytest.fixture()
    def make_store(self, tmp_path: Path) -> Callable[..., SQLiteGraphStore]:
        made = itertools.count()
        return lambda namespace="contract": SQLiteGraphStore.open(
            tmp_path / f"{namespace}-{next(made)}", namespace
        )

    # known: a folder store re-claims a trace it holds ("its own again", for a release that
    # failed with the write), where the contract wants the second claim to lose
    @pytest.mark.xfail(strict=True, reason="the folder store's claim is re-entrant")
    def test_trace_claims__trace_claims_let_one_caller_win(
        self, make_store: Callable[..., SQLiteGraphStore]
    ) -> None:
        StoreContract.test_trace_claims__trace_claims_let_one_caller_win(self, make_store)  # type: ignore[attr-defined]


@pytest.mark.postgres
class TestPostgresStore(StoreContract, Documents):
    @pytest.fixture()
    def make_store(self, make_pg_store: Callable[..., object]) -> Callable[..., object]:
        return make_pg_store


def _toy_store() -> type[BaseGraphStore]:
    """The dict-backed store of docs/stores.md, from the page's own code."""
    scope: dict = {"__name__": "toy_store"}
    exec(
        compile(section("toy-store").split("```python\n")[1].split("```")[0], "stores.md", "exec"),
        scope,
    )  # noqa: S102
    return scope["DictStore"]


class TestToyStore(StoreContract):
    """The "Write a store" page's toy: twelve essentials on BaseGraphStore pass the contract."""

    @pytest.fixture()
    def make_store(self) -> Callable[..., BaseGraphStore]:
        toy = _toy_store()
        return lambda namespace="contract": toy(namespace)


def test_contract_is_one_table_and_a_test_per_case() -> None:
    tests = {n for n in dir(StoreContract) if n.startswith("test_")}
    assert tests == {c.test_name for c in CASES} and len(CASES) == len(tests)
    assert {c.capability for c in CASES} == {"graph", "memory", "traces", *CAPABILITIES}


def test_store_contract_function_runs_what_applies() -> None:
    ran = store_contract(
        lambda namespace="contract": InMemoryGraphStore(namespace=namespace), embedding_atol=1e-3
    )
    has = capabilities(InMemoryGraphStore())
    assert has == {"lexical", "snapshot", "chunks", "entity_names", "batch_search", "graph_matrix"}
    assert ran == [
        c.test_name for c in CASES if c.capability in {"graph", "memory", "traces", *has}
    ]
    toy = _toy_store()  # its cases run in TestToyStore
    assert capabilities(toy()) == frozenset() and isinstance(toy(), GraphStore)


def test_a_failing_store_hears_which_capability_failed() -> None:
    toy = _toy_store()

    class Forgetful(toy):  # type: ignore[misc, valid-type]
        def decay_memory(self, factor: float) -> int:
            return 0  # claims to decay, changes nothing

    class BadWords(toy):  # type: ignore[misc, valid-type]
        def lexical_search(self, text: str, k: int, where: object = None) -> list:
            return []

    with pytest.raises(ContractFailure, match="capability 'memory', case 'memory_admin'"):
        store_contract(lambda namespace="contract": Forgetful(namespace))
    with pytest.raises(ContractFailure, match="capability 'lexical', case 'lexical_search_"):
        store_contract(lambda namespace="contract": BadWords(namespace))
    assert "lexical" in capabilities(BadWords()) and "lexical" not in capabilities(toy())


def test_an_essential_left_out_says_which() -> None:
    class Half(BaseGraphStore):
        def documents(self) -> dict:
            return {}

    with pytest.raises(NotImplementedError, match=r"Half must implement whole_graph\(\)"):
        Half().counts()
    with pytest.raises(ContractFailure, match="capability 'graph', case 'empty_store'"):
        store_contract(lambda namespace="contract": Half(namespace))


def test_derived_methods_refuse_bad_input_before_writing() -> None:
    from remindrag_integrations.core.errors import EmbeddingError, UnknownNodeError

    store = _toy_store()("contract")
    g = contract_graph(dim=8)
    store.add_graph(**g)
    update(store, ["r-1000"], [], np.ones(8, np.float32))
    before = store.export_memory()
    with pytest.raises(UnknownNodeError):
        store.import_memory({"r-1000": [0.1] * 8, "r-ffff": [0.1] * 8})
    with pytest.raises(EmbeddingError):
        store.import_memory({"r-1000": [0.1] * 7})
    with pytest.raises(EmbeddingError):
        store.search(np.ones(9, np.float32), 3, ("entity",))
    with pytest.raises(UnknownNodeError):
        store.add_graph(**{**g, "entity_aliases": {"e-ffff": ["Nobody"]}})
    assert store.export_memory() == before and store.counts()["edges"] == len(g["edges"])


def test_a_capability_set_to_none_is_absent() -> None:
    class NoMatrix(InMemoryGraphStore):
        graph_matrix = None

    assert "graph_matrix" not in capabilities(NoMatrix())


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
    # nor does the store contract import the testing fakes (no contract <-> testing circle)
    code = (
        "import sys, remindrag_integrations, remindrag_integrations.stores.contract; "
        "print('psycopg' in sys.modules, 'remindrag_integrations.testing' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the calls of the write decisions (:mod:`...stores.writes`)."""
    calls: list[str] = []
    for name in ("add_graph", "delete_documents", "update_memory"):
        real = getattr(writes, name)

        def counted(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(writes, name, counted)
    return calls


def _three_writes(store: Any) -> None:
    store.add_graph(**contract_graph(dim=8))
    update(store, ["r-1000"], [], np.ones(8, np.float32))
    store.delete_documents(["d1"])


def test_every_shipped_store_decides_its_writes_in_one_place(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The embedded store, the folder store and the docs' toy (the derived path a
    third-party store gets) all run stores/writes.py's decisions: one implementation."""
    calls = _counting(monkeypatch)
    stores = [InMemoryGraphStore(), SQLiteGraphStore.open(tmp_path / "s"), _toy_store()()]
    for store in stores:
        calls.clear()
        _three_writes(store)
        assert calls == ["add_graph", "update_memory", "delete_documents"], type(store)


@pytest.mark.postgres
def test_postgres_decides_its_writes_in_the_same_place(
    monkeypatch: pytest.MonkeyPatch, make_pg_store: Callable[..., Any]
) -> None:
    calls = _counting(monkeypatch)
    _three_writes(make_pg_store("decides"))
    assert calls == ["add_graph", "update_memory", "delete_documents"]


def test_a_store_with_its_own_write_semantics_fails_the_contract() -> None:
    class NoCarry(InMemoryGraphStore):  # replaces a document but drops its memory
        def add_graph(self, **kw: Any) -> dict[str, int]:
            return super().add_graph(**{**kw, "memory_moves": None})

    case = next(c for c in CASES if c.name == "writes_match_the_reference_store")
    run(case, StoreUnderTest(InMemoryGraphStore, atol=1e-3))  # the store itself passes
    with pytest.raises(ContractFailure, match="writes_match_the_reference_store.*write 4 returned"):
        run(case, StoreUnderTest(NoCarry, atol=1e-3))
