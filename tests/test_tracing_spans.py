"""Issue 47, "every stage a span": a retrieval in the users' tracing tools is the retriever
run with one child per stage (prior, seed search, replay, walk with its LLM calls nested,
rank, the trace's write), carrying counts and ids; through LangChain's run manager and
LlamaIndex's dispatcher, seen here by the real OpenInference instrumentors exporting to an
in-memory OpenTelemetry exporter. When nothing listens, no stage object is made."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import PrivateAttr

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.core.observe import STAGES
from remindrag_integrations.faces.langchain import spans as lc_spans
from remindrag_integrations.faces.llama_index import spans as li_spans
from remindrag_integrations.faces.llama_index.spans import ReMindStageEvent
from remindrag_integrations.testing import HashEmbedder

TEXTS = [
    "Paris is the capital of France. The Eiffel Tower stands in Paris.",
    "Berlin is the capital of Germany. The Brandenburg Gate stands in Berlin.",
    "The Louvre in Paris holds the Mona Lisa, painted by Leonardo da Vinci.",
    "Leonardo da Vinci was born in Vinci, near Florence, in 1452.",
]
QUESTION = "Where was the painter of the Mona Lisa born?"
WALKED = ["ReMindRAG.prior", "ReMindRAG.seed_search", "ReMindRAG.replay", "ReMindRAG.walk"]
STAGE_SPANS = [*WALKED, "ReMindRAG.rank", "ReMindRAG.save_trace"]
assert STAGE_SPANS == ["ReMindRAG." + s for s in STAGES if s != "pre_query"]  # no pre-query here


def _nav_model(n: int = 20) -> GenericFakeChatModel:
    """A navigator that reads one hop and stops, and reports its token usage."""
    msg = AIMessage(
        content='{"enough": true}',
        usage_metadata={"input_tokens": 100, "output_tokens": 7, "total_tokens": 107},
    )
    return GenericFakeChatModel(messages=iter([msg] * n))


@pytest.fixture(scope="module")
def store() -> Any:
    return ReMindRetriever.from_texts(TEXTS, embeddings=HashEmbedder()).engine.store


def walking(store: Any) -> ReMindRetriever:
    """A retriever whose LangChain model always walks (so the walk makes LLM calls)."""
    engine = ReMindRAG(
        llm=_nav_model(),
        embeddings=HashEmbedder(),
        store=store,
        retrieval_config={"llm_navigation": "always"},
    )
    return ReMindRetriever(engine=engine)


@pytest.fixture
def exporter() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    exp, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    yield exp, provider
    provider.shutdown()


@pytest.fixture
def langchain_traced(exporter: Any) -> Iterator[InMemorySpanExporter]:
    exp, provider = exporter
    inst = LangChainInstrumentor()
    inst.instrument(tracer_provider=provider)
    yield exp
    inst.uninstrument()


@pytest.fixture
def llama_index_traced(exporter: Any) -> Iterator[InMemorySpanExporter]:
    exp, provider = exporter
    inst = LlamaIndexInstrumentor()
    inst.instrument(tracer_provider=provider)
    yield exp
    inst.uninstrument()


def _tree(spans: tuple[ReadableSpan, ...]) -> dict[str, list[ReadableSpan]]:
    """Each span's children, by parent name, in start order."""
    by_id = {s.context.span_id: s for s in spans}
    out: dict[str, list[ReadableSpan]] = {}
    for s in sorted(spans, key=lambda s: s.start_time or 0):
        parent = by_id.get(s.parent.span_id) if s.parent is not None else None
        out.setdefault(parent.name if parent is not None else "", []).append(s)
    return out


def _out(span: ReadableSpan) -> dict[str, Any]:
    return json.loads(str(span.attributes["output.value"]))  # type: ignore[index]


def _stages(children: list[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in children if s.name.startswith("ReMindRAG.")}


@pytest.mark.parametrize("use_async", [False, True])
def test_langchain_stages_are_child_runs_with_counts_and_the_walk_holds_its_llm_calls(
    store: Any, langchain_traced: InMemorySpanExporter, use_async: bool
) -> None:
    r = walking(store)
    docs = asyncio.run(r.ainvoke(QUESTION)) if use_async else r.invoke(QUESTION)
    tree = _tree(langchain_traced.get_finished_spans())
    (root,) = tree[""]
    assert root.name == "ReMindRetriever"
    assert root.attributes["openinference.span.kind"] == "RETRIEVER"
    stages = _stages(tree["ReMindRetriever"])
    assert [s.name for s in tree["ReMindRetriever"]] == STAGE_SPANS  # all nested, in order
    trace_id = docs[0].metadata["remindrag"]["trace_id"]
    trace = r.trace(trace_id)
    walk = _out(stages["ReMindRAG.walk"])
    llm_spans = tree["ReMindRAG.walk"]
    assert trace.traversal_calls > 0
    assert len(llm_spans) == walk["llm_calls"] == trace.traversal_calls
    assert {s.attributes["openinference.span.kind"] for s in llm_spans} == {"LLM"}
    assert walk["tokens"] == 107 * trace.traversal_calls
    assert walk["hops"] == len(trace.moves)
    assert _out(stages["ReMindRAG.seed_search"])["seeds"] == len(trace.seeds) > 0
    assert _out(stages["ReMindRAG.replay"])["replayed_edges"] == 0
    assert _out(stages["ReMindRAG.rank"])["passage_ids"] == [d.id for d in docs]
    assert _out(stages["ReMindRAG.save_trace"])["trace_id"] == trace_id
    meta = json.loads(str(stages["ReMindRAG.walk"].attributes["metadata"]))
    assert meta["remindrag.stage"] == "walk"


class _Runs(BaseCallbackHandler):
    """Any callback handler: the chain runs it sees, with their parents."""

    def __init__(self) -> None:
        self.started: list[tuple[str, Any, Any]] = []
        self.errors: list[str] = []
        self.retrievers: list[Any] = []
        self.outputs: dict[Any, Any] = {}

    def on_retriever_start(self, serialized: Any, query: str, *, run_id: Any, **kw: Any) -> None:
        self.retrievers.append(run_id)

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        self.started.append((kw.get("name"), run_id, parent_run_id))

    def on_chain_end(self, outputs: Any, *, run_id: Any, **kw: Any) -> None:
        self.outputs[run_id] = outputs

    def on_chain_error(self, error: BaseException, *, run_id: Any, **kw: Any) -> None:
        self.errors.append(str(error))


def test_memory_replay_shows_in_the_replay_stage_and_there_is_no_walk() -> None:
    r = ReMindRetriever.from_texts(TEXTS, embeddings=HashEmbedder())  # its own memory
    first = r.invoke(QUESTION)
    gold = next(d.id for d in first if "Vinci, near Florence" in d.page_content)
    r.memorize(first[0].metadata["remindrag"]["trace_id"], supporting=[gold])
    runs = _Runs()
    r.invoke(QUESTION, config={"callbacks": [runs]})
    names = [n for n, _, _ in runs.started]
    assert "ReMindRAG.replay" in names and "ReMindRAG.walk" not in names
    assert {p for _, _, p in runs.started} == set(runs.retrievers)  # children of the retriever
    trace = r.trace()
    assert trace.stop_reason == "replay"
    replay = runs.outputs[next(i for n, i, _ in runs.started if n == "ReMindRAG.replay")]
    assert replay["replayed_edges"] == len(trace.replayed_edges)
    assert replay["vouched"] >= 1  # memory vouches for a passage: that is why no walk


def test_a_stage_that_raises_ends_its_run_with_the_error(store: Any, monkeypatch: Any) -> None:
    from remindrag_integrations.core import pipeline

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("rank broke")

    monkeypatch.setattr(pipeline, "rank", broken)
    r = ReMindRetriever(engine=ReMindRAG(embeddings=HashEmbedder(), store=store))
    runs = _Runs()
    with pytest.raises(RuntimeError, match="rank broke"):
        r.invoke(QUESTION, config={"callbacks": [runs]})
    assert [n for n, _, _ in runs.started][-1] == "ReMindRAG.rank"
    assert runs.errors[0] == "rank broke"  # the rank run ended with it (then the retriever's)


class _Events(BaseEventHandler):
    _seen: list[BaseEvent] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "_Events"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, ReMindStageEvent):
            self._seen.append(event)


def test_llama_index_stages_are_spans_under_the_retriever_with_custom_events(
    store: Any, llama_index_traced: InMemorySpanExporter
) -> None:
    r = ReMindRetriever(engine=ReMindRAG(embeddings=HashEmbedder(), store=store))
    events, root = _Events(), get_dispatcher()
    root.add_event_handler(events)
    try:
        nodes = r.retrieve(QUESTION)
    finally:
        root.event_handlers.remove(events)
    tree = _tree(llama_index_traced.get_finished_spans())
    stages = _stages(tree["ReMindRetriever._retrieve"])
    assert list(stages) == [n for n in STAGE_SPANS if n != "ReMindRAG.walk" or n in stages]
    assert {"ReMindRAG.prior", "ReMindRAG.seed_search", "ReMindRAG.rank"} <= set(stages)
    trace_id = nodes[0].node.metadata["remindrag"]["trace_id"]
    assert _out(stages["ReMindRAG.save_trace"])["trace_id"] == trace_id
    assert _out(stages["ReMindRAG.rank"])["passage_ids"] == [n.node.node_id for n in nodes]
    seen = [e.stage for e in events._seen]  # type: ignore[attr-defined]
    assert seen == [n.removeprefix("ReMindRAG.") for n in stages]
    assert all(e.outputs == _out(stages["ReMindRAG." + e.stage]) for e in events._seen)  # type: ignore[attr-defined]


def test_async_llama_index_stages_nest_too(
    store: Any, llama_index_traced: InMemorySpanExporter
) -> None:
    r = ReMindRetriever(engine=ReMindRAG(embeddings=HashEmbedder(), store=store))
    asyncio.run(r.aretrieve(QUESTION))
    tree = _tree(llama_index_traced.get_finished_spans())
    stages = _stages(tree["ReMindRetriever.aretrieve"])  # LlamaIndex's async retrieve span
    assert list(stages) == [n for n in STAGE_SPANS if n != "ReMindRAG.walk" or n in stages]
    assert {"ReMindRAG.seed_search", "ReMindRAG.rank", "ReMindRAG.save_trace"} <= set(stages)


# --- nothing listens: nothing is made ------------------------------------------------------


class _Counted:
    """Counts the stage objects made (the faces' observers, core's per-query record) and the
    observers the engine is given."""

    def __init__(self, monkeypatch: Any, r: ReMindRetriever) -> None:
        self.made = 0
        self.given: list[Any] = []
        from remindrag_integrations.core import pipeline

        stage_kinds = (lc_spans.LangChainStages, li_spans.LlamaIndexStages, pipeline._Stages)
        for cls in stage_kinds:
            init = cls.__init__

            def counting(obj: Any, *a: Any, _init: Any = init, **kw: Any) -> None:
                self.made += 1
                _init(obj, *a, **kw)

            monkeypatch.setattr(cls, "__init__", counting)
        for name in ("retrieve", "aretrieve"):
            orig = getattr(r.engine, name)

            def seeing(*a: Any, _orig: Any = orig, **kw: Any) -> Any:
                self.given.append(kw.get("observer"))
                return _orig(*a, **kw)

            monkeypatch.setattr(r.engine, name, seeing)


def test_no_listener_no_stage_object_and_no_callback_work(store: Any, monkeypatch: Any) -> None:
    r = walking(store)
    counted = _Counted(monkeypatch, r)
    r.invoke(QUESTION)
    asyncio.run(r.ainvoke(QUESTION))
    r.retrieve(QUESTION)  # LlamaIndex, no span or event handler attached
    # the memory hooks alone record no trace: they do not count as listening
    with pytest.warns(UserWarning, match="not part of an answering run"):
        r.invoke(QUESTION, config={"callbacks": [r.memory_callback()]})
    with r.memory_event_handler():
        r.retrieve(QUESTION)
    assert counted.made == 0 and counted.given == [None] * 5
    runs = _Runs()
    r.invoke(QUESTION, config={"callbacks": [runs]})
    assert counted.made == 2 and counted.given[-1] is not None  # the face's and core's
    assert [n for n, _, _ in runs.started] == STAGE_SPANS


class _ModelRuns(_Runs):
    def __init__(self) -> None:
        super().__init__()
        self.model_parents: list[Any] = []

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: Any, parent_run_id: Any = None, **kw: Any
    ) -> None:
        self.model_parents.append(parent_run_id)


def test_the_pre_query_stage_holds_its_llm_call(store: Any) -> None:
    engine = ReMindRAG(
        llm=_nav_model(),
        embeddings=HashEmbedder(),
        store=store,
        retrieval_config={"pre_query": True, "llm_navigation": "never"},
    )
    runs = _ModelRuns()
    ReMindRetriever(engine=engine).invoke(QUESTION, config={"callbacks": [runs]})
    names = {run_id: name for name, run_id, _ in runs.started}
    assert [n for n, _, _ in runs.started][0] == "ReMindRAG.pre_query"
    assert [names.get(p) for p in runs.model_parents] == ["ReMindRAG.pre_query"]
    pre = runs.outputs[next(i for n, i, _ in runs.started if n == "ReMindRAG.pre_query")]
    assert pre["llm_calls"] == 1 and pre["subquestions"] == [QUESTION]  # an unreadable reply


def test_the_memory_write_after_an_answer_is_a_span_under_the_synthesis(
    llama_index_traced: InMemorySpanExporter,
) -> None:
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    r = ReMindRetriever.from_texts(TEXTS, embeddings=HashEmbedder())  # its own memory
    qe = RetrieverQueryEngine.from_args(r, llm=MockLLM(max_tokens=8))
    with r.memory_event_handler() as handler:
        response = qe.query(QUESTION)
    spans = llama_index_traced.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}
    (memorize,) = [s for s in spans if s.name == "ReMindRAG.memorize"]
    assert memorize.parent is not None
    assert "synthesize" in by_id[memorize.parent.span_id].name
    out = _out(memorize)
    (write,) = handler.writes
    trace_id = response.source_nodes[0].node.metadata["remindrag"]["trace_id"]
    assert out["trace_ids"] == [write.trace_id] == [trace_id]
    assert out["applied"] == int(write.applied) and out["errors"] == 0
    assert out["enhanced_edges"] == len(write.enhanced)
    assert {s.name for s in spans} >= set(STAGE_SPANS) - {"ReMindRAG.walk"}  # the retrieval's


def test_the_langchain_memory_callbacks_write_is_a_span_when_a_tracer_is_set_up(
    langchain_traced: InMemorySpanExporter,
) -> None:
    """``ReMindMemoryCallback`` writes after the answer's run ended: its write is a root run
    ``ReMindRAG.memorize`` that a process-wide tracer (here OpenInference's) records."""
    from langchain_core.runnables import RunnableLambda

    r = ReMindRetriever.from_texts(TEXTS, embeddings=HashEmbedder())

    def answer(question: str) -> str:
        found = r.invoke(question)
        return f"Vinci. [{found[0].metadata['remindrag']['chunk_id']}]"

    cb = r.memory_callback()
    RunnableLambda(answer).invoke(QUESTION, config={"callbacks": [cb]})
    (write,) = cb.writes
    spans = langchain_traced.get_finished_spans()
    (memorize,) = [s for s in spans if s.name == "ReMindRAG.memorize"]
    out = _out(memorize)
    assert out["trace_ids"] == [write.trace_id] and out["errors"] == 0
    assert out["applied"] == int(write.applied) == 1
    assert out["enhanced_edges"] == len(write.enhanced)
    assert memorize.attributes["openinference.span.kind"] == "CHAIN"


def test_without_a_tracer_the_memory_callback_makes_no_run(monkeypatch: Any) -> None:
    from langchain_core.callbacks import CallbackManager
    from langchain_core.runnables import RunnableLambda

    r = ReMindRetriever.from_texts(TEXTS, embeddings=HashEmbedder())
    started: list[str] = []
    real = CallbackManager.on_chain_start

    def spy(self: Any, serialized: Any, inputs: Any, **kw: Any) -> Any:
        started.append(str(kw.get("name")))
        return real(self, serialized, inputs, **kw)

    monkeypatch.setattr(CallbackManager, "on_chain_start", spy)
    cb = r.memory_callback()
    RunnableLambda(lambda q: f"Vinci. [{r.invoke(q)[0].metadata['remindrag']['chunk_id']}]").invoke(
        QUESTION, config={"callbacks": [cb]}
    )
    assert len(cb.writes) == 1 and "ReMindRAG.memorize" not in started
