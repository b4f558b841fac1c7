"""The console's HTTP side: pages, a JSON API and the vendored static files (Starlette; run
by uvicorn). Bound to 127.0.0.1 by default; any other address needs a token, checked by the
MCP HTTP server's :func:`~..mcp_server.require_token` (a browser passes it once as
``?token=``, then carries it in a same-site cookie)."""

from __future__ import annotations

import argparse
import getpass
import html
import json
import os
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlencode

from ...core.errors import (
    ConfigError,
    EmbeddingError,
    InvalidArgumentError,
    InvalidDocumentError,
    InvalidQueryError,
    InvalidTeachPairError,
    ReMindError,
    SourceNotFoundError,
    UnknownNodeError,
    UnknownTraceError,
)
from ..specs import CLIError
from .audit import UnknownActionError
from .service import Console, UnknownJobError

MAX_BODY = 1 << 20
"""The largest request body the API reads (1 MiB): more is a 413."""
COOKIE = "remindrag_console_token"
PAGES = ("overview", "graph", "queries", "correct", "documents")
Handler = Callable[..., Awaitable[Any]]


class BodyTooLarge(ReMindError):
    """A request body over :data:`MAX_BODY`."""


class BadBody(ReMindError):
    """A request body that is not a JSON object."""


def status_of(exc: BaseException) -> int:
    if isinstance(exc, BodyTooLarge):
        return 413
    if isinstance(exc, BadBody):
        return 400
    unknown = (UnknownNodeError, UnknownTraceError, UnknownActionError, UnknownJobError)
    if isinstance(exc, (*unknown, SourceNotFoundError)):
        return 404
    if isinstance(
        exc,
        (
            InvalidArgumentError,
            InvalidQueryError,
            InvalidTeachPairError,
            InvalidDocumentError,
            EmbeddingError,
            ConfigError,
        ),
    ):
        return 422
    return 500


def error_response(exc: BaseException) -> Any:
    from starlette.responses import JSONResponse

    message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    return JSONResponse(
        {"error": type(exc).__name__, "message": str(message)}, status_code=status_of(exc)
    )


async def read_json(request: Any) -> dict[str, Any]:
    """The request's JSON object body (413 past :data:`MAX_BODY`, 400 when not an object)."""
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY:
        raise BodyTooLarge(f"the request body is over {MAX_BODY:,} bytes")
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise BodyTooLarge(f"the request body is over {MAX_BODY:,} bytes")
    if not body:
        return {}
    try:
        value = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise BadBody(f"the request body is not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadBody("the request body must be a JSON object")
    return value


def _same_origin(request: Any) -> bool:
    """A write comes from the console's own pages: no ``Origin``, or the server's own (a
    page on another site cannot post to a console on this machine)."""
    origin = request.headers.get("origin")
    if not origin:
        return True
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1] == host


def build_app(engine: Any, *, token: str | None = None, who: str | None = None) -> Any:
    """The console's ASGI application over ``engine``; ``token``: every request must carry
    it (``Authorization: Bearer``, or the cookie set by opening any page with ``?token=``)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import HTMLResponse, JSONResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    console = Console(engine, who=who or _default_who())

    def api(fn: Callable[..., Any], *, body: bool = False, path: tuple[str, ...] = ()) -> Handler:
        async def endpoint(request: Any) -> Any:
            try:
                if request.method != "GET":
                    if not _same_origin(request):
                        return JSONResponse(
                            {"error": "Forbidden", "message": "cross-site request refused"},
                            status_code=403,
                        )
                    if "json" not in request.headers.get("content-type", ""):
                        return JSONResponse(
                            {
                                "error": "UnsupportedMediaType",
                                "message": "send the body as application/json",
                            },
                            status_code=415,
                        )
                kwargs: dict[str, Any] = {p: request.path_params[p] for p in path}
                if body:
                    kwargs.update(await read_json(request))
                else:
                    kwargs.update(dict(request.query_params))
                try:
                    result = await run_in_threadpool(fn, **kwargs)
                except TypeError as exc:
                    if "argument" not in str(exc):
                        raise
                    raise InvalidArgumentError(f"bad parameters: {exc}") from None
                return JSONResponse(result)
            except ReMindError as exc:
                return error_response(exc)

        return endpoint

    def page(name: str) -> Handler:
        async def endpoint(request: Any) -> Any:
            del request
            return HTMLResponse(render_page(name))

        return endpoint

    async def trace_page(request: Any) -> Any:
        from ..html_trace import render_trace

        trace_id = request.path_params["trace_id"]
        try:
            trace = await run_in_threadpool(engine.trace, trace_id)
            body = await run_in_threadpool(render_trace, engine.store, trace)
        except ReMindError as exc:
            return error_response(exc)
        return HTMLResponse(_with_nav(body))

    async def memory_page(request: Any) -> Any:
        from ...core.types import Trace
        from ..memory_view import render_memory_view

        del request

        def render() -> str:
            traces = [Trace.from_dict(t) for t in engine.store.recent_traces(1000)]
            return render_memory_view(engine.store, traces)

        return HTMLResponse(_with_nav(await run_in_threadpool(render)))

    async def not_found(request: Any, exc: Exception) -> Any:
        del exc
        if request.url.path.startswith("/api/"):
            return JSONResponse(
                {"error": "NotFound", "message": f"no endpoint {request.url.path}"},
                status_code=404,
            )
        return HTMLResponse("<h1>not found</h1>", status_code=404)

    async def not_allowed(request: Any, exc: Exception) -> Any:
        del exc
        return JSONResponse(
            {"error": "MethodNotAllowed", "message": f"{request.method} {request.url.path}"},
            status_code=405,
        )

    async def no_icon(request: Any) -> Any:
        del request
        return Response(status_code=204)

    c = console
    routes = [
        Route("/favicon.ico", no_icon),
        Route("/", page("overview")),
        *(Route(f"/{p}", page(p)) for p in PAGES[1:]),
        Route("/queries/{trace_id}", trace_page),
        Route("/memory", memory_page),
        Route("/api/overview", api(c.overview)),
        Route("/api/graph/search", api(c.search)),
        Route("/api/graph/node/{node_id}", api(c.neighbourhood, path=("node_id",))),
        Route("/api/edges/{edge_id}", api(c.edge, path=("edge_id",))),
        Route(
            "/api/edges/{edge_id}/forget",
            api(c.forget_edge, body=True, path=("edge_id",)),
            methods=["POST"],
        ),
        Route("/api/traces", api(c.traces)),
        Route("/api/traces/{trace_id}", api(c.trace, path=("trace_id",))),
        Route(
            "/api/traces/{trace_id}/forget",
            api(c.forget_trace, body=True, path=("trace_id",)),
            methods=["POST"],
        ),
        Route(
            "/api/traces/{trace_id}/feedback",
            api(c.feedback, body=True, path=("trace_id",)),
            methods=["POST"],
        ),
        Route("/api/teach", api(c.teach, body=True), methods=["POST"]),
        Route("/api/ask", api(c.ask, body=True), methods=["POST"]),
        Route("/api/documents", api(c.documents)),
        Route("/api/documents/delete", api(c.delete_document, body=True), methods=["POST"]),
        Route("/api/documents/reindex", api(c.reindex, body=True), methods=["POST"]),
        Route("/api/jobs/{job_id}", api(c.job, path=("job_id",))),
        Route("/api/actions", api(c.actions)),
        Route(
            "/api/actions/{action_id}/undo",
            api(c.undo, body=True, path=("action_id",)),
            methods=["POST"],
        ),
        Mount("/static", app=StaticFiles(directory=str(static_dir())), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    app.state.console = console
    return with_token(app, token) if token else app


def with_token(app: Any, token: str) -> Any:
    """``app`` behind :func:`~..mcp_server.require_token`; a browser's ``?token=`` (checked
    the same way) is kept in an HttpOnly same-site cookie that later requests send instead
    of the header."""
    from ..mcp_server import require_token

    guarded = require_token(app, token)

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await guarded(scope, receive, send)
            return
        headers = list(scope.get("headers") or [])
        has_auth = any(k == b"authorization" for k, _ in headers)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = (query.get("token") or [None])[0]
        if given is None and not has_auth:
            given = _cookie(headers, COOKIE)
        if given is not None and not has_auth:
            headers.append((b"authorization", b"Bearer " + given.encode("latin-1", "replace")))
        scope = {**scope, "headers": headers}
        if "token" in query and given is not None:
            left = {k: v for k, v in query.items() if k != "token"}
            scope["query_string"] = urlencode(left, doseq=True).encode()

            async def set_cookie(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start" and message["status"] < 400:
                    value = f"{COOKIE}={given}; HttpOnly; SameSite=Strict; Path=/"
                    message = {
                        **message,
                        "headers": [*message.get("headers", []), (b"set-cookie", value.encode())],
                    }
                await send(message)

            await guarded(scope, receive, set_cookie)
            return
        await guarded(scope, receive, send)

    return asgi


def _cookie(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    for k, v in headers:
        if k == b"cookie":
            for part in v.decode("latin-1").split(";"):
                key, _, value = part.strip().partition("=")
                if key == name:
                    return value
    return None


def _default_who() -> str:
    try:
        return f"{getpass.getuser()}@console"
    except (KeyError, OSError):
        return "console"


def static_dir() -> Any:
    return resources.files(__package__).joinpath("static")


NAV = (
    ("/", "Overview"),
    ("/graph", "Graph"),
    ("/queries", "Queries"),
    ("/correct", "Correct"),
    ("/documents", "Documents"),
    ("/memory", "Memory view"),
)


def nav_html(active: str = "") -> str:
    links = "".join(
        f'<a href="{href}"{" class=on" if label.lower() == active else ""}>{label}</a>'
        for href, label in NAV
    )
    return f'<nav class="rr-nav"><b>ReMindRAG console</b>{links}</nav>'


def render_page(name: str) -> str:
    """A page's HTML: the navigation, its empty sections, and the scripts that fill them
    from the API (static/console.js)."""
    extra = '<script src="/static/cytoscape.min.js"></script>' if name == "graph" else ""
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>ReMindRAG console: {html.escape(name)}</title>"
        "<link rel='stylesheet' href='/static/console.css'>"
        f"{extra}</head><body data-page='{html.escape(name)}'>{nav_html(name)}"
        f"<main id='main'>{_SECTIONS[name]}</main>"
        "<script src='/static/console.js'></script></body></html>"
    )


def _with_nav(body: str) -> str:
    """A page rendered elsewhere (the trace page, the memory view) with the console's bar."""
    bar = "<link rel='stylesheet' href='/static/console.css'>" + nav_html("queries")
    head, sep, rest = body.partition("<body>")
    return f"{head}{sep}{bar}{rest}" if sep else bar + body


_SECTIONS = {
    "overview": """
<h1>Overview</h1><div id="counts" class="cards"></div>
<h2>Memory at work, query by query</h2><div id="plot"></div>
<p class="note" id="plot-note"></p>
<h2>Recent writes</h2><table id="writes" class="grid"></table>
<h2>Queries that shaped memory</h2><table id="shaped" class="grid"></table>""",
    "graph": """
<h1>Graph</h1>
<form id="gsearch"><input id="gq" placeholder="entity or passage words" size="40">
<select id="gkind"><option value="entity">entity</option><option value="passage">passage</option>
</select><button>Search</button></form>
<div id="ghits"></div>
<div class="split"><div id="cy"></div><aside id="gside"><p>Search, then open a node: its
edges load on demand (the strongest memory first). Edge width = memory strength; click an
edge to see it and forget its memory.</p></aside></div>""",
    "queries": """
<h1>Queries</h1><p>The newest retrievals (refreshed every 5 s). Open one for its walk,
its passages and what it wrote to memory.</p>
<table id="traces" class="grid"></table><section id="tdetail"></section>""",
    "correct": """
<h1>Correct</h1>
<section><h2>Ask</h2><form id="ask"><input id="askq" size="60"
placeholder="a question"><button>Ask</button></form><div id="askout"></div></section>
<section><h2>Teach a question its passages</h2><form id="teach"><input id="teachq" size="60"
placeholder="the question"><br><input id="teachs" size="40" placeholder="find passages by words">
<button type="button" id="teachfind">Find</button></form><div id="teachhits"></div>
<button id="teachgo">Teach the picked passages</button><div id="teachout"></div></section>
<section><h2>Forget an edge or a trace</h2><form id="forget"><input id="forgetid" size="40"
placeholder="edge id (k-…) or trace id"><button>Forget</button></form>
<div id="forgetout"></div></section>
<section><h2>Actions (recorded in the store)</h2><table id="actions" class="grid"></table>
</section>""",
    "documents": """
<h1>Documents</h1><form id="dsearch"><input id="dq" placeholder="id contains" size="40">
<button>Search</button></form><table id="docs" class="grid"></table>
<h2>Re-index a file or folder</h2><form id="reindex"><input id="rpath" size="60"
placeholder="/path/to/file.md"><button>Re-index</button></form><div id="jobs"></div>""",
}


def parse_host_port(args: argparse.Namespace) -> tuple[str, int]:
    port = args.port
    if not 0 < port < 65536:
        raise CLIError(f"--port must be between 1 and 65535, got {port}")
    return args.host, port


def serve(args: argparse.Namespace) -> int:
    """``remindrag serve``: the console over ``--store`` until interrupted."""
    from ..mcp_server import LOCAL_HOSTS
    from ..session import open_engine

    host, port = parse_host_port(args)
    token = args.token or os.environ.get("REMINDRAG_CONSOLE_TOKEN") or None
    if host not in LOCAL_HOSTS and not token:
        raise CLIError(
            f"--host {host} serves other machines: give --token T (or set "
            "$REMINDRAG_CONSOLE_TOKEN); every request must carry it"
        )
    try:
        import uvicorn
    except ImportError as exc:
        raise CLIError(
            f"remindrag serve needs the 'console' extra: pip install "
            f"'remindrag-integrations[console]' ({exc})"
        ) from None
    engine = open_engine(args)
    try:
        app = build_app(engine, token=token)
        where = f"http://{host if ':' not in host else f'[{host}]'}:{port}/"
        print(f"console: {where}" + (" (open it with ?token=...)" if token else ""), flush=True)
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        engine.close()
    return 0
