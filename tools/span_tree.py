"""Draw the span tree of one LangChain retrieval as a tracing tool receives it, for
docs/look-inside.md: OpenInference's LangChain instrumentor into OpenTelemetry's in-memory
exporter (no tracing UI: this is the exporter's spans drawn as an indented tree), written as
an HTML page and, with Playwright and a system Chromium, a PNG screenshot of it.

    PYTHONPATH=. python tools/span_tree.py [--html FILE] [--png docs/img/span-tree.png]
"""

from __future__ import annotations

import argparse
import html
import json
import os
import shutil
from pathlib import Path
from typing import Any

SHOWN = (
    "openinference.span.kind",
    "output.value",
    "llm.token_count.total",
    "metadata",
)


def spans() -> list[Any]:
    from openinference.instrumentation.langchain import LangChainInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from remindrag_integrations.faces.retriever import ReMindRetriever
    from remindrag_integrations.testing import HashEmbedder

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    LangChainInstrumentor().instrument(tracer_provider=provider)
    try:
        retriever = ReMindRetriever.from_texts(
            [
                "Marie Curie was born in Warsaw.",
                "Warsaw is the capital of Poland.",
                "Pierre Curie was born in Paris.",
            ],
            embeddings=HashEmbedder(),
        )
        retriever.invoke("Where was Marie Curie born?")
    finally:
        LangChainInstrumentor().uninstrument()
    return list(exporter.get_finished_spans())


def tree_html(found: list[Any]) -> str:
    by_parent: dict[Any, list[Any]] = {}
    ids = {s.context.span_id for s in found}
    for s in sorted(found, key=lambda s: s.start_time):
        parent = s.parent.span_id if s.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(s)

    def attrs(s: Any) -> str:
        out = []
        for key in SHOWN:
            value = s.attributes.get(key)
            if value is None:
                continue
            text = str(value)
            if key == "output.value":
                try:
                    text = json.dumps(json.loads(text))
                except ValueError:
                    pass
            out.append(f"<span class=k>{html.escape(key)}</span>={html.escape(text[:140])}")
        return "<br>".join(out)

    def rows(parent: Any, depth: int) -> str:
        out = ""
        for s in by_parent.get(parent, []):
            ms = (s.end_time - s.start_time) / 1e6
            kind = s.attributes.get("openinference.span.kind", "")
            out += (
                f"<tr><td style='padding-left:{8 + depth * 22}px'><b>{html.escape(s.name)}</b>"
                f" <span class='kind {html.escape(str(kind))}'>{html.escape(str(kind))}</span>"
                f"</td><td>{ms:.1f} ms</td><td class=a>{attrs(s)}</td></tr>"
            )
            out += rows(s.context.span_id, depth + 1)
        return out

    return (
        "<!doctype html><meta charset=utf-8><style>body{font:13px system-ui;margin:12px}"
        "table{border-collapse:collapse}td{border-bottom:1px solid #ddd;padding:3px 8px;"
        "vertical-align:top}.a{font:11px monospace;color:#444;max-width:560px}"
        ".k{color:#36c}.kind{font-size:10px;border-radius:3px;padding:0 4px;background:#eef}"
        ".RETRIEVER{background:#fde}.CHAIN{background:#dfe}</style>"
        "<h3>One LangChain retrieval's spans, as OpenInference exports them "
        "(in-memory OpenTelemetry exporter)</h3>"
        f"<table><tr><th>span</th><th>time</th><th>attributes</th></tr>{rows(None, 0)}"
        "</table>"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", default="span-tree.html")
    ap.add_argument("--png", default=None)
    args = ap.parse_args()
    page = tree_html(spans())
    Path(args.html).write_text(page, encoding="utf-8")
    print(f"wrote {args.html}")
    if args.png:
        from playwright.sync_api import sync_playwright

        chromium = os.environ.get("REMINDRAG_CHROMIUM") or shutil.which("chromium")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            tab = browser.new_page(viewport={"width": 1000, "height": 400})
            tab.goto(Path(args.html).resolve().as_uri())
            tab.screenshot(path=args.png, full_page=True)
            browser.close()
        print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
