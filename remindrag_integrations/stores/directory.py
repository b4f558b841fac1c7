"""Saving and loading the embedded store in a directory, with its writer lock: the part of
:class:`~.memory_store.InMemoryGraphStore` that touches disk (files: :mod:`.generations`,
their content: :mod:`.snapshot`)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from filelock import FileLock

from ..core import progress as progress_arg
from ..core.errors import StoreConflictError, StoreExistsError
from ..core.persist import check_folder
from . import generations, snapshot

_UNSEEN = "unseen"  # a directory this store never loaded from nor saved to


class Persisted:
    """Directory persistence for the embedded store. ``_bases`` maps each directory to the
    generation this store loaded or saved there last (None: it held nothing), so a save can
    tell when another writer saved meanwhile; ``_held`` holds the locks of :meth:`open`."""

    namespace: str
    lock_wait: float
    _save_lock: threading.Lock
    _bases: dict[Path, str | None]
    _held: dict[Path, FileLock]

    def __init__(self, namespace: str = "default", **options: Any) -> None:  # the store sets it
        self.namespace = namespace

    @staticmethod
    def exists(directory: str | os.PathLike[str]) -> bool:
        """True when ``directory`` holds a saved store (readable or damaged); False where
        only a first save that did not finish left files."""
        return generations.holds_data(Path(directory))

    def save(
        self,
        directory: str | os.PathLike[str],
        *,
        wait: float | None = None,
        overwrite: bool = False,
        beside: Mapping[str, bytes] | None = None,
    ) -> Path:
        """Write a new generation under ``directory`` and switch to it atomically, holding
        the directory's lock (waiting up to ``wait`` s, default :attr:`lock_wait`, then
        :class:`StoreLockedError`); then, still holding it, write ``beside`` (file name:
        bytes, e.g. the engine's ``engine.json``), each atomically. Saving where this store
        was loaded from or last saved to is an update; anything else must not lose data
        silently, so unless ``overwrite``: :class:`StoreExistsError` when the folder holds a
        store this one never loaded nor saved (another store, with its learned memory),
        :class:`StoreConflictError` when another writer saved there since this store was
        loaded from (or last saved to) it. A folder that holds no store but other files is
        refused even with ``overwrite``. A first save killed on the way leaves a folder that
        holds no store (:func:`.generations.unfinished`): the next save takes it over."""
        root = Path(directory).resolve()
        if not generations.holds_data(root):  # before the lock file is made there
            check_folder(root, generations.own_name)
        files, meta = snapshot.dump(self)
        held = root in self._held
        with self._save_lock, self._dir_lock(root, held, wait):
            now = generations.current_or_none(root)
            base = self._bases.get(root, _UNSEEN)
            if not overwrite and base == _UNSEEN and generations.holds_data(root):
                raise StoreExistsError(
                    f"{root} holds another saved store: saving would replace it and its "
                    "learned memory. Load it to add to it, save elsewhere, or pass "
                    "overwrite=True to replace it"
                )
            if not overwrite and base != _UNSEEN and now != base:
                raise StoreConflictError(
                    f"the store at {root} was saved by another writer since this store was "
                    "loaded from it: load it again, re-apply the changes, then save "
                    "(or pass overwrite=True to replace that save)"
                )
            self._bases[root] = generations.write(root, files, meta, beside)
        return root

    def _dir_lock(self, root: Path, held: bool, wait: float | None) -> Any:
        if held:
            return contextlib.nullcontext()
        return generations.dir_lock(root, self.lock_wait if wait is None else wait)

    @classmethod
    def load(
        cls, directory: str | os.PathLike[str], *, progress: Any = None, **options: Any
    ) -> Self:
        """Load a saved store (no lock taken); raises :class:`StoreCorruptError` on any
        damage, :class:`StoreNotFoundError` where a first save did not finish. A later
        :meth:`save` there refuses to overwrite another writer's save. ``options`` go to the
        constructor (e.g. ``vectors=``, ``ann=``). ``progress``:
        ``True`` draws a bar of the load's steps (``snapshot.LOAD_STEPS``: reading the
        files, the graph, memory, the ANN indexes, and the BM25 index and graph matrix the
        first query needs), a function ``(done, total)`` is called as each ends."""
        progress_arg.check(progress)
        root = Path(directory).resolve()
        gen, manifest, files = generations.read(root)
        report = progress_arg.as_progress(progress, "loading the store", "step")
        store: Self = snapshot.load(cls, manifest, files, root, options, report)
        store._bases[root] = gen
        return store

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        namespace: str = "default",
        *,
        lock: bool = True,
        wait: float | None = 0.0,
        progress: Any = None,
        **options: Any,
    ) -> Self:
        """The store saved in ``directory``, or an empty one if nothing is saved there (or
        only a first save that did not finish: the next save takes its files over). With
        ``lock`` it is opened for writing: the directory's lock is held until :meth:`close`,
        so a second writer gets :class:`StoreLockedError` (or waits up to ``wait`` s,
        ``None``: forever), and a folder of files that are not a store is refused
        (:class:`StoreExistsError`) before the lock file is made; ``progress`` is
        :meth:`load`'s; ``options`` go to the constructor. A directory holding damaged
        data raises :class:`StoreCorruptError`; it is never taken for empty."""
        progress_arg.check(progress)
        root = Path(directory).resolve()
        if lock and not generations.holds_data(root):  # no lock file among the user's files
            check_folder(root, generations.own_name)
        held = generations.acquire(root, wait) if lock else None
        try:
            if generations.holds_data(root):
                store = cls.load(root, progress=progress, **options)
            else:
                store = cls(namespace=namespace, **options)
                store._bases[root] = None
        except BaseException:
            if held is not None:
                held.release()
            raise
        if held is not None:
            store._held[root] = held
        return store

    def close(self) -> None:
        """Release the directory locks taken by :meth:`open`."""
        held, self._held = self._held, {}
        for lock in held.values():
            lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
