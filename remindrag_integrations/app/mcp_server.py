"""``remindrag mcp``: a store served to agents over the Model Context Protocol, built on the
official ``mcp`` SDK (extra ``mcp``): its ``MCPServer`` (mcp 2), or ``FastMCP`` (mcp 1, which
``langchain-mcp-adapters`` still requires).

Tools: ``search``, ``remember``, ``feedback``, ``teach``, ``add_documents``,
``delete_documents``, ``list_documents``, ``stats`` (``--read-only``: ``search``,
``list_documents`` and ``stats`` only). Resources:
``trace://{trace_id}`` (a retrieval as text) and ``memory://view`` (the memory view page).
What each tool does is :mod:`.mcp_service`; this module is the protocol's side: names,
descriptions and argument schemas written for a model, typed errors turned into tool errors,
and the transports (stdio; streamable HTTP, with a bearer token off the local machine), both
answering a request nested too deep for the SDK to read (:mod:`.mcp_depth`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hmac
import importlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import Field

from ..core.config import RECOMMENDED_MIN_SCORE
from ..core.errors import ReMindError
from .mcp_depth import guarded_stdio, refuse_deep_bodies
from .mcp_service import MAX_LISTED, StoreService, check_store
from .specs import CLIError

TOKEN_ENV = "REMINDRAG_MCP_TOKEN"
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")

INSTRUCTIONS = """\
A knowledge-graph retriever whose edges remember past retrievals. Use it like this:
1. search(query): numbered passages, each with its chunk_id, plus the trace_id of the search.
2. Answer from the passages, citing the chunk ids you used as [chunk_id].
3. remember(trace_id, answer, cited): once per search, after answering. The paths that led
   to the cited passages are remembered, so the next similar question (in any session) is
   answered from memory: found_by 'replay', fewer steps.
feedback(trace_id, helpful) corrects a retrieval; teach(pairs) writes known question/passage
pairs; add_documents / delete_documents change the corpus, list_documents lists its document
ids; stats() tells the store's size."""


def sdk() -> tuple[Any, Any, Any, int]:
    """The SDK's server class, its tool and resource errors, and its major version."""
    for major, module in ((2, "mcp.server.mcpserver"), (1, "mcp.server.fastmcp")):
        try:
            server = importlib.import_module(module)
            errors = importlib.import_module(f"{module}.exceptions")
        except ImportError:
            continue
        cls = server.MCPServer if major == 2 else server.FastMCP
        return cls, errors.ToolError, errors.ResourceError, major
    raise CLIError("remindrag mcp needs the 'mcp' extra: pip install 'remindrag-integrations[mcp]'")


def build_server(service: StoreService, *, stdio: bool = True, **settings: Any) -> Any:
    """An SDK server with the tools and resources of ``service`` (``settings`` go to the
    server's constructor: mcp 1 takes its HTTP host there). ``stdio``: stdout is the
    transport's, so each call runs with stray prints sent to stderr, one call at a time (the
    redirect is the whole process's); over HTTP, calls run side by side."""
    cls, tool_error, resource_error, _ = sdk()
    server = cls("remindrag", instructions=INSTRUCTIONS, log_level="WARNING", **settings)

    def guarded(fn: Callable[..., Any], error: Any) -> Callable[..., Any]:
        """``fn`` in a worker thread; a typed error becomes the SDK's error with its message."""
        from anyio import to_thread

        async def call(*args: Any, **kwargs: Any) -> Any:
            run = functools.partial(_quiet, fn) if stdio else fn
            try:
                return await to_thread.run_sync(functools.partial(run, *args, **kwargs))
            except ReMindError as exc:
                raise error(str(exc)) from None

        return call

    tool = functools.partial(_tool, server, lambda fn: guarded(fn, tool_error))
    tool(_search(service), "search", SEARCH)
    tool(
        _stats(service),
        "stats",
        "Size of the store: documents, chunks, entities, edges, "
        "and how many edges hold memory of past retrievals.",
    )
    tool(_list_documents(service), "list_documents", LIST_DOCUMENTS)
    if not service.read_only:
        tool(_remember(service), "remember", REMEMBER)
        tool(_feedback(service), "feedback", FEEDBACK)
        tool(_teach(service), "teach", TEACH)
        tool(_add_documents(service), "add_documents", ADD_DOCUMENTS)
        tool(
            _delete_documents(service),
            "delete_documents",
            "Remove documents (by document id) with their passages and their memory.",
        )

    trace_text = guarded(service.trace_text, resource_error)
    view = guarded(service.memory_view, resource_error)

    @server.resource(
        "trace://{trace_id}",
        name="trace",
        description="One search as text: seeds, replayed edges, the walk's moves, the "
        "passages and what memory did with it.",
        mime_type="text/plain",
    )
    async def trace_resource(trace_id: str) -> str:
        return str(await trace_text(trace_id))

    @server.resource(
        "memory://view",
        name="memory-view",
        description="An HTML page of where memory lives in the graph and which past queries "
        "shaped it.",
        mime_type="text/html",
    )
    async def memory_resource() -> str:
        return str(await view())

    return server


_STDOUT = threading.Lock()  # one redirect at a time (the service runs one call at a time)


def _quiet(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn`` with stray prints sent to stderr: stdout is the stdio transport's."""
    with _STDOUT, contextlib.redirect_stdout(sys.stderr):
        return fn(*args, **kwargs)


def _tool(
    server: Any, wrap: Callable[..., Any], fn: Callable[..., Any], name: str, description: str
) -> None:
    call = wrap(fn)
    functools.update_wrapper(call, fn)  # the SDK reads the signature for the JSON schema
    server.add_tool(call, name=name, description=description)


# --- the tools: what a model reads ----------------------------------------------------------

SEARCH = """\
Search the knowledge graph for passages that answer a question. Returns numbered passages
(chunk_id, doc_id, the document's metadata, score, found_by: 'seed' (closest to the question),
'replay' (reached through memory of past similar questions), 'traversal' (the guided walk) or
'dense_fill'), the walk's stop_reason ('replay' when memory answered; 'below_min_score' when no passage was
relevant enough) and the trace_id to pass to remember after you answer."""

REMEMBER = """\
After answering from a search: remember what helped, so that similar questions later (in
this or any other session) are answered from memory. Pass the search's trace_id, your answer
(cite passages as [chunk_id]) and the chunk ids you cited. The answer decides: the passages it
cites or whose words it uses are remembered; an answer saying it does not know writes nothing.
Once per search: a second call for the same trace_id changes nothing."""

FEEDBACK = """\
A verdict on a search: helpful=true strengthens the paths to the given chunk_ids (default:
every passage it returned); helpful=false weakens them, so memory stops leading there."""

TEACH = """\
Teach memory known answers, with no search needed: each pair is a question plus the passages
that answer it, named by chunk_ids, doc_ids and/or texts (a piece of text found in the corpus)."""

ADD_DOCUMENTS = """\
Index documents into the store: texts (with optional ids and metadata, one per text or one for
all), or paths of .txt / .md / .jsonl files or folders on the server's machine (stdio only).
A document whose id is already stored with the same text is skipped; changed text replaces it."""

LIST_DOCUMENTS = """\
The ids of the stored documents, sorted, a page at a time (limit, from offset): what
delete_documents takes, and how to check what the store holds. Returns doc_ids, total and
next_offset (pass it as offset for the next page; null when there is no more)."""

Query = Annotated[str, Field(description="The question, in natural language.")]
TraceId = Annotated[str, Field(description="The trace_id a search returned.")]
ChunkIds = Annotated[list[str] | None, Field(description="Chunk ids from the search's passages.")]


def _search(s: StoreService) -> Callable[..., Any]:
    def search(
        query: Query,
        k: Annotated[
            int | None, Field(ge=1, le=100, description="Passages to return (default 5).")
        ] = None,
        filter: Annotated[
            dict[str, Any] | None,
            Field(
                description='Document metadata filter, e.g. {"year": {"$gte": 2020}}; '
                "operators $eq $ne $gt $gte $lt $lte $in $nin $contains $all $and $or."
            ),
        ] = None,
        min_score: Annotated[
            float | None,
            Field(
                ge=0.0,
                le=1.0,
                description=f"Return nothing unless the best passage's score (a relevance in "
                f"0-1) reaches this: an off-topic question then gets no passage and "
                f"remember writes nothing for it ({RECOMMENDED_MIN_SCORE} recommended; default: "
                "the store's setting, off unless set).",
            ),
        ] = None,
    ) -> dict[str, Any]:
        return s.search(query, k, filter, min_score)

    return search


def _remember(s: StoreService) -> Callable[..., Any]:
    def remember(
        trace_id: TraceId,
        answer: Annotated[str | None, Field(description="Your answer, citing [chunk_id].")] = None,
        cited: ChunkIds = None,
    ) -> dict[str, Any]:
        return s.remember(trace_id, answer, cited)

    return remember


def _feedback(s: StoreService) -> Callable[..., Any]:
    def feedback(
        trace_id: TraceId,
        helpful: Annotated[bool, Field(description="Did the search help?")],
        chunk_ids: ChunkIds = None,
    ) -> dict[str, Any]:
        return s.feedback(trace_id, helpful, chunk_ids)

    return feedback


def _teach(s: StoreService) -> Callable[..., Any]:
    def teach(
        pairs: Annotated[
            list[dict[str, Any]],
            Field(
                description='[{"question": "...", "chunk_ids": [...], "doc_ids": [...], '
                '"texts": [...]}]; each pair needs a question and at least one passage.',
                min_length=1,
            ),
        ],
    ) -> dict[str, Any]:
        return s.teach(pairs)

    return teach


def _add_documents(s: StoreService) -> Callable[..., Any]:
    def add_documents(
        texts: Annotated[list[str] | None, Field(description="Document texts.")] = None,
        paths: Annotated[list[str] | None, Field(description="Files or folders (stdio).")] = None,
        ids: Annotated[list[str] | None, Field(description="One id per text.")] = None,
        metadata: Annotated[
            list[dict[str, Any]] | dict[str, Any] | None,
            Field(description="One metadata object per text, or one for all."),
        ] = None,
    ) -> dict[str, Any]:
        return s.add_documents(texts, paths, ids, metadata)

    return add_documents


def _delete_documents(s: StoreService) -> Callable[..., Any]:
    def delete_documents(
        ids: Annotated[list[str], Field(description="Document ids.", min_length=1)],
    ) -> dict[str, Any]:
        return s.delete_documents(ids)

    return delete_documents


def _list_documents(s: StoreService) -> Callable[..., Any]:
    def list_documents(
        offset: Annotated[int, Field(description="Ids to skip.", ge=0)] = 0,
        limit: Annotated[
            int, Field(description="Ids to return (at most 1000).", ge=1, le=MAX_LISTED)
        ] = MAX_LISTED,
    ) -> dict[str, Any]:
        return s.list_documents(offset, limit)

    return list_documents


def _stats(s: StoreService) -> Callable[..., Any]:
    def stats() -> dict[str, Any]:
        return s.stats()

    return stats


# --- transports -----------------------------------------------------------------------------


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``PORT`` (on 127.0.0.1)."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise CLIError(f"--http {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host, int(port)


def require_token(app: Any, token: str) -> Any:
    """An ASGI app that answers 401 to an HTTP request without ``Authorization: Bearer
    <token>`` (the scheme in any case, as RFC 7235 has it), and passes everything else to
    ``app``."""
    expected = token.encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            scheme, _, credentials = given.strip().partition(b" ")
            ok = scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), expected)
            if not ok:
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer realm="remindrag"'),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error": "unauthorized"}'})
                return
        await app(scope, receive, send)

    return guarded


# the loggers that report a client hanging up (the SDK's streams closing under it, the ASGI
# server's connection lost) with a full traceback
DISCONNECT_LOGGERS = (
    "mcp.server.streamable_http",
    "mcp.server.streamable_http_manager",
    "uvicorn.error",
)


def _hang_up(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or every exception of a group) is a client going away: a stream
    closed or broken under the server, the connection reset."""
    import anyio

    if isinstance(exc, BaseExceptionGroup):
        return all(_hang_up(e) for e in exc.exceptions)
    ordinary = (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
    return isinstance(exc, (*ordinary, ConnectionError))


class QuietHangUps(logging.Filter):
    """Drops the SDK's and uvicorn's error records whose exception is a client hanging up
    (each ordinary disconnect printed a full traceback); real errors pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and _hang_up(record.exc_info[1]))


def quiet_hang_ups() -> None:
    for name in DISCONNECT_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QuietHangUps) for f in logger.filters):
            logger.addFilter(QuietHangUps())


def serve(args: argparse.Namespace) -> int:
    """``remindrag mcp``: check the options, open the store, serve until the client leaves."""
    sdk()  # the extra is installed: say so before loading anything
    token = args.token or os.environ.get(TOKEN_ENV) or None
    bind = parse_bind(args.http) if args.http else None
    if args.token and bind is None:
        raise CLIError(
            "--token guards the HTTP transport only: a stdio server answers just the client "
            "that started it, so there is nothing to check the token against. Drop --token, "
            "or serve over HTTP with --http HOST:PORT --token ..."
        )
    if bind and bind[0] not in LOCAL_HOSTS and not token:
        raise CLIError(
            f"--http {args.http}: a non-local bind needs a bearer token "
            f"(--token or the {TOKEN_ENV} environment variable)"
        )
    check_store(args)
    # the SDK logs to stderr from the root logger; bm25s (the lexical index, imported by the
    # first search anyway) sets its own logger to DEBUG when imported
    importlib.import_module("bm25s")
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    with contextlib.redirect_stdout(sys.stderr):  # stdout is the stdio transport's
        service = StoreService(args, read_only=args.read_only, local_files=bind is None)
    try:
        if bind is None:
            with guarded_stdio():  # a request nested too deep is answered, not dropped
                build_server(service).run("stdio")
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the transport closed the real one
        else:
            _serve_http(service, *bind, token)
    finally:
        service.close()  # the traces it still holds (another writer held the store) written
    return 0


def _serve_http(service: StoreService, host: str, port: int, token: str | None) -> None:
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    # off the local machine the token is the guard (a browser cannot send it); locally the
    # SDK's DNS-rebinding protection stays on
    security = (
        None
        if host in LOCAL_HOSTS
        else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )
    *_, major = sdk()
    if major == 2:
        app = build_server(service, stdio=False).streamable_http_app(
            host=host, transport_security=security
        )
    else:
        app = build_server(
            service, stdio=False, host=host, transport_security=security
        ).streamable_http_app()
    app = refuse_deep_bodies(app)  # a body nested too deep: a 400 that says so, not a 500
    quiet_hang_ups()
    where = f"http://{host if ':' not in host else f'[{host}]'}:{port}/mcp"
    print(f"remindrag mcp: serving {service.args.store} at {where}", file=sys.stderr, flush=True)
    uvicorn.run(
        require_token(app, token) if token else app, host=host, port=port, log_level="warning"
    )
