"""How deep a request to ``remindrag mcp`` may nest, checked before the SDK reads it.

The SDK parses a message recursively, and a deep one fails there, before any tool runs: over
stdio (pydantic-core) a message nested deeper than about 200 levels is dropped with no reply,
so the client waits for ever; over HTTP (``json.loads``) a body nested deeper than Python's
recursion limit is answered with an HTTP 500. No tool takes anything nested that deep (a
filter's ``$and`` / ``$or`` nest at most 32 levels, metadata at most 50), so a request nested
deeper than :data:`MAX_REQUEST_DEPTH` is answered here, with a message that says so: over
stdio a ``tools/call`` gets a tool error (as a bad filter does) and another request a
JSON-RPC error; over HTTP the answer is a 400 with a JSON-RPC error. The SDK never sees it.

The check is iterative (a scan of the JSON's tokens), and cheap for every other message: one
that holds fewer brackets than the limit is not scanned at all.

The same door refuses a number that is not finite (:func:`non_finite`): the SDK reads
``NaN``, ``Infinity`` and ``1e400`` and hands the tool ``null``, so ``k: NaN`` ran with the
default k and ``min_score: NaN`` was ignored. Such a request is answered here like one
nested too deep, with a message naming where the number stands (``arguments.k is NaN``). A
message is scanned only when a regex finds ``NaN``, ``Infinity`` or a three-digit exponent
in it.
"""

from __future__ import annotations

import io
import json
import math
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, BinaryIO

MAX_REQUEST_DEPTH = 128
"""The deepest a request's JSON may nest (objects and arrays, the message itself included)."""

INVALID_REQUEST = -32600  # JSON-RPC's code for a message that is not a valid request

# a JSON string, a bracket or separator, or a bare scalar (number, true, false, null)
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}:,]|[^\s\[\]{}:,"]+')
_OPEN, _CLOSE = (b"[", b"{"), (b"]", b"}")


@dataclass(frozen=True)
class Deep:
    """A request nested too deep: how deep, and what its top level says of it."""

    depth: int
    id: Any = None  # the request's id (None: none found, or a notification)
    method: str | None = None

    @property
    def message(self) -> str:
        return (
            f"this request nests {self.depth} levels deep, and remindrag mcp reads at most "
            f"{MAX_REQUEST_DEPTH}: write it flatter (a search filter nests $and / $or at most "
            "32 levels, and $and / $or take any number of filters; metadata nests at most 50)"
        )

    def reply(self, *, tool_error: bool) -> dict[str, Any] | None:
        """The JSON-RPC message answering it (``None`` for a notification: no reply). With
        ``tool_error``, a ``tools/call`` is answered as a tool that failed."""
        if self.id is None:
            return None
        if tool_error and self.method == "tools/call":
            result = {"content": [{"type": "text", "text": self.message}], "isError": True}
            return {"jsonrpc": "2.0", "id": self.id, "result": result}
        return error_reply(self.id, self.message)


def error_reply(request_id: Any, message: str) -> dict[str, Any]:
    error = {"code": INVALID_REQUEST, "message": message}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def too_deep(data: bytes) -> Deep | None:
    """The request in ``data`` (one JSON text) when it nests deeper than
    :data:`MAX_REQUEST_DEPTH`, else ``None``. Malformed JSON is left to the SDK to report."""
    if data.count(b"[") + data.count(b"{") <= MAX_REQUEST_DEPTH:
        return None  # cannot nest deeper than it has brackets
    depth = deepest = 0
    top: dict[str, Any] = {}  # the top-level object's scalar members
    key: Any = None
    want_value = False
    for match in _TOKEN.finditer(data):
        token = match.group()
        if token in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
            want_value = False
        elif token in _CLOSE:
            depth -= 1
        elif depth == 1:
            if token == b":":
                want_value = True
            elif token == b",":
                key, want_value = None, False
            elif want_value:
                top[key] = _scalar(token)
                want_value = False
            else:
                key = _scalar(token)
    if deepest <= MAX_REQUEST_DEPTH:
        return None
    request_id, method = top.get("id"), top.get("method")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None  # JSON-RPC ids are strings or numbers
    return Deep(deepest, request_id, method if isinstance(method, str) else None)


@dataclass(frozen=True)
class NonFinite:
    """A request holding a number JSON-RPC's readers would turn into ``null`` (the SDK reads
    ``NaN``, ``Infinity`` and a number past a float's range, then writes them as ``null``, so
    a tool would see its argument left out and run with the default)."""

    where: str  # the value's place: "arguments.k", "arguments.filter.title"
    token: str  # as written: NaN, -Infinity, 1e400
    id: Any = None
    method: str | None = None

    @property
    def message(self) -> str:
        return (
            f"{self.where} is {self.token}, which is no finite number: remindrag mcp takes "
            "finite numbers only (NaN and infinity compare with nothing, and would otherwise "
            "reach the tool as null, its default); give a finite number, or leave the "
            "argument out for its default"
        )

    def reply(self, *, tool_error: bool) -> dict[str, Any] | None:
        return Deep.reply(self, tool_error=tool_error)  # type: ignore[arg-type]


# a number that may not be finite as a float: NaN, Infinity, or an exponent of 3+ digits
_MAYBE_NON_FINITE = re.compile(rb"NaN|Infinity|[eE][+-]?\d{3}")


def refused(data: bytes) -> Deep | NonFinite | None:
    """Why the request in ``data`` is answered here, not passed to the SDK: nested too deep
    (:func:`too_deep`) or holding a number that is not finite (:func:`non_finite`)."""
    return too_deep(data) or non_finite(data)


def may_refuse(data: bytes) -> bool:
    """False when :func:`refused` is sure to pass ``data`` (most messages: no scan)."""
    deep = data.count(b"[") + data.count(b"{") > MAX_REQUEST_DEPTH
    return deep or _MAYBE_NON_FINITE.search(data) is not None


def non_finite(data: bytes) -> NonFinite | None:
    """The first number in ``data`` that is not finite (``NaN``, ``Infinity``, ``1e400``)
    with its place in the request, else ``None``. Malformed JSON is left to the SDK."""
    if _MAYBE_NON_FINITE.search(data) is None:
        return None
    path: list[Any] = []  # per open object its member's key, per open array the item's index
    arrays: list[bool] = []
    top: dict[str, Any] = {}  # the top-level object's scalar members
    want_value = False
    found: tuple[str, str] | None = None
    for match in _TOKEN.finditer(data):
        token = match.group()
        if token in _OPEN:
            path.append(0 if token == b"[" else None)
            arrays.append(token == b"[")
            want_value = False
        elif token in _CLOSE:
            if path:
                path.pop(), arrays.pop()
            want_value = False
        elif token == b":":
            want_value = True
        elif token == b",":
            if arrays and arrays[-1]:
                path[-1] += 1
            want_value = False
        elif arrays and not arrays[-1] and not want_value:
            path[-1] = _scalar(token)  # an object's key
        else:
            value = _scalar(token)
            bad = token in (b"NaN", b"Infinity", b"-Infinity") or (
                isinstance(value, float) and not math.isfinite(value)
            )
            if bad and found is None:
                where = ".".join(str(p) for p in path if p is not None)
                found = (where.removeprefix("params.") or "a value", token.decode())
            if len(path) == 1:
                top[path[0]] = value
            want_value = False
    if found is None:
        return None
    request_id, method = top.get("id"), top.get("method")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    return NonFinite(*found, request_id, method if isinstance(method, str) else None)


def _scalar(token: bytes) -> Any:
    try:
        return json.loads(token)
    except ValueError:
        return None


# --- HTTP -----------------------------------------------------------------------------------


def refuse_deep_bodies(app: Any) -> Any:
    """An ASGI app that answers a POST whose body nests too deep with a 400 and a JSON-RPC
    error, and passes every other request (its body replayed) to ``app``."""
    import anyio

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await app(scope, receive, send)
            return
        chunks: list[bytes] = []
        replay: list[dict[str, Any]] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: the app hears it too
                replay = [{"type": "http.request", "body": b"".join(chunks), "more_body": True}]
                replay.append(message)
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if not replay:
            deep = None
            if may_refuse(body):  # scan off the loop
                deep = await anyio.to_thread.run_sync(refused, body)
            if deep is not None:
                payload = json.dumps(error_reply(deep.id, deep.message)).encode()
                headers = [(b"content-type", b"application/json")]
                await send({"type": "http.response.start", "status": 400, "headers": headers})
                await send({"type": "http.response.body", "body": payload})
                return
            replay = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> dict[str, Any]:
            return replay.pop(0) if replay else await receive()

        await app(scope, replayed, send)

    return guarded


# --- stdio ----------------------------------------------------------------------------------


class _Lines(io.RawIOBase):
    """Writes to ``sink`` in whole lines, under a lock shared with :meth:`line`: a reply
    written here never lands inside a message the SDK is writing."""

    def __init__(self, sink: BinaryIO) -> None:
        self._sink, self._partial, self._lock = sink, bytearray(), threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        with self._lock:
            self._partial += data
            cut = self._partial.rfind(b"\n") + 1
            if cut:
                self._sink.write(bytes(self._partial[:cut]))
                self._sink.flush()
                del self._partial[:cut]
        return len(data)

    def line(self, data: bytes) -> None:
        with self._lock:
            self._sink.write(data + b"\n")
            self._sink.flush()


class _Requests(io.RawIOBase):
    """The client's lines from ``source``, less those nested too deep: each is answered
    through ``out`` and not passed on."""

    def __init__(self, source: BinaryIO, out: _Lines) -> None:
        self._source, self._out = source, out
        self._line, self._at = memoryview(b""), 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while self._at >= len(self._line):
            line = self._source.readline()
            if not line:
                return 0
            deep = refused(line)
            if deep is None:
                self._line, self._at = memoryview(line), 0
                continue
            reply = deep.reply(tool_error=True)
            if reply is not None:
                self._out.line(json.dumps(reply).encode())
            print(f"remindrag mcp: {deep.message}", file=sys.stderr, flush=True)
        n = min(len(buffer), len(self._line) - self._at)
        buffer[:n] = self._line[self._at : self._at + n]
        self._at += n
        return n


@contextmanager
def guarded_stdio() -> Iterator[None]:
    """``sys.stdin`` / ``sys.stdout`` replaced, while the SDK serves stdio, by streams that
    answer a request nested too deep (the SDK's stdio transport reads and writes them)."""
    stdin, stdout = sys.stdin, sys.stdout
    out = _Lines(stdout.buffer)
    sys.stdout = io.TextIOWrapper(out, encoding="utf-8", line_buffering=True)  # type: ignore[arg-type]
    requests = io.BufferedReader(_Requests(stdin.buffer, out))
    sys.stdin = io.TextIOWrapper(requests, encoding="utf-8", errors="replace")
    try:
        yield
    finally:
        sys.stdin, sys.stdout = stdin, stdout


__all__ = ["MAX_REQUEST_DEPTH", "Deep", "guarded_stdio", "refuse_deep_bodies", "too_deep"]
