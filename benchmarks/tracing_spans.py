"""What the stage spans cost (issue 47, "every stage a span").

    python benchmarks/tracing_spans.py [--queries 40] [--repeats 3] [--modes ...] [--tag TAG]

One zero-token ReMindRetriever (hash embedder) over the HotpotQA sample of tests/data (120
passages); the same questions are asked in each mode, and the p50 / p95 ms of the whole
query are reported per mode:

- ``none``: ``retriever.invoke(q)``, no callback handler: no observer is made (the default
  every user without a tracer gets);
- ``handler``: ``invoke(q, config={"callbacks": [h]})`` with a handler that does nothing:
  the stages become LangChain child runs (seven runs more per query), nobody records them;
- ``handler-no-stages``: the same handler with the stage runs switched off (what a handler
  cost before the change: LangChain's retriever run alone), so ``handler`` minus this is
  what the seven stage runs add;
- ``oi-langchain``: OpenInference's LangChain instrumentor into an in-memory OpenTelemetry
  exporter (every run becomes an exported span);
- ``li-none`` / ``oi-llama-index``: ``retriever.retrieve(q)`` (LlamaIndex) without a handler
  and with OpenInference's LlamaIndex instrumentor.

``none``, ``handler`` and ``handler-no-stages`` alternate query by query; an instrumentor is global, so its mode
runs as a block between blocks of its baseline. ``--modes none`` runs on any checkout (the
code before the change included: ``PYTHONPATH=<old checkout>``) for the before/after
comparison of the default path. Load average before and after. Writes
``benchmarks/results/tracing_spans<tag>.json`` (summary only).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
DATA = ROOT.parent / "tests" / "data"
OUT = ROOT / "results"
MODES = ("none", "handler", "handler-no-stages", "oi-langchain", "li-none", "oi-llama-index")


def rows(name: str) -> list[dict]:
    text = (DATA / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def p(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def timed(fn: Callable[[], Any]) -> float:
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()

    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.documents import Document

    from remindrag_integrations import ReMindRetriever
    from remindrag_integrations.testing import HashEmbedder

    corpus = rows("hotpotqa_train100_sample.corpus.jsonl")
    questions = [q["question"] for q in rows("hotpotqa_train100_sample.questions.jsonl")]
    questions = questions[: args.queries]
    docs = [Document(id=r["pid"], page_content=f"{r['title']}\n{r['text']}") for r in corpus]
    r = ReMindRetriever.from_documents(docs, embeddings=HashEmbedder())
    for q in questions[:5]:  # warm caches, first-call imports
        r.invoke(q)
        r.retrieve(q)

    class Quiet(BaseCallbackHandler):
        """A handler that records nothing: what LangChain's run manager costs by itself."""

    quiet = Quiet()
    times: dict[str, list[float]] = {m: [] for m in args.modes}
    load_before = [round(x, 2) for x in os.getloadavg()]

    def run_block(mode: str, call: Callable[[str], Any]) -> None:
        for _ in range(args.repeats):
            for q in questions:
                times[mode].append(timed(lambda q=q: call(q)))

    # none and handler, alternating query by query
    for _ in range(args.repeats):
        for q in questions:
            if "none" in times:
                times["none"].append(timed(lambda q=q: r.invoke(q)))
            if "handler" in times:
                cfg: Any = {"callbacks": [quiet]}
                times["handler"].append(timed(lambda q=q, cfg=cfg: r.invoke(q, config=cfg)))
            if "handler-no-stages" in times:
                import remindrag_integrations.faces.retriever as face

                listening, face.lc_listening = face.lc_listening, lambda _: False
                try:
                    cfg = {"callbacks": [quiet]}
                    t = timed(lambda q=q, cfg=cfg: r.invoke(q, config=cfg))
                    times["handler-no-stages"].append(t)
                finally:
                    face.lc_listening = listening
    if "li-none" in times:
        run_block("li-none", r.retrieve)
    if "oi-langchain" in times or "oi-llama-index" in times:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter,
        )

        exporter, provider = InMemorySpanExporter(), TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        if "oi-langchain" in times:
            from openinference.instrumentation.langchain import LangChainInstrumentor

            lc = LangChainInstrumentor()
            lc.instrument(tracer_provider=provider)
            run_block("oi-langchain", r.invoke)
            lc.uninstrument()
            exporter.clear()
        if "oi-llama-index" in times:
            from openinference.instrumentation.llama_index import LlamaIndexInstrumentor

            li = LlamaIndexInstrumentor()
            li.instrument(tracer_provider=provider)
            run_block("oi-llama-index", r.retrieve)
            li.uninstrument()
        provider.shutdown()
    if "none" in times and len(args.modes) > 1:
        run_block("none", r.invoke)  # the baseline again, after the instrumented blocks

    summary = {
        "queries": len(questions),
        "repeats": args.repeats,
        "passages": len(corpus),
        "load_before": load_before,
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "modes": {
            m: {
                "n": len(xs),
                "p50_ms": round(statistics.median(xs), 3),
                "p95_ms": round(p(xs, 0.95), 3),
            }
            for m, xs in times.items()
        },
    }
    base = summary["modes"].get("none", {}).get("p50_ms")
    print(f"{'mode':16} {'n':>5} {'p50 ms':>9} {'p95 ms':>9} {'p50 / none':>11}")
    for m, s in summary["modes"].items():
        ratio = f"{s['p50_ms'] / base:.3f}" if base else "-"
        print(f"{m:16} {s['n']:>5} {s['p50_ms']:>9.2f} {s['p95_ms']:>9.2f} {ratio:>11}")
    print("load", summary["load_before"], "->", summary["load_after"])
    OUT.mkdir(exist_ok=True)
    path = OUT / f"tracing_spans{args.tag}.json"
    path.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    print("wrote", path)


if __name__ == "__main__":
    main()
