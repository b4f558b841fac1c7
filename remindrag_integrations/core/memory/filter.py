"""Which parts of a retrieval supported the answer (docs/method.md §3): the answer's own citations (no
LLM call), the LLM filter (paper Table 13), or in zero-token mode the chunks most similar to
the query."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import LLMError, LLMOutputError
from ..ids import is_chunk
from ..prompts import FILTER_PROMPT, cited_ids, parse_filter
from ..selection import top_support
from ..steps import Ask, Step, done
from ..store import GraphStore
from ..types import Trace


@dataclass(frozen=True)
class Support:
    """Chunk and edge ids named as supporting an answer."""

    chunks: list[str] = field(default_factory=list)
    edges: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, ids: list[str]) -> Support:
        """Split mixed ids (citations, feedback) into chunks and edges."""
        return cls([i for i in ids if is_chunk(i)], [i for i in ids if not is_chunk(i)])


def citations(
    trace: Trace, answer: str | None, cited: list[str] | None
) -> tuple[Support, list[str]]:
    """The answer's citations as support: the chunk ids ``answer`` cites (``[c-…]``, as the
    answer prompt asks) and the ``cited`` ones (e.g. the source nodes a LlamaIndex response
    used) that the retrieval read or returned; and the cited ids it did not (ignored)."""
    named = list(dict.fromkeys([*(cited or []), *cited_ids(answer or "")]))
    read = {*trace.chunk_ids, *trace.rank_evidence}
    return Support([c for c in named if c in read]), [c for c in named if c not in read]


def shown(trace: Trace) -> list[str]:
    """The chunks the filter is shown: every chunk the answer was written from, those the walk
    read first, then the rest of the returned ones (the first pass's fill)."""
    return list(dict.fromkeys([*trace.chunk_ids, *trace.rank_evidence]))


def _prompt(trace: Trace, store: GraphStore, answer: str, chunk_chars: int, template: str) -> str:
    chunks = (
        "\n".join(
            f"[{cid}] {' '.join(store.get_chunk(cid).text.split())[:chunk_chars]}"
            for cid in shown(trace)
        )
        or "(none)"
    )
    added = [(node, parent, eid) for node, (parent, eid) in trace.parents.items() if eid]
    names = {n.id: n.name for n in store.get_nodes(list(trace.parents))}
    lines = [
        f"- {eid} | {names[parent]} | {store.get_edge(eid).text} | {names[node]}"  # type: ignore[index]
        for node, parent, eid in added
    ]
    return template.format(
        query=trace.query,
        answer=answer or "(not given)",
        chunks=chunks,
        edges="\n".join(lines) or "(none)",
    )


def llm_filter(
    trace: Trace, store: GraphStore, answer: str, chunk_chars: int, template: str = FILTER_PROMPT
) -> Step:
    """Ask which chunks and edges supported the answer; returns the :class:`Support` found in
    the subgraph. An unusable reply is re-asked once, then treated as 'no support'."""
    prompt = _prompt(trace, store, answer, chunk_chars, template)
    subgraph_edges = set(trace.subgraph_edges)
    candidates = shown(trace)
    known = set(candidates)
    problem = ""
    for attempt in range(2):
        text = (
            prompt
            if attempt == 0
            else prompt + f"\nYour previous reply was unusable "
            f"({problem}). Reply with the JSON object only.\n"
        )
        try:
            reply = yield Ask("memorize", text, {"query": trace.query, "chunks": candidates})
            chunk_ids, edge_ids = parse_filter(reply or "")
            return Support(  # a returned chunk the walk did not read is bridged by the write
                [c for c in chunk_ids if c in known],
                [e for e in edge_ids if e in subgraph_edges],
            )
        except LLMOutputError as exc:
            problem = str(exc)
        except LLMError:
            return Support()
    return Support()


def similarity_filter(trace: Trace, store: GraphStore, top: int) -> Step:
    """Zero-token filter: the ``top`` read chunks most similar to the query."""
    q = np.asarray(trace.query_embedding, dtype=np.float32)
    sims = store.node_embeddings(trace.chunk_ids) @ q if trace.chunk_ids else np.zeros(0)
    scores = dict(zip(trace.chunk_ids, (float(x) for x in sims)))
    return done(Support(top_support(scores, top)))
