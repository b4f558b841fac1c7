"""The embedded store kept in a folder: an SQLite database (WAL) is the record, the in-memory
store (:class:`~.memory_store.InMemoryGraphStore`) a cache of it.

``DIR/store.db`` holds documents, chunks, nodes with their vectors, edges, edge memory, the
successors of replaced edges, traces and JSON settings (the engine's configuration, the
retriever's, the command line's). Every write call -- an insert batch, a delete, a memory
write, a decay, an import -- is **one transaction that writes only the rows it changes**:

1. it takes the database's write lock (``BEGIN IMMEDIATE``; another writer, thread or
   process, is waited for up to ``lock_wait`` seconds, then :class:`StoreLockedError`);
2. it brings the cache up to date with what other writers committed (below);
3. it applies the write to the cache (the in-memory store's own code), which notes every row
   key it changes (:class:`_Tracked` containers);
4. it writes those rows, and one row of the change sequence naming them, then commits.

A memory write is thus read-modify-write inside its transaction: two processes remembering
the same edge never lose an update. When anything fails before the commit (a full disk, a
read-only folder, a kill), the database keeps its last committed state (SQLite's journal),
and the cache, which may hold the failed write, is rebuilt from the database: the retry of
the same call writes it.

**Catching up.** Each committed write appends a row to ``changes`` naming the keys it wrote.
A reader checks ``PRAGMA data_version`` (no disk read) when a query starts (:meth:`pin`) and
in the store's other top-level reads; when another connection committed, it reads the
changes after the last one it applied, re-reads those rows in one read transaction and makes
the cache match them. The change sequence keeps the last :data:`KEEP_CHANGES` writes; a
reader further behind reloads the whole cache.

Traces are rows too. A retrieval's trace is written without waiting: when another writer
holds the database it is kept and written by the next write (a memorized trace is written at
once, waiting like any write). Every write call's commit waits for the disk
(``synchronous=FULL``); a retrieval's trace and a memory write's claim on its trace do not
(``NORMAL``: a kill loses neither, a power cut may, and neither was acted on yet).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import numpy as np

from ..core import progress as progress_arg
from ..core.errors import (
    ConfigError,
    StoreCorruptError,
    StoreError,
    StoreExistsError,
    StoreLockedError,
    StoreNotFoundError,
)
from ..core.ids import norm_name
from ..core.types import Chunk, Edge, Node
from . import generations
from .base import Change
from .memory_store import _VERSIONED, InMemoryGraphStore

DB_FILE = "store.db"
BACKUP = "format2-backup"
"""Where a folder of the generations format keeps its old files once converted."""
FORMAT = 3
KEEP_CHANGES = 20_000
"""Writes the change sequence keeps for readers catching up; one further behind reloads."""
_PERSISTED = ("_docs", "_chunks", "_nodes", "_edges", "_memory", "_successor")
_IN = 500  # keys per ``IN (...)`` of a catch-up read

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (id TEXT PRIMARY KEY, hash TEXT NOT NULL,
    meta TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (id TEXT PRIMARY KEY, doc_id TEXT NOT NULL,
    idx INTEGER NOT NULL, text TEXT NOT NULL, start INTEGER NOT NULL, "end" INTEGER NOT NULL,
    metadata TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes (id TEXT PRIMARY KEY, kind TEXT NOT NULL, name TEXT NOT NULL,
    doc_id TEXT, chunk_id TEXT, aliases TEXT NOT NULL, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS edges (id TEXT PRIMARY KEY, u TEXT NOT NULL, v TEXT NOT NULL,
    kind TEXT NOT NULL, text TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memory (edge_id TEXT PRIMARY KEY, vector BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS successors (old TEXT PRIMARY KEY, new TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS traces (seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE, body TEXT NOT NULL, claimed REAL, claimer TEXT);
CREATE TABLE IF NOT EXISTS settings (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS changes (seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL,
    pid INTEGER NOT NULL, keys TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS ann (kind TEXT PRIMARY KEY, seq INTEGER NOT NULL, ids TEXT NOT NULL,
    keys TEXT NOT NULL, data BLOB NOT NULL);
"""

# each persisted container: its table, key column, and the columns a row is read with
_TABLES = {
    "_docs": ("documents", "id", "id, hash, meta"),
    "_chunks": ("chunks", "id", 'id, doc_id, idx, text, start, "end", metadata'),
    "_nodes": ("nodes", "id", "id, kind, name, doc_id, chunk_id, aliases, vector"),
    "_edges": ("edges", "id", "id, u, v, kind, text"),
    "_memory": ("memory", "edge_id", "edge_id, vector"),
    "_successor": ("successors", "old", "old, new"),
}


class _Tracked(dict):  # type: ignore[type-arg]
    """A dict that notes every key set or removed in ``log`` (shared by its copies until the
    write that uses it collects it): how a write finds the rows it changed. The log keeps the
    order keys were first touched in, so new rows reach the database in the order they were
    added (a reload's dicts are in the writer's order)."""

    __slots__ = ("log",)

    def __init__(self, data: Any = (), log: dict[Any, None] | None = None) -> None:
        super().__init__(data)
        self.log: dict[Any, None] = {} if log is None else log

    def copy(self) -> _Tracked:
        return _Tracked(self, self.log)

    def __setitem__(self, key: Any, value: Any) -> None:
        self.log[key] = None
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self.log[key] = None
        super().__delitem__(key)

    def pop(self, key: Any, *default: Any) -> Any:
        self.log[key] = None
        return super().pop(key, *default)

    def popitem(self) -> tuple[Any, Any]:
        key, value = super().popitem()
        self.log[key] = None
        return key, value

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key not in self:
            self.log[key] = None
        return super().setdefault(key, default)

    def update(self, *args: Any, **kwargs: Any) -> None:
        new = dict(*args, **kwargs)
        self.log.update(dict.fromkeys(new))
        super().update(new)

    def clear(self) -> None:
        self.log.update(dict.fromkeys(self))
        super().clear()


def _another_store(root: Path) -> StoreExistsError:
    return StoreExistsError(
        f"{root} holds another saved store: saving would replace it and its learned memory. "
        "Open it to add to it, save elsewhere, or pass overwrite=True"
    )


def _may_save(root: Path, overwrite: bool) -> None:
    """Refuse a save into ``root`` that would replace another store (unless ``overwrite``)
    or write among the user's files (a store's folder may hold the user's notes too)."""
    from ..core.persist import check_folder

    if SQLiteGraphStore.exists(root):
        if not overwrite:
            raise _another_store(root)
    else:
        check_folder(root, own_name)


def _mirror(container: dict, keys: Iterable[str], found: Mapping[str, Any]) -> None:
    """Make ``container``'s ``keys`` what the database holds: the rows ``found``, the others
    gone."""
    for key in keys:
        if key in found:
            container[key] = found[key]
        else:
            container.pop(key, None)


def make_folder(root: Path) -> None:
    """Make ``root`` (and its parents) for a store, or a typed error saying what to give."""
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot make the store folder {root}: {exc.strerror or exc}; give a folder you "
            "can write to"
        ) from exc


def _check_file(path: Path) -> None:
    """Refuse a ``store.db`` that is not a regular, non-empty file of the folder: a link (to
    another store, or dangling: SQLite would make a database elsewhere), a FIFO, a device, a
    folder, an empty file (this library only ever renames a whole database into place)."""
    import stat

    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        what = (
            "a link"
            if stat.S_ISLNK(st.st_mode)
            else ("an empty file" if stat.S_ISREG(st.st_mode) else "not a regular file")
        )
        raise StoreCorruptError(
            f"{path} is {what}, not a store database: remove it, or give the folder of a "
            "saved store"
        )


def db_path(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / DB_FILE


def holds_database(directory: str | os.PathLike[str]) -> bool:
    """True when ``directory`` holds this format's database."""
    return os.path.lexists(db_path(directory))


def own_name(name: str) -> bool:
    """The names this format keeps in a store folder (and the older format's, converted)."""
    return (
        name in (DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", f"{DB_FILE}-journal", BACKUP)
        or name.startswith(f".{DB_FILE}.")
        or generations.own_name(name)
    )


def made_name(name: str) -> bool:
    """The files opening a new store makes in its folder: the database, its journal files,
    the temporary files of a write, the lock."""
    return (
        name in (DB_FILE, f"{DB_FILE}-wal", f"{DB_FILE}-shm", f"{DB_FILE}-journal")
        or name.startswith(f".{DB_FILE}.")
        or name == generations.LOCK_FILE
    )


def _sqlite_error(exc: sqlite3.Error, root: Path, what: str) -> StoreError:
    """A typed error for an SQLite failure: locked, full, read-only or damaged."""
    text = str(exc)
    code = getattr(exc, "sqlite_errorcode", None)
    if "locked" in text or "busy" in text:
        return StoreLockedError(
            f"could not {what}: the store at {root} is held by another writer longer than "
            "lock_wait; nothing of this call was written. Try again, or open the store "
            "with a longer lock_wait"
        )
    if "full" in text or code == 13:
        return StoreError(
            f"could not {what} at {root}: the disk is full; nothing of this call was "
            "written. Free space, then make the same call again"
        )
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return StoreError(
            f"could not {what} at {root}: {text}. Make the folder and its store.db "
            "writable, then make the same call again (nothing of it was written)"
        )
    if "malformed" in text or "not a database" in text or "corrupt" in text:
        return StoreCorruptError(f"the store database at {root} is damaged: {text}")
    return StoreError(f"could not {what} at {root}: {text}")


class SQLiteGraphStore(InMemoryGraphStore):
    """The embedded store kept in ``directory`` (see the module): a live store, shared by
    threads and processes; open it with :meth:`open` (or ``store="DIR"``)."""

    root: Path

    def __init__(
        self,
        directory: str | os.PathLike[str],
        namespace: str = "default",
        max_traces: int = 10_000,
        lock_wait: float = 30.0,
        **options: Any,
    ) -> None:
        super().__init__(namespace, max_traces, lock_wait, **options)
        self.root = Path(directory).resolve()
        self._options = options
        self._db_lock = threading.Lock()  # this process's writer connection, one txn at a time
        self._read_lock = threading.Lock()
        self._seq = 0  # the last change applied to the cache
        self._writing_thread: int | None = None
        self._pending: dict[str, dict] = {}  # traces not yet written (the database was busy)
        self._closed = False
        self._dim_saved: int | None = None  # the dimension the database records
        self._ann_saved = -1  # the write whose ANN indexes were kept
        self._marked: dict[str, str] = {}  # memorized traces written, as written (a few)
        self._flushing: dict[str, dict] = {}  # traces the open transaction writes
        self._claimer = f"{os.getpid()}-{id(self):x}-{time.time_ns():x}"  # this store's claims
        self._track()
        self._db = self._connect(lock_wait)
        self._reader = self._connect(lock_wait)
        self._read_version = self._data_version()

    # --- connections ----------------------------------------------------------------------
    def _connect(self, wait: float) -> sqlite3.Connection:
        path = db_path(self.root)
        _check_file(path)
        try:
            con = sqlite3.connect(path, timeout=wait, isolation_level=None, check_same_thread=False)
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            raise _sqlite_error(exc, self.root, "open the store") from exc
        return con

    def _data_version(self) -> int:
        with self._read_lock:
            return int(self._reader.execute("PRAGMA data_version").fetchone()[0])

    @contextlib.contextmanager
    def _transaction(self, what: str, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """One write transaction of this process's writer connection (see the module).
        ``durable=False``: committed without waiting for the disk (a claim: one a power cut
        loses was never acted on; a kill loses nothing either way, the log is in the OS)."""
        if self._read_only:
            raise StoreError("a snapshot of a store is read only: write to the store itself")
        self._check_open()
        with self._db_lock:
            con = self._db
            try:
                if not durable:
                    con.execute("PRAGMA synchronous=NORMAL")
                con.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                if not durable:
                    with contextlib.suppress(sqlite3.Error):
                        con.execute("PRAGMA synchronous=FULL")
                raise _sqlite_error(exc, self.root, what) from exc
            self._writing_thread = threading.get_ident()
            self._flushing = {}
            try:
                yield con
                self._flush_traces(con)
                con.execute("COMMIT")
            except BaseException as exc:
                with contextlib.suppress(sqlite3.Error):
                    con.execute("ROLLBACK")
                self._keep_traces()
                if isinstance(exc, sqlite3.Error):
                    raise _sqlite_error(exc, self.root, what) from exc
                raise
            finally:
                self._writing_thread = None
                if not durable:
                    with contextlib.suppress(sqlite3.Error):
                        con.execute("PRAGMA synchronous=FULL")

    @contextlib.contextmanager
    def _write(self, what: str) -> Iterator[sqlite3.Connection]:
        """A write of the cache and its rows in one transaction, committed while the cache's
        lock is held; a failure before the commit rolls the database back and rebuilds the
        cache from it (the cache may hold the failed write)."""
        if self._read_only:
            raise StoreError("a snapshot of a store is read only: write to the store itself")
        self._check_open()
        with self._db_lock:
            con = self._db
            try:
                con.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise _sqlite_error(exc, self.root, what) from exc
            self._writing_thread = threading.get_ident()
            try:
                self._flushing = {}
                with self._lock:
                    try:
                        self._catch_up(con)
                        self._clear_logs()
                        yield con
                        self._persist(con)
                        self._flush_traces(con)
                        con.execute("COMMIT")
                    except BaseException as exc:
                        with contextlib.suppress(sqlite3.Error):
                            con.execute("ROLLBACK")
                        self._keep_traces()
                        self._rebuild(con)
                        if isinstance(exc, sqlite3.Error):
                            raise _sqlite_error(exc, self.root, what) from exc
                        raise
            finally:
                self._writing_thread = None

    def _rebuild(self, con: sqlite3.Connection) -> None:
        """The cache from the database, after a write that did not commit (the caller holds
        both locks); when even reading fails, the next read reloads."""
        self._clear_logs()
        try:
            con.execute("BEGIN")
            try:
                self._reload(con)
            finally:
                con.execute("COMMIT")
        except sqlite3.Error:
            self._seq = -1

    # --- tracking ---------------------------------------------------------------------------
    def _track(self) -> None:
        for name in _PERSISTED:
            setattr(self, name, _Tracked(getattr(self, name)))

    def _own(self, *names: str) -> None:  # copy-on-write keeps the tracking
        if self._read_only:
            raise StoreError("a snapshot of a store is read only: write to the store itself")
        for name in names:
            if name in self._shared:
                self._shared.discard(name)
                old = getattr(self, name)
                setattr(self, name, old.copy() if isinstance(old, _Tracked) else dict(old))

    def _clear_logs(self) -> None:
        for name in _PERSISTED:
            getattr(self, name).log.clear()

    def _persist(self, con: sqlite3.Connection) -> None:
        """Write the rows the cache's write changed, and its change record."""
        logs = {name: list(getattr(self, name).log) for name in _PERSISTED}
        if not any(logs.values()):
            return
        vec = self._vectors.table
        for name, keys in logs.items():
            if not keys:
                continue
            table, key, _ = _TABLES[name]
            data = getattr(self, name)
            gone = [(k,) for k in keys if k not in data]
            if gone:
                con.executemany(f"DELETE FROM {table} WHERE {key} = ?", gone)
            here = [k for k in keys if k in data]
            if not here:
                continue
            if name == "_docs":
                rows: list[tuple] = [(k, data[k][0], json.dumps(data[k][1])) for k in here]
            elif name == "_chunks":
                rows = [_chunk_row(data[k]) for k in here]
            elif name == "_nodes":
                mat = vec.matrix()
                rows = [_node_row(data[k], mat[vec.row(k)]) for k in here]
            elif name == "_edges":
                rows = [_edge_row(data[k]) for k in here]
            elif name == "_memory":
                rows = [(k, np.asarray(data[k], np.float32).tobytes()) for k in here]
            else:
                rows = [(k, data[k]) for k in here]
            _upsert(con, table, key, len(rows[0]), rows)
        if self._dim is not None and self._dim != self._dim_saved:
            con.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(self._dim),))
            self._dim_saved = self._dim
        changed = {_TABLES[n][0]: sorted(k) for n, k in logs.items() if k}
        cur = con.execute(
            "INSERT INTO changes (at, pid, keys) VALUES (?, ?, ?)",
            (time.time(), os.getpid(), json.dumps(changed)),
        )
        self._seq = int(cur.lastrowid or 0)
        if self._seq % 100 == 0:
            con.execute("DELETE FROM changes WHERE seq <= ?", (self._seq - KEEP_CHANGES,))
        self._clear_logs()

    # --- catching up ------------------------------------------------------------------------
    def _fresh(self, force: bool = False) -> None:
        """Bring the cache up to date with what other writers committed (a read of
        ``data_version`` when nothing was)."""
        if self._read_only or self._closed or self._writing_thread == threading.get_ident():
            return
        version = self._data_version()
        if version == self._read_version and not force and self._seq >= 0:
            return
        with self._lock, self._read_lock:
            con = self._reader
            try:
                con.execute("BEGIN")
                try:
                    self._catch_up(con)
                finally:
                    con.execute("COMMIT")
            except sqlite3.Error as exc:
                raise _sqlite_error(exc, self.root, "read the store") from exc
            self._read_version = version

    def _catch_up(self, con: sqlite3.Connection) -> None:
        """Make the cache what the database holds (caller: the store's lock, and a read or
        write transaction on ``con``); a row that cannot be what it says is damage."""
        try:
            self._catch_up_rows(con)
        except (KeyError, ValueError, TypeError, IndexError, AttributeError) as exc:
            self._seq = -1
            raise StoreCorruptError(
                f"the store database at {self.root} holds a damaged row ({exc!r})"
            ) from exc

    def _catch_up_rows(self, con: sqlite3.Connection) -> None:
        rows = con.execute(
            "SELECT seq, keys FROM changes WHERE seq > ? ORDER BY seq", (max(self._seq, 0),)
        ).fetchall()
        if self._seq < 0 or (rows and rows[0][0] != self._seq + 1):
            self._reload(con)  # the first read, or changes pruned before this cache read them
            return
        if not rows:
            return
        keys: dict[str, set[str]] = {}
        for _, text in rows:
            for table, ks in json.loads(text).items():
                keys.setdefault(table, set()).update(ks)
        if "*" in keys:  # the store was replaced whole (a save over it)
            self._reload(con)
            return
        self._apply(con, keys)
        self._seq = rows[-1][0]

    def _apply(self, con: sqlite3.Connection, keys: Mapping[str, set[str]]) -> None:
        """Make the cache's rows named by ``keys`` (table: row keys) what ``con`` reads."""
        found = {
            name: _read_rows(con, name, keys.get(_TABLES[name][0], set())) for name in _PERSISTED
        }
        graph = any(keys.get(t) for t in ("documents", "chunks", "nodes"))
        gone_edges = [e for e in keys.get("edges", ()) if e not in found["_edges"]]
        if graph or gone_edges:
            held = self._graph_write()
        else:
            held = None
            self._own("_edges", "_adj", "_memory", "_successor")
        if self._dim is None:
            row = con.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
            self._dim = self._dim_saved = int(row[0]) if row else None
        # edges first out, nodes out, then nodes in and edges in
        for eid in keys.get("edges", ()):
            old = self._edges.get(eid)
            if old is not None and (eid not in found["_edges"] or found["_edges"][eid] != old):
                self._edges.pop(eid)
                for end in dict.fromkeys((old.u, old.v)):
                    if end in self._adj:
                        self._adj[end] = [x for x in self._adj[end] if x != eid]
        gone_nodes = [
            self._nodes[n]
            for n in keys.get("nodes", ())
            if n in self._nodes and n not in found["_nodes"]
        ]
        if gone_nodes:
            self._vectors.drop(gone_nodes, held)
            dead = {n.id for n in gone_nodes}
            for nid in dead:
                self._nodes.pop(nid)
                self._adj.pop(nid, None)
            self._entity_names = {k: v for k, v in self._entity_names.items() if v not in dead}
        _mirror(self._docs, keys.get("documents", ()), found["_docs"])
        _mirror(self._chunks, keys.get("chunks", ()), found["_chunks"])
        new_nodes, new_vecs = [], []
        for nid, (node, vector) in found["_nodes"].items():
            if nid in self._nodes:
                if self._nodes[nid] != node:
                    self._nodes[nid] = node
                    for alias in node.aliases:  # names another entity holds stay its
                        self._entity_names.setdefault(norm_name(alias), nid)
            else:
                self._add_node(node)
                new_nodes.append(node)
                new_vecs.append(vector)
        if new_nodes:
            self._vectors.put(new_nodes, np.stack(new_vecs))
        for eid, edge in found["_edges"].items():
            if eid not in self._edges:
                self._edges[eid] = edge
                for end in dict.fromkeys((edge.u, edge.v)):
                    self._adj[end] = self._adj.get(end, []) + [eid]
        _mirror(self._memory, keys.get("memory", ()), found["_memory"])
        _mirror(self._successor, keys.get("successors", ()), found["_successor"])
        self._clear_logs()

    def _reload(self, con: sqlite3.Connection) -> None:
        """Rebuild the whole cache from the database (first open, a reader too far behind,
        a write that failed)."""
        fresh = InMemoryGraphStore(self.namespace, self.max_traces, self.lock_wait, **self._options)
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        fresh._dim = int(meta["dim"]) if "dim" in meta else None
        nodes, blobs = [], []
        dim = fresh._dim or 0
        kinds: dict[str, str] = {}  # one string per kind
        for r in con.execute(f"SELECT {_TABLES['_nodes'][2]} FROM nodes ORDER BY rowid"):
            kind = kinds.setdefault(r[1], r[1])
            node = Node(r[0], kind, r[2], r[3], r[4], _aliases(r[5]))  # type: ignore[arg-type]
            nodes.append(node)
            blobs.append(r[6])
        fresh._fill(
            [
                (r[0], r[1], json.loads(r[2]))
                for r in con.execute("SELECT id, hash, meta FROM documents ORDER BY rowid")
            ],
            [
                _chunk_of(r)
                for r in con.execute(f"SELECT {_TABLES['_chunks'][2]} FROM chunks ORDER BY rowid")
            ],
            nodes,
            _matrix(blobs, dim, raw=True),
            _edges(con, {n.id: n.id for n in nodes}),
        )
        fresh._dim = fresh._dim or (int(meta["dim"]) if "dim" in meta else None)
        fresh._memory = {
            e: _vector(v)
            for e, v in con.execute("SELECT edge_id, vector FROM memory ORDER BY rowid")
        }
        fresh._successor = dict(con.execute("SELECT old, new FROM successors ORDER BY rowid"))
        seq = int(con.execute("SELECT max(seq) FROM changes").fetchone()[0] or 0)
        for kind, at, ids, keys, data in con.execute("SELECT kind, seq, ids, keys, data FROM ann"):
            if at == seq:  # kept for the store as it is: adopted, not rebuilt
                with contextlib.suppress(ValueError, KeyError):
                    fresh._vectors.adopt_index(kind, json.loads(ids), json.loads(keys), data)
        with self._lock:
            for name in (*_VERSIONED, "_successor"):
                setattr(self, name, getattr(fresh, name))
            self._vectors, self._dim = fresh._vectors, fresh._dim
            self._dim_saved = fresh._dim
            self._first_pass, self._shared = {}, set()
            self._version += 1
            self._track()
            self._seq = seq

    # --- opening --------------------------------------------------------------------------
    @classmethod
    def open(  # type: ignore[override]
        cls,
        directory: str | os.PathLike[str],
        namespace: str = "default",
        *,
        create: bool = True,
        lock_wait: float = 30.0,
        max_traces: int = 10_000,
        progress: Any = None,
        **options: Any,
    ) -> Self:
        """The store kept in ``directory``: made there when missing (unless not ``create``),
        converted once when it holds the older generations format (its files are moved to
        ``format2-backup/``). ``namespace``: a folder holds one; another raises
        :class:`ConfigError`. ``options``: the in-memory cache's (``vectors``, ``ann``...)."""
        progress_arg.check(progress)
        root = Path(directory).expanduser().resolve()
        if root.exists() and not root.is_dir():
            raise StoreError(f"{root} is a file, not a store directory: give a directory path")
        if not holds_database(root):
            if not create and not generations.holds_data(root):
                raise StoreNotFoundError(
                    f"no saved store at {root}: "
                    + ("the folder holds none" if root.exists() else "no such directory")
                    + "; give the folder of a saved store, or open it with create=True"
                )
            _convert_or_make(root, namespace, lock_wait, progress, options)
        _move_backup(root)
        try:
            store = cls(root, namespace, max_traces, lock_wait, **options)
        except TypeError as exc:
            raise ConfigError(f"unknown store option: {exc}") from None
        store._start(namespace, progress)
        return store

    OPEN_STEPS = ("rows read", "BM25 index", "graph matrix")
    """What an open does, in order (its ``progress`` steps): the cache built from the
    database's rows, then what the first query needs, built now rather than then."""

    def _start(self, namespace: str, progress: Any = None) -> None:
        try:
            self._db.executescript(SCHEMA)
            row = self._db.execute("SELECT value FROM meta WHERE key = 'namespace'").fetchone()
            if row is None:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('namespace', ?)", (namespace,))
                self._db.execute("INSERT OR IGNORE INTO meta VALUES ('format', ?)", (str(FORMAT),))
                self._db.execute("COMMIT")
                row = self._db.execute("SELECT value FROM meta WHERE key = 'namespace'").fetchone()
            self.namespace = row[0]
            if namespace != "default" and self.namespace != namespace:
                self.close()
                raise ConfigError(
                    f"store at {self.root} holds namespace {self.namespace!r}, not "
                    f"{namespace!r}: use one folder per namespace"
                )
            self._seq = -1
            report = progress_arg.as_progress(progress, "opening the store", "step")
            total = len(self.OPEN_STEPS)
            self._fresh(force=True)
            if report is not None:
                report(1, total)
            self.lexical_index()
            if report is not None:
                report(2, total)
            self.graph_matrix()
            if report is not None:
                report(3, total)
        except sqlite3.Error as exc:
            self.close()
            raise _sqlite_error(exc, self.root, "open the store") from exc

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"the store at {self.root} is closed: open it again")

    def close(self) -> None:
        """Write pending traces and close the database connections (idempotent)."""
        if self._closed or self._read_only:
            return
        with contextlib.suppress(StoreError, sqlite3.Error):
            self.save_indexes()
            if self._pending:
                with self._transaction("write traces"):
                    pass
        self._closed = True
        for con in (self._db, self._reader):
            with contextlib.suppress(sqlite3.Error):
                con.close()

    def __del__(self) -> None:  # a store dropped without close(): write its pending traces
        with contextlib.suppress(Exception):
            if not self._read_only:
                self.close()

    @staticmethod
    def exists(directory: str | os.PathLike[str]) -> bool:  # type: ignore[override]
        return holds_database(directory) or generations.holds_data(Path(directory))

    def copy(self) -> InMemoryGraphStore:
        """An in-memory copy of this store as it is now: its writes stay in memory."""
        self._fresh()
        view = self.pin()
        out = InMemoryGraphStore(self.namespace, self.max_traces, self.lock_wait, **self._options)
        nodes = list(view._nodes.values())
        table = view._vectors.table
        out._dim = view._dim
        InMemoryGraphStore.add_graph(
            out,
            documents=[(d, h, dict(m)) for d, (h, m) in view._docs.items()],
            chunks=list(view._chunks.values()),
            nodes=nodes,
            embeddings=table.matrix()[table.rows_of([n.id for n in nodes])].astype(np.float32)
            if nodes
            else np.zeros((0, view._dim or 0), np.float32),
            edges=list(view._edges.values()),
            entity_aliases={},
        )
        out._memory = dict(view._memory)
        out._successor = dict(view._successor)
        with self._lock:  # the built ANN indexes come along (not rebuilt: minutes at scale)
            built = self._vectors.saved_indexes() if self._version == view._version else {}
        for kind, (ids, keys, data) in built.items():
            with contextlib.suppress(ValueError):
                out._vectors.adopt_index(kind, ids, keys, data)
        return out

    # --- reads see other processes' writes ------------------------------------------------
    def pin(self) -> InMemoryGraphStore:
        if not self._read_only and self._lock.acquire(blocking=False):
            try:
                self._fresh()
            finally:
                self._lock.release()
        return super().pin()

    def counts(self) -> dict[str, int]:
        self._fresh()
        return super().counts()

    def document_hash(self, doc_id: str) -> str | None:
        self._fresh()
        return super().document_hash(doc_id)

    def edge_successors(self, edge_ids: Sequence[str]) -> dict[str, str]:
        self._fresh()
        return super().edge_successors(edge_ids)

    def document_ids(self) -> list[str]:
        self._fresh()
        return super().document_ids()

    def document_count(self) -> int:
        """How many documents the store holds (a retrieval's check for an empty store)."""
        self._fresh()
        return len(self._docs)

    def documents(self) -> dict[str, tuple[str, dict]]:
        self._fresh()
        return super().documents()

    def whole_graph(self) -> tuple[list[Node], list[Edge]]:
        self._fresh()
        return super().whole_graph()

    def export_memory(self) -> dict[str, list[float]]:
        self._fresh()
        return super().export_memory()

    def top_memory(self, query: np.ndarray | None, k: int) -> list[tuple[str, float]]:
        self._fresh()
        return super().top_memory(query, k)

    # --- writes: each one transaction -------------------------------------------------------
    @contextlib.contextmanager
    def _write_step(self, what: str, graph: bool = False) -> Iterator[None]:
        """Every write (decided by :mod:`.writes`, as every store's) runs in one transaction
        that writes the rows it changed (:meth:`_write`)."""
        with self._write(what), self._writing(graph):
            yield

    def apply(self, change: Change) -> None:
        """A change, written in a transaction of its own unless a write of this store (which
        commits it) is applying it."""
        if self._writing_thread == threading.get_ident():
            super().apply(change)
            return
        with self._write_step("apply the change", change.graph):
            super().apply(change)

    def reset_memory(self) -> int:
        with self._write("reset memory"):
            return super().reset_memory()

    def decay_memory(self, factor: float) -> int:
        with self._write("decay memory"):
            return super().decay_memory(factor)

    def import_memory(self, vectors: dict[str, list[float]]) -> int:
        with self._write("import memory"):
            return super().import_memory(vectors)

    def flush(self) -> None:
        """Every write is committed when its method returns; pending traces are written, and
        the ANN indexes built since the last write (:meth:`save_indexes`)."""
        self.save_indexes()
        if self._pending:
            with self._transaction("write traces"):
                pass

    def save_indexes(self) -> int:
        """Keep the ANN indexes built for the store as it is now (extra ``ann``), so that the
        next open adopts them instead of rebuilding them (minutes at a million edges); they
        are kept with the last write's number and ignored once another write came. Called by
        :meth:`close` and :meth:`flush`; returns how many were written."""
        with self._lock:
            seq = self._seq
            built = self._vectors.saved_indexes() if seq >= 0 else {}
        if not built or self._ann_saved == seq:
            return 0
        with self._transaction("save the ANN indexes") as con:
            row = con.execute("SELECT max(seq) FROM changes").fetchone()
            if int(row[0] or 0) != seq:
                return 0  # written since: this cache's indexes are not the store's now
            con.execute("DELETE FROM ann")
            con.executemany(
                "INSERT INTO ann VALUES (?, ?, ?, ?, ?)",
                [
                    (k, seq, json.dumps(ids), json.dumps(keys), data)
                    for k, (ids, keys, data) in built.items()
                ],
            )
        self._ann_saved = seq
        return len(built)

    # --- traces -------------------------------------------------------------------------------
    def save_trace(self, trace: dict) -> None:
        super().save_trace(trace)
        with self._trace_lock:
            self._pending[trace["trace_id"]] = trace
        if trace.get("memorized"):  # the memory write's mark: written now, waiting if needed
            body = json.dumps(trace, sort_keys=True)
            if self._marked.get(trace["trace_id"]) == body:  # written already, as it is
                with self._trace_lock:
                    self._pending.pop(trace["trace_id"], None)
                return
            try:
                with self._transaction("write the trace"):
                    pass
            except StoreError as exc:
                raise type(exc)(
                    f"the memory write is on disk, but marking its trace memorized failed: "
                    f"{exc}. The mark is kept in this process and written by its next write; "
                    "do not repeat the memorize"
                ) from exc
            self._marked[trace["trace_id"]] = body
            while len(self._marked) > 1000:
                self._marked.pop(next(iter(self._marked)))
            return
        if self._db_lock.acquire(blocking=False):  # a retrieval never waits for a writer
            try:
                self._db.execute("PRAGMA busy_timeout = 0")
                self._db.execute("PRAGMA synchronous = NORMAL")  # a retrieval's trace: no fsync
                try:
                    self._db.execute("BEGIN IMMEDIATE")
                except sqlite3.Error:
                    return  # another writer holds it: written by the next write
                try:
                    self._flush_traces(self._db)
                    self._db.execute("COMMIT")
                except sqlite3.Error:
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
            finally:
                with contextlib.suppress(sqlite3.Error):
                    self._db.execute(f"PRAGMA busy_timeout = {int(self.lock_wait * 1000)}")
                    self._db.execute("PRAGMA synchronous = FULL")
                self._db_lock.release()

    def _flush_traces(self, con: sqlite3.Connection) -> None:
        with self._trace_lock:
            pending, self._pending = self._pending, {}
        self._flushing = pending  # put back if the transaction does not commit
        if not pending:
            return
        try:
            con.executemany(
                "INSERT INTO traces (id, body) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET "
                "body = excluded.body, claimed = CASE WHEN json_extract(excluded.body, "
                "'$.memorized') THEN NULL ELSE claimed END, claimer = CASE WHEN "
                "json_extract(excluded.body, '$.memorized') THEN NULL ELSE claimer END",
                [(t, json.dumps(b)) for t, b in pending.items()],
            )
            last = con.execute("SELECT max(seq) FROM traces").fetchone()[0] or 0
            if last % 100 < len(pending) or len(pending) >= 100:
                con.execute("DELETE FROM traces WHERE seq <= ?", (last - self.max_traces,))
        except BaseException:
            with self._trace_lock:  # kept for the next write
                self._pending = {**pending, **self._pending}
            raise

    def _keep_traces(self) -> None:
        """The traces a transaction that did not commit was writing: pending again."""
        flushing, self._flushing = getattr(self, "_flushing", {}), {}
        if flushing:
            with self._trace_lock:
                self._pending = {**flushing, **self._pending}

    def load_trace(self, trace_id: str) -> dict | None:
        with self._trace_lock:
            if trace_id in self._pending:
                return self._pending[trace_id]
        with self._read_lock:
            row = self._reader.execute(
                "SELECT body FROM traces WHERE id = ?", (trace_id,)
            ).fetchone()
        return _trace_of(row[0], self.root) if row else super().load_trace(trace_id)

    def recent_traces(self, limit: int) -> list[dict]:
        with self._read_lock:
            rows = self._reader.execute(
                "SELECT body FROM traces ORDER BY seq DESC LIMIT ?", (max(int(limit), 0),)
            ).fetchall()
        with self._trace_lock:
            pending = list(reversed(self._pending.values()))
        seen = {t["trace_id"] for t in pending}
        out = pending + [
            t for r in rows if (t := _trace_of(r[0], self.root))["trace_id"] not in seen
        ]
        return out[: max(limit, 0)]

    claim_timeout = 600.0  # seconds after which a crashed writer's claim may be taken over

    def claim_trace(self, trace_id: str) -> bool:
        """Mark the trace claimed by this store unless it is memorized or claimed by another
        (within :attr:`claim_timeout`): one UPDATE in a transaction, so one process wins. A
        claim this store holds is its own again (its release failed with the write)."""
        now = time.time()
        with self._transaction("claim the trace", durable=False) as con:
            self._flush_traces(con)
            cur = con.execute(
                "UPDATE traces SET claimed = ?, claimer = ? WHERE id = ? AND "
                "coalesce(json_extract(body, '$.memorized'), 0) = 0 AND "
                "(claimed IS NULL OR claimed < ? OR claimer = ?)",
                (now, self._claimer, trace_id, now - self.claim_timeout, self._claimer),
            )
            return cur.rowcount == 1

    def release_trace(self, trace_id: str) -> None:
        with self._transaction("release the trace", durable=False) as con:
            con.execute(
                "UPDATE traces SET claimed = NULL, claimer = NULL WHERE id = ? AND claimer = ?",
                (trace_id, self._claimer),
            )

    # --- settings (the engine's configuration, the retriever's, the CLI's) -----------------
    def settings(self) -> dict[str, Any]:
        with self._read_lock:
            rows = self._reader.execute("SELECT key, value FROM settings").fetchall()
        return _settings_of(rows, self.root)

    def update_settings(self, values: dict[str, Any]) -> None:
        if not values:
            return
        rows = [(k, json.dumps(v, allow_nan=False)) for k, v in values.items()]
        with self._transaction("write the settings") as con:
            con.executemany("INSERT OR REPLACE INTO settings VALUES (?, ?)", rows)

    # --- saving elsewhere --------------------------------------------------------------------
    def save(  # type: ignore[override]
        self,
        directory: str | os.PathLike[str],
        *,
        wait: float | None = None,
        overwrite: bool = False,
        beside: Mapping[str, bytes] | None = None,
    ) -> Path:
        """Every write is in the database already: saving to this store's own folder writes
        ``beside`` (``engine.json``'s content...) into its settings; saving elsewhere copies
        the database there (SQLite's online backup), refusing a folder that holds another
        store unless ``overwrite``, or files of the user's."""

        settings = {_setting(name): _beside_value(data) for name, data in (beside or {}).items()}
        root = Path(directory).expanduser().resolve()
        if root == self.root:
            self.flush()
            self.update_settings(settings)
            return root
        _may_save(root, overwrite)
        if holds_database(root):  # replaced in place: whoever has it open reloads
            return write_store(self.copy(), root, settings, overwrite=True)
        self.flush()

        def build(tmp: Path) -> None:  # SQLite's online backup of this store, then settings
            target = sqlite3.connect(tmp)
            try:
                with self._read_lock:
                    self._reader.backup(target)
                if settings:
                    target.executemany(
                        "INSERT OR REPLACE INTO settings VALUES (?, ?)",
                        [(k, json.dumps(v)) for k, v in settings.items()],
                    )
                    target.commit()
            finally:
                target.close()

        _new_database(root, build, overwrite)
        return root

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], *, progress: Any = None, **options: Any
    ) -> Self:  # type: ignore[override]
        """:meth:`open` without making a store: a live store, not a copy."""
        return cls.open(directory, create=False, progress=progress, **options)


# --- rows -------------------------------------------------------------------------------------
def _upsert(con: sqlite3.Connection, table: str, key: str, width: int, rows: list[tuple]) -> None:
    cols = [c.strip() for c in _TABLES_BY_NAME[table].split(",")]
    sets = ", ".join(f"{c} = excluded.{c}" for c in cols if c != key)
    marks = ", ".join("?" * width)
    con.executemany(
        f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks}) "
        f"ON CONFLICT({key}) DO UPDATE SET {sets}",
        rows,
    )


_TABLES_BY_NAME = {t: cols for t, _, cols in _TABLES.values()}


def _chunk_row(c: Chunk) -> tuple:
    return (c.id, c.doc_id, c.index, c.text, c.start, c.end, json.dumps(c.metadata))


def _chunk_of(r: Sequence[Any]) -> Chunk:
    return Chunk(r[0], r[1], r[2], r[3], r[4], r[5], json.loads(r[6]))


def _node_row(n: Node, vector: np.ndarray) -> tuple:
    return (
        n.id,
        n.kind,
        n.name,
        n.doc_id,
        n.chunk_id,
        json.dumps(list(n.aliases)),
        vector.tobytes(),
    )


def _aliases(text: str) -> tuple[str, ...]:
    return () if text == "[]" else tuple(json.loads(text))


def _matrix(blobs: list[bytes], dim: int, raw: bool = False) -> np.ndarray:
    """The vectors of node rows as one float32 matrix (each kept float16 or float32: told
    apart by its size; one store keeps one type)."""
    if not blobs:
        return np.zeros((0, dim), np.float32)
    wide = np.float16 if len(blobs[0]) == 2 * dim else np.float32
    if any(len(b) != len(blobs[0]) for b in blobs):
        return np.stack(
            [np.frombuffer(b, np.float16 if len(b) == 2 * dim else np.float32) for b in blobs]
        ).astype(np.float32)
    found = np.frombuffer(b"".join(blobs), dtype=wide).reshape(len(blobs), dim)
    return found if raw else found.astype(np.float32)


def _node_of(r: Sequence[Any], dim: int) -> tuple[Node, np.ndarray]:
    """A node row and its vector (kept float16 or float32: told apart by its size)."""
    node = Node(r[0], r[1], r[2], r[3], r[4], _aliases(r[5]))
    dtype = np.float16 if len(r[6]) == 2 * dim else np.float32
    return node, np.frombuffer(r[6], dtype=dtype).astype(np.float32)


def _edge_row(e: Edge) -> tuple:
    return (e.id, e.u, e.v, e.kind, e.text)


def _edges(con: sqlite3.Connection, ids: dict[str, str]) -> Iterator[Edge]:
    """Every edge row, as a built graph holds them: an edge's ends the very strings of its
    nodes' ids, and one string per kind and per mention / context text (each row read gives
    every value its own string: at 1 M edges ~200 MB of copies, RESULTS section 6)."""
    shared: dict[str, str] = {}
    for eid, u, v, kind, text in con.execute(
        "SELECT id, u, v, kind, text FROM edges ORDER BY rowid"
    ):
        kind = shared.setdefault(kind, kind)
        if kind in ("mention", "context"):
            text = shared.setdefault(text, text)
        yield Edge(eid, ids.get(u, u), ids.get(v, v), kind, text)  # type: ignore[arg-type]


def _vector(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype=np.float32).copy()


def _read_rows(con: sqlite3.Connection, name: str, keys: set[str]) -> dict[str, Any]:
    """The current rows of ``keys`` in the container ``name``'s table, as cache values."""
    if not keys:
        return {}
    table, key, cols = _TABLES[name]
    out: dict[str, Any] = {}
    ks = list(keys)
    row = con.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
    dim = int(row[0]) if row else 0
    for i in range(0, len(ks), _IN):
        part = ks[i : i + _IN]
        marks = ", ".join("?" * len(part))
        for r in con.execute(f"SELECT {cols} FROM {table} WHERE {key} IN ({marks})", part):
            if name == "_docs":
                out[r[0]] = (r[1], json.loads(r[2]))
            elif name == "_chunks":
                out[r[0]] = _chunk_of(r)
            elif name == "_nodes":
                out[r[0]] = _node_of(r, dim)
            elif name == "_edges":
                out[r[0]] = Edge(*r)
            elif name == "_memory":
                out[r[0]] = _vector(r[1])
            else:
                out[r[0]] = r[1]
    return out


def _setting(name: str) -> str:
    return name[:-5] if name.endswith(".json") else name


def _beside_value(data: bytes) -> Any:
    doc = json.loads(data)
    if isinstance(doc, dict) and set(doc) == {"sha256", "body"}:
        return json.loads(doc["body"])
    return doc


# --- making and converting -----------------------------------------------------------------
def _convert_or_make(
    root: Path, namespace: str, wait: float, progress: Any, options: dict[str, Any]
) -> None:
    """Make the database in ``root``: empty, or (once, under the folder's lock) holding the
    store of the generations format saved there, with the JSON files beside it as settings.
    Built under a temporary name and renamed into place: a kill leaves no half database."""
    from ..core.persist import BESIDE, check_folder

    if not generations.holds_data(root):
        check_folder(root, own_name)
    make_folder(root)
    with generations.dir_lock(root, wait):
        if holds_database(root):
            return  # another process made it meanwhile
        _clear_temps(root)  # of conversions and saves that did not finish
        tmp = root / f".{DB_FILE}.{os.getpid()}.tmp"
        try:
            con = sqlite3.connect(tmp, isolation_level=None)
            try:
                con.executescript(f"BEGIN; {SCHEMA} COMMIT;")  # one commit, not one per table
                con.execute("BEGIN")
                old = None
                if generations.holds_data(root):
                    old = InMemoryGraphStore.load(root, progress=progress, **options)
                    namespace = old.namespace
                con.execute("INSERT INTO meta VALUES ('namespace', ?)", (namespace,))
                con.execute("INSERT INTO meta VALUES ('format', ?)", (str(FORMAT),))
                if old is not None:
                    _write_all(con, old)
                    for name in BESIDE:
                        if (root / name).exists():
                            con.execute(
                                "INSERT INTO settings VALUES (?, ?)",
                                (_setting(name), json.dumps(_old_beside(root / name))),
                            )
                con.execute("COMMIT")
                con.execute("PRAGMA journal_mode=WAL")
            finally:
                con.close()
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, db_path(root))
        except BaseException as exc:  # a damaged old store too: no half-made database left
            _clear_temps(root)
            if isinstance(exc, (sqlite3.Error, OSError)):
                raise StoreError(
                    f"could not make the store database at {root}: {exc}; free "
                    "space or make the folder writable, then open it again"
                ) from exc
            raise
        _move_backup(root)


def _write_all(con: sqlite3.Connection, store: InMemoryGraphStore) -> None:
    """Every row of an in-memory store (a conversion)."""
    table = store._vectors.table
    mat = table.matrix()
    if store._dim is not None:
        con.execute("INSERT INTO meta VALUES ('dim', ?)", (str(store._dim),))
    con.executemany(
        "INSERT INTO documents VALUES (?, ?, ?)",
        [(d, h, json.dumps(m)) for d, (h, m) in store._docs.items()],
    )
    con.executemany(
        "INSERT INTO chunks VALUES (?, ?, ?, ?, ?, ?, ?)",
        [_chunk_row(c) for c in store._chunks.values()],
    )
    con.executemany(
        "INSERT INTO nodes VALUES (?, ?, ?, ?, ?, ?, ?)",
        [_node_row(n, mat[table.row(n.id)]) for n in store._nodes.values()],
    )
    con.executemany(
        "INSERT INTO edges VALUES (?, ?, ?, ?, ?)", [_edge_row(e) for e in store._edges.values()]
    )
    con.executemany(
        "INSERT INTO memory VALUES (?, ?)",
        [(e, np.asarray(v, np.float32).tobytes()) for e, v in store._memory.items()],
    )
    con.executemany("INSERT INTO successors VALUES (?, ?)", list(store._successor.items()))
    con.executemany(
        "INSERT INTO traces (id, body) VALUES (?, ?)",
        [(t["trace_id"], json.dumps(t)) for t in store._traces.values()],
    )


def _move_backup(root: Path) -> None:
    """Move the generations format's files (kept as they were) into ``format2-backup/``
    once the database holds them: idempotent, so a conversion killed midway finishes."""
    if not holds_database(root):
        return
    names = [
        p
        for p in root.iterdir()
        if generations.own_name(p.name) and p.name != generations.LOCK_FILE
    ]
    if not names:
        return
    from ..core.persist import BESIDE  # copied into the settings with the generations

    names += [root / n for n in BESIDE if (root / n).exists()]
    backup = root / BACKUP
    backup.mkdir(exist_ok=True)
    for p in names:
        with contextlib.suppress(OSError):
            os.replace(p, backup / p.name)


def read_settings(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The settings kept in the store database of ``directory`` (read only; ``{}`` when it
    holds none), or, in a folder of the generations format, its JSON files beside."""
    from ..core.persist import BESIDE

    root = Path(directory).expanduser()
    if not holds_database(root):
        return {_setting(n): _old_beside(root / n) for n in BESIDE if (root / n).exists()}
    try:
        con = sqlite3.connect(f"{db_path(root.resolve()).as_uri()}?mode=ro", uri=True)
        try:
            rows = con.execute("SELECT key, value FROM settings").fetchall()
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise _sqlite_error(exc, root, "read the settings") from exc
    return _settings_of(rows, root)


def _trace_of(body: str, root: Path) -> dict:
    """A trace row's body; one that is not a JSON object is damage, said as such."""
    try:
        found = json.loads(body)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise StoreCorruptError(f"a trace kept in the store at {root} is damaged")
    return found


def _old_beside(path: Path) -> Any:
    """A JSON file the generations format kept beside its store: ``engine.json`` /
    ``cli.json`` carry their checksum, ``retriever.json`` was plain JSON."""
    from ..core.files import read_regular
    from ..core.persist import read_checked_json

    try:
        doc = json.loads(read_regular(path).decode("utf-8"))
    except (OSError, ValueError, UnicodeError) as exc:
        raise StoreCorruptError(f"{path} is missing or damaged: {exc}") from exc
    if path.name != "retriever.json":  # written with their checksum: damage is refused
        return read_checked_json(path)
    if not isinstance(doc, dict):
        raise StoreCorruptError(f"{path} is damaged: not a JSON object")
    return doc


def _settings_of(rows: list[tuple[str, str]], root: Path) -> dict[str, Any]:
    """The settings rows as values; one that is not JSON is damage, said as such."""
    out = {}
    for key, value in rows:
        try:
            out[key] = json.loads(value)
        except ValueError as exc:
            raise StoreCorruptError(
                f"the {key!r} settings kept in the store at {root} are damaged ({exc}): save "
                "them again (engine.save(), retriever.save(path)) to replace them"
            ) from None
    return out


def write_store(
    store: InMemoryGraphStore,
    directory: str | os.PathLike[str],
    settings: Mapping[str, Any],
    *,
    overwrite: bool = False,
) -> Path:
    """Write an in-memory store and ``settings`` as the store database of ``directory``: a
    new one is made under a temporary name and renamed into place; one that exists (only
    with ``overwrite``) is replaced in one transaction, so that processes that have it open
    reload it rather than keep writing to a file that was renamed away. A folder holding
    another store is refused unless ``overwrite``, one of the user's files always."""

    root = Path(directory).expanduser().resolve()
    _may_save(root, overwrite)
    view = store.pin()
    if holds_database(root):
        try:
            con = sqlite3.connect(db_path(root), timeout=30.0, isolation_level=None)
            try:
                con.execute("BEGIN IMMEDIATE")
                for table in (
                    "documents",
                    "chunks",
                    "nodes",
                    "edges",
                    "memory",
                    "successors",
                    "traces",
                    "changes",
                    "meta",
                ):
                    con.execute(f"DELETE FROM {table}")
                _fill(con, view, settings)
                # "*": every row changed; a reader's next catch-up reloads
                con.execute(
                    "INSERT INTO changes (at, pid, keys) VALUES (?, ?, '{\"*\": []}')",
                    (time.time(), os.getpid()),
                )
                con.execute("COMMIT")
            finally:
                con.close()
        except sqlite3.Error as exc:
            raise _sqlite_error(exc, root, "save the store") from exc
        return root

    def build(tmp: Path) -> None:
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.executescript(f"BEGIN; {SCHEMA} COMMIT;")
            con.execute("BEGIN")
            _fill(con, view, settings)
            con.execute("COMMIT")
            con.execute("PRAGMA journal_mode=WAL")
        finally:
            con.close()

    _new_database(root, build, overwrite)
    return root


def _clear_temps(root: Path) -> None:
    """Remove the temporary databases of saves and conversions that did not finish (killed,
    a full disk): the caller holds the folder's lock, so no live writer owns one."""
    for junk in root.glob(f".{DB_FILE}.*.tmp*"):
        junk.unlink(missing_ok=True)


def _new_database(root: Path, build: Any, overwrite: bool) -> None:
    """Make ``root``'s database with ``build(path)`` under a temporary name, synced, then
    renamed into place, holding the folder's lock (a kill leaves no half database, only a
    temporary file the next save or open removes)."""
    make_folder(root)
    with generations.dir_lock(root, 30.0):
        _clear_temps(root)
        if holds_database(root) and not overwrite:  # another process made one meanwhile
            raise _another_store(root)
        tmp = root / f".{DB_FILE}.{os.getpid()}.{threading.get_ident()}.tmp"
        try:
            build(tmp)
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            for suffix in ("-wal", "-shm"):
                (root / f"{DB_FILE}{suffix}").unlink(missing_ok=True)
            os.replace(tmp, db_path(root))
        except BaseException as exc:
            _clear_temps(root)
            if isinstance(exc, (sqlite3.Error, OSError)):
                raise StoreError(
                    f"could not save the store to {root}: {exc}; free space or give a "
                    "writable folder, then save again"
                ) from exc
            raise
    _move_backup(root)


def _fill(con: sqlite3.Connection, store: InMemoryGraphStore, settings: Mapping[str, Any]) -> None:
    con.execute("INSERT INTO meta VALUES ('namespace', ?)", (store.namespace,))
    con.execute("INSERT INTO meta VALUES ('format', ?)", (str(FORMAT),))
    _write_all(con, store)
    con.executemany(
        "INSERT OR REPLACE INTO settings VALUES (?, ?)",
        [(k, json.dumps(v)) for k, v in settings.items()],
    )


def change_seq(directory: str | os.PathLike[str]) -> int:
    """The last write's number in the store database of ``directory`` (0: none, or no
    database): a saver tells from it whether another writer wrote there since."""
    root = Path(directory).expanduser().resolve()
    if not holds_database(root):
        return 0
    try:
        con = sqlite3.connect(f"{db_path(root).as_uri()}?mode=ro", uri=True)
        try:
            row = con.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise _sqlite_error(exc, root, "read the store") from exc
    return int(row[0]) if row else 0


def write_settings(directory: str | os.PathLike[str], values: Mapping[str, Any]) -> None:
    """Set settings in the store database of ``directory`` (one transaction)."""
    root = Path(directory).expanduser().resolve()
    if not holds_database(root):
        raise StoreError(f"no store database at {root} to keep settings in")
    try:
        con = sqlite3.connect(db_path(root), timeout=30.0, isolation_level=None)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.executemany(
                "INSERT OR REPLACE INTO settings VALUES (?, ?)",
                [(k, json.dumps(v, allow_nan=False)) for k, v in values.items()],
            )
            con.execute("COMMIT")
        finally:
            con.close()
    except sqlite3.Error as exc:
        raise _sqlite_error(exc, root, "write the settings") from exc
