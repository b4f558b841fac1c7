"""Reading the files of a saved store, which may come from anyone (shared, downloaded,
mounted): only plain names inside their folder, only regular files, never through a symbolic
link, never a FIFO or a device (opening one would block, or touch hardware)."""

from __future__ import annotations

import errno
import os
import re
import stat
from pathlib import Path

from .errors import StoreCorruptError

_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")
_NO_FOLLOW = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def plain_name(name: object, where: Path) -> str:
    """``name`` if it is a plain file name (letters, digits, ``_ . -``; no separator, no
    ``..``, not absolute), else :class:`StoreCorruptError`: a store never points outside."""
    if not isinstance(name, str) or not _PLAIN.fullmatch(name) or ".." in name:
        raise StoreCorruptError(
            f"{where} names {name!r}, which is not a plain file name inside the store: "
            "the store is damaged or was tampered with; do not load it"
        )
    return name


def read_regular(path: Path) -> bytes:
    """The bytes of ``path`` if it is a regular file (a symbolic link, FIFO, device or folder
    raises :class:`StoreCorruptError` without being followed or read). A missing file raises
    :class:`FileNotFoundError`, other I/O errors :class:`OSError`, as ``open`` does."""
    kind = stat.S_IFMT(os.lstat(path).st_mode)
    if kind != stat.S_IFREG:
        raise StoreCorruptError(f"{path} is {_what(kind)}, not a regular file: refused")
    try:
        fd = os.open(path, _NO_FOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link after the check
            raise StoreCorruptError(f"{path} is a symbolic link: refused") from None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped after the check
            raise StoreCorruptError(f"{path} is not a regular file: refused")
        return f.read()


def is_real_dir(path: Path) -> bool:
    """True when ``path`` is a folder itself (not a symbolic link to one)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _what(kind: int) -> str:
    names = {
        stat.S_IFLNK: "a symbolic link",
        stat.S_IFIFO: "a FIFO",
        stat.S_IFCHR: "a character device",
        stat.S_IFBLK: "a block device",
        stat.S_IFSOCK: "a socket",
        stat.S_IFDIR: "a folder",
    }
    return names.get(kind, "not a regular file")
