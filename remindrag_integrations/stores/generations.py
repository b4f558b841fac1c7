"""A store directory on disk: checksummed generations, an atomic ``CURRENT`` switch and the
directory lock. Knows nothing about graphs: files go in and come out as bytes.

Layout: ``DIR/CURRENT`` holds the name of a generation folder ``DIR/gen-<id>/`` and the sha256
of its ``manifest.json``; the manifest holds the format, the caller's metadata (namespace,
dimension) and the sha256 of every data file. So every byte of a saved store is covered: a
damaged file, manifest or ``CURRENT`` is a :class:`StoreCorruptError`, never other data.

Writers take the OS lock on ``DIR/.lock`` (:func:`dir_lock`) and, holding it, write a new
generation under a unique temporary name, swap ``CURRENT`` with an atomic rename, write the
caller's files beside the store (``engine.json``), then delete what no reader needs: temporary
files of dead writers and generations older than the one ``CURRENT`` pointed to before (kept
for readers that are still reading it). Readers take no lock: they retry when a generation
vanishes under them.

A first save (no readable ``CURRENT`` before it) first makes ``DIR/.first-save``
(:data:`UNFINISHED`) and removes it as its last step, once ``CURRENT`` and the files beside it
are written. While it is there the folder holds no store: a save killed on the way (``kill
-9``, a power cut, a full disk) leaves a folder that loads as it was before it, nothing
(:class:`StoreNotFoundError`, saying so), and that the next save takes over without
``overwrite``. A folder whose ``CURRENT`` went missing without that mark is damage, never
taken for empty.

Loading reads only what the store names by plain file names inside its own generation folder
(:mod:`..core.files`): only regular files, never through a symbolic link, never a FIFO or a
device. A failed write (disk full, read-only folder) raises :class:`StoreError` and leaves the
previous generation current.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from ..core.errors import StoreCorruptError, StoreError, StoreLockedError, StoreNotFoundError
from ..core.files import is_real_dir, plain_name, read_regular

FORMAT_VERSION = 2
CURRENT = "CURRENT"
MANIFEST = "manifest.json"
LOCK_FILE = ".lock"
UNFINISHED = ".first-save"
"""Made before a first save writes anything a load could take for a store, removed as its last
step: while it is there the folder holds what a first save left that did not finish."""
_READ_ATTEMPTS = 8
_GEN = re.compile(r"gen-[A-Za-z0-9_-]{1,64}")


def holds_data(root: Path) -> bool:
    """True when ``root`` holds (or held) a saved store, readable or not; False for what a
    first save left that did not finish (:func:`unfinished`)."""
    if unfinished(root):
        return False
    return os.path.lexists(root / CURRENT) or any(root.glob("gen-*"))


def unfinished(root: Path) -> bool:
    """True when ``root`` holds only what a first save left that did not finish (killed,
    power cut, disk full): no store. It loads as none and the next save takes it over."""
    return os.path.lexists(root / UNFINISHED)


def not_finished(root: Path, what: str = "saved store") -> StoreNotFoundError:
    """The error a load of an :func:`unfinished` folder raises (``what``: what was loaded)."""
    return StoreNotFoundError(
        f"no {what} at {root}: the first save there did not finish (the process was killed "
        "or the disk was full), so nothing was saved there; save there again (it needs no "
        f"overwrite=True), or give the folder of a {what}"
    )


def own_name(name: str) -> bool:
    """True for the names this module writes in a store directory (``CURRENT``, the lock,
    the first-save mark, generations and their temporary files)."""
    return (
        name in (CURRENT, LOCK_FILE, UNFINISHED)
        or name.startswith("gen-")
        or (name.startswith((".gen-", ".CURRENT.")) and name.endswith(".tmp"))
    )


@contextmanager
def dir_lock(root: Path, wait: float | None) -> Iterator[None]:
    """Hold the exclusive OS lock of a store directory. ``wait``: seconds to wait for another
    writer (``None``: forever); then :class:`StoreLockedError`."""
    lock = acquire(root, wait)
    try:
        yield
    finally:
        lock.release()


def acquire(root: Path, wait: float | None) -> FileLock:
    """Take the lock of ``root`` (release it with ``.release()``); see :func:`dir_lock`."""
    if root.exists() and not root.is_dir():
        raise StoreError(f"{root} is a file, not a store directory: give a directory path")
    lock = FileLock(root / LOCK_FILE, thread_local=False)
    try:
        root.mkdir(parents=True, exist_ok=True)
        lock.acquire(timeout=-1 if wait is None else max(0.0, wait))
    except Timeout:
        raise StoreLockedError(
            f"the store at {root} is locked by another writer (waited {wait} s)"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreCorruptError(
                f"{root / LOCK_FILE} is a symbolic link: remove it (a store's lock file is a "
                "plain file) and try again"
            ) from None
        raise StoreError(
            f"cannot lock the store directory {root}: {exc.strerror or exc}; it must be a "
            "writable directory"
        ) from exc
    return lock


def current(root: Path) -> str | None:
    """The generation ``CURRENT`` names (None: nothing saved, or only a first save that did
    not finish). Damage raises."""
    if unfinished(root):
        return None
    pointer = _pointer(root)
    return pointer[0] if pointer else None


def _pointer(root: Path) -> tuple[str, str | None] | None:
    try:
        text = read_regular(root / CURRENT).decode("ascii")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreCorruptError(f"unreadable {root / CURRENT}: {exc}") from exc
    return _parse_current(root, text)


def _parse_current(root: Path, text: str) -> tuple[str, str | None]:
    parts = text.split("\n")
    if len(parts) == 1:  # format 1: the name alone
        return _gen_name(root, parts[0].strip()), None
    if len(parts) == 3 and len(parts[1]) == 64 and not parts[2]:
        return _gen_name(root, parts[0]), parts[1]
    raise StoreCorruptError(f"{root / CURRENT} is damaged")


def _gen_name(root: Path, name: str) -> str:
    """A generation folder's name as ``CURRENT`` holds it: ``gen-`` and a plain id."""
    if not _GEN.fullmatch(name):
        plain_name(name, root / CURRENT)  # raises with the reason for a path
        raise StoreCorruptError(f"{root / CURRENT} is damaged (names {name!r})")
    return name


def write(
    root: Path,
    files: Mapping[str, bytes],
    meta: Mapping[str, Any],
    beside: Mapping[str, bytes] | None = None,
) -> str:
    """Publish ``files`` as a new generation (the caller holds :func:`dir_lock`), then write
    ``beside`` (plain file names in ``root``: ``engine.json``), each atomically; returns the
    generation's name. A crash at any point leaves the previous generation current and
    loadable, or, in a first save, a folder that holds none (:data:`UNFINISHED`)."""
    before = current_or_none(root)
    first = before is None  # nothing loadable here: the save is not done until it all is
    for stale in root.glob(".gen-*.tmp"):  # only writers make them, under the lock: dead ones
        shutil.rmtree(stale, ignore_errors=True)
    gen = f"gen-{uuid.uuid4().hex[:16]}"
    tmp = root / f".{gen}.tmp"
    pointer = root / f".CURRENT.{uuid.uuid4().hex}.tmp"
    try:
        if first:
            _mark_unfinished(root)
        manifest = _write_generation(tmp, files, meta)
        os.replace(tmp, root / gen)
        _write_synced(pointer, f"{gen}\n{hashlib.sha256(manifest).hexdigest()}\n".encode())
        os.replace(pointer, root / CURRENT)
    except OSError as exc:  # disk full, read-only, quota: CURRENT still names ``before``
        for junk in (tmp, root / gen):
            shutil.rmtree(junk, ignore_errors=True)
        pointer.unlink(missing_ok=True)
        raise StoreError(
            f"could not save the store at {root}: {exc.strerror or exc}. The last saved "
            f"generation ({before or 'none'}) is intact; free space or make the directory "
            "writable, then save again"
        ) from exc
    try:
        _sync_dir(root)
        for name, data in (beside or {}).items():
            _replace(root, name, data)
        if first:  # the last step: from here on the folder holds this store
            (root / UNFINISHED).unlink()
            _sync_dir(root)
    except OSError as exc:
        done = "nothing is saved there yet" if first else "the store is saved"
        raise StoreError(
            f"could not finish the save at {root}: {exc.strerror or exc} ({done}); free "
            "space or make the directory writable, then save again"
        ) from exc
    for old in root.glob("gen-*"):
        if old.name not in (gen, before):
            shutil.rmtree(old, ignore_errors=True)
    for junk in root.glob(".CURRENT.*.tmp"):
        junk.unlink(missing_ok=True)
    return gen


def _mark_unfinished(root: Path) -> None:
    """Make :data:`UNFINISHED` (a new empty file, never through a link put there) for good."""
    mark = root / UNFINISHED
    if os.path.lexists(mark):  # a dead first save's
        mark.unlink()
    os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    _sync_dir(root)


def _replace(root: Path, name: str, data: bytes) -> None:
    """Write ``root / name`` atomically (a temporary file, synced, then a rename), deleting
    the temporary files of writers killed while writing it (the caller holds the lock)."""
    for stale in root.glob(f".{name}.*.tmp"):
        stale.unlink(missing_ok=True)
    tmp = root / f".{name}.{uuid.uuid4().hex}.tmp"
    try:
        _write_synced(tmp, data)
        os.replace(tmp, root / name)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise


def _write_generation(tmp: Path, files: Mapping[str, bytes], meta: Mapping[str, Any]) -> bytes:
    """The files and their manifest in the folder ``tmp``; returns the manifest's bytes."""
    tmp.mkdir()
    sums = {}
    for name, data in files.items():
        _write_synced(tmp / name, data)
        sums[name] = hashlib.sha256(data).hexdigest()
    manifest = json.dumps({"format": FORMAT_VERSION, **meta, "sha256": sums}).encode()
    _write_synced(tmp / MANIFEST, manifest)
    return manifest


def current_or_none(root: Path) -> str | None:
    """Like :func:`current`, but a damaged ``CURRENT`` counts as none (a writer replaces it)."""
    try:
        return current(root)
    except StoreCorruptError:
        return None


def read(root: Path) -> tuple[str, dict[str, Any], dict[str, bytes]]:
    """The current generation: ``(name, manifest, files)``, every checksum verified. Raises
    :class:`StoreCorruptError` on any damage, :class:`StoreNotFoundError` where a first save
    did not finish; retries when a writer replaced it meanwhile."""
    for _ in range(_READ_ATTEMPTS):
        if unfinished(root):
            raise not_finished(root)
        pointer = _pointer(root)
        if pointer is None:
            if not holds_data(root):  # nothing saved here: missing, not damaged
                raise StoreNotFoundError(
                    f"no saved store at {root}: "
                    + ("the folder holds none" if root.is_dir() else "no such directory")
                    + "; give the folder of a saved store, or save one there first"
                )
            raise StoreCorruptError(f"no saved store at {root} (no {CURRENT} file)")
        try:
            found = (pointer[0], *_read_generation(root, *pointer))
        except (OSError, StoreCorruptError) as exc:
            if _pointer(root) != pointer:
                continue  # a writer switched generations meanwhile: read the new one
            if isinstance(exc, StoreCorruptError):
                raise
            raise StoreCorruptError(f"store at {root} is incomplete: {exc}") from exc
        if unfinished(root):  # a first save began meanwhile: what was read is not saved yet
            raise not_finished(root)
        return found
    raise StoreCorruptError(f"the store at {root} kept changing while it was read")


def _read_generation(
    root: Path, gen: str, digest: str | None
) -> tuple[dict[str, Any], dict[str, bytes]]:
    base = root / gen
    if not is_real_dir(base):
        if os.path.lexists(base):  # a link (or file) in place of the folder: elsewhere
            raise StoreCorruptError(f"{base} is not a folder of the store: refused")
        raise FileNotFoundError(errno.ENOENT, "no such generation", str(base))
    raw = read_regular(base / MANIFEST)
    if digest is not None and hashlib.sha256(raw).hexdigest() != digest:
        raise StoreCorruptError(f"{base / MANIFEST} is damaged (checksum)")
    try:
        manifest = json.loads(raw)
        sums = manifest["sha256"]
        fmt = manifest["format"]
    except (ValueError, KeyError, TypeError) as exc:
        raise StoreCorruptError(f"{base / MANIFEST} is malformed: {exc}") from exc
    if fmt not in (1, FORMAT_VERSION) or (fmt == FORMAT_VERSION) != (digest is not None):
        raise StoreCorruptError(f"unsupported store format {fmt!r} at {base}")
    if not isinstance(sums, dict):
        raise StoreCorruptError(f"{base / MANIFEST} is malformed")
    files = {}
    for name, want in sums.items():
        data = read_regular(base / plain_name(name, base / MANIFEST))
        if hashlib.sha256(data).hexdigest() != want:
            raise StoreCorruptError(f"store file {base / name} is damaged (checksum)")
        files[str(name)] = data
    return manifest, files


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _sync_dir(root: Path) -> None:
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
