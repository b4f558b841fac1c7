"""Teach memory from known answers (the paper's "initialize the model with well-curated FAQs").

Each :class:`TeachPair` is a question plus its supporting passages, named by chunk id, by
document id, or by a piece of text found in the corpus. For each pair: ask the question
(zero-token, as a user's query runs: the caller's :data:`.assure.Requery`), write the paths from its subgraph to those passages
through the one write path (:func:`.write.write`), enhancing only: a known answer says what is
right, never what is wrong; then check that every passage comes back in the top ``k``
(:func:`.assure.assure`: a passage that does not gets a learned edge). No LLM is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from .. import arguments
from ..config import RetrievalConfig
from ..errors import InvalidQueryError, InvalidTeachPairError, UnknownNodeError
from ..ids import chunk_of, is_chunk
from ..steps import Embed, Step
from ..store import GraphStore
from .assure import Requery, assure
from .filter import Support
from .write import write

ProgressFn = Callable[[int, int], None]
TEXT_CANDIDATES = 20  # nearest anchors checked for a passage given as text


@dataclass(frozen=True)
class TeachPair:
    """A question and the passages that answer it: ``chunk_ids``, ``doc_ids`` (every chunk of
    the document) and ``texts`` (passage or answer text located in the corpus)."""

    question: str
    chunk_ids: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    texts: tuple[str, ...] = ()

    @classmethod
    def of(cls, item: TeachPair | Mapping[str, Any], where: str = "") -> TeachPair:
        """A pair from a :class:`TeachPair` or a mapping with ``question`` and any of
        ``chunk_ids`` / ``doc_ids`` / ``texts``; raises :class:`InvalidTeachPairError`."""
        if isinstance(item, TeachPair):
            pair = item
        elif isinstance(item, Mapping):
            unknown = set(item) - {"question", "chunk_ids", "doc_ids", "texts"}
            if unknown:
                raise InvalidTeachPairError(f"{where}unknown field(s) {sorted(unknown)}")
            pair = cls(
                item.get("question"),  # type: ignore[arg-type]
                *(_strings(item.get(k, ()), k, where) for k in ("chunk_ids", "doc_ids", "texts")),
            )
        else:
            raise InvalidTeachPairError(f"{where}a teach pair must be a mapping, got {item!r}")
        if not isinstance(pair.question, str) or not pair.question.strip():
            raise InvalidTeachPairError(f"{where}the question must be a non-empty string")
        try:  # the checks a retrieval makes (NUL, lone surrogate, length), before any write
            arguments.query(pair.question)
        except InvalidQueryError as exc:
            raise InvalidTeachPairError(f"{where}{exc}") from exc
        if not (pair.chunk_ids or pair.doc_ids or pair.texts):
            raise InvalidTeachPairError(f"{where}no chunk_ids, doc_ids or texts given")
        return pair


Pairs = Iterable[TeachPair | Mapping[str, Any]]


def _strings(value: Any, name: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        raise InvalidTeachPairError(f"{where}{name} must be a list of strings")
    if not all(isinstance(v, str) and v.strip() for v in value):
        raise InvalidTeachPairError(f"{where}{name} must hold non-empty strings")
    return tuple(value)


@dataclass(frozen=True)
class TeachResult:
    """What teaching one pair did: the passages found in the corpus, the ones that now come
    back in the top ``k`` for the question (``reached``), the ones that still do not
    (``unreachable``: e.g. more passages than ``k``), the names not found in the corpus, the
    edges enhanced and the learned edges made."""

    question: str
    chunks: list[str]
    reached: list[str]
    unreachable: list[str]
    not_found: list[str]
    enhanced: int
    linked: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TeachReport:
    """The result of :meth:`ReMindRAG.teach`: one :class:`TeachResult` per pair, in order."""

    results: list[TeachResult] = field(default_factory=list)

    @property
    def pairs(self) -> int:
        return len(self.results)

    @property
    def taught(self) -> int:
        """Pairs whose every passage was found and now comes back in the top ``k``."""
        return sum(1 for r in self.results if r.reached and not (r.unreachable or r.not_found))

    @property
    def problems(self) -> list[TeachResult]:
        """Pairs with a passage not found in the corpus or not coming back in the top k."""
        return [r for r in self.results if r.unreachable or r.not_found or not r.reached]

    def summary(self) -> str:
        lines = [f"taught {self.taught} of {self.pairs} pairs"]
        for r in self.problems:
            what = [f"not found: {x[:60]!r}" for x in r.not_found]
            what += [f"not in the top k: {c}" for c in r.unreachable]
            lines.append(f"  {r.question[:70]!r}: " + "; ".join(what))
        return "\n".join(lines)


def doc_chunks(store: GraphStore, doc_id: str) -> list[str]:
    """Every chunk id of a document, in order ([] when the store does not hold it)."""
    return [c.id for c in store.document_chunks(doc_id)]


def _fold(text: str) -> str:
    return " ".join(text.lower().split())


def locate_text(store: GraphStore, text: str, vec: np.ndarray) -> list[str]:
    """Chunks containing ``text`` (case and whitespace ignored), among the anchors nearest to
    its embedding."""
    want = _fold(text)
    hits = store.search(vec, TEXT_CANDIDATES, ("anchor",))
    return [c for c in (chunk_of(a) for a, _ in hits) if want in _fold(store.get_chunk(c).text)]


def resolve(
    store: GraphStore, pair: TeachPair, located: Mapping[str, list[str]]
) -> tuple[list[str], list[str]]:
    """(chunk ids, names that were not found) for one pair."""
    chunks: dict[str, None] = {}
    missing: list[str] = []
    for cid in pair.chunk_ids:
        try:
            if not is_chunk(cid):
                raise UnknownNodeError(cid)
            store.get_chunk(cid)
            chunks[cid] = None
        except UnknownNodeError:
            missing.append(cid)
    for name, found in [(d, doc_chunks(store, d)) for d in pair.doc_ids] + [
        (t, located[t]) for t in pair.texts
    ]:
        chunks.update(dict.fromkeys(found))
        if not found:
            missing.append(name)
    return list(chunks), missing


def teach_one(
    store: GraphStore, requery: Requery, pair: TeachPair, chunks: list[str], cfg: RetrievalConfig
) -> Step:
    """Ask the question, write the paths from its subgraph to ``chunks``, check they come
    back: the pair's :class:`TeachResult` (without the names not found). The write is one
    atomic update: a passage deleted or edited by another caller before it lands makes the
    pair write nothing (its chunks reported as not found, the next pairs taught as usual);
    one changed after it keeps the write (:func:`.assure.assure`)."""
    if not chunks:
        return TeachResult(pair.question, [], [], [], [], 0)
    try:
        r = yield from requery(pair.question)
        trace = r.trace
        done = write(
            trace, store, Support(chunks), penalise=False, max_depth=cfg.memory.max_bridge_hops
        )
    except UnknownNodeError:  # a passage deleted or edited since it was resolved: no write
        return TeachResult(pair.question, [], [], [], list(chunks), 0)
    q = np.asarray(trace.query_embedding, dtype=np.float32)
    done = yield from assure(store, requery, pair.question, q, done, chunks)
    reached = [c for c in chunks if c not in done.not_found]
    return TeachResult(
        pair.question, chunks, reached, list(done.not_found), [], len(done.enhanced), done.linked
    )


def teach(
    store: GraphStore,
    requery: Requery,
    items: Pairs,
    cfg: RetrievalConfig,
    progress: ProgressFn | None = None,
) -> Step:
    """The teach step: validates every pair first (a bad one raises before anything is
    written), finds the passages named by text, then teaches pair by pair; ``requery`` asks
    a question as a user would (:data:`.assure.Requery`)."""
    pairs = [TeachPair.of(p, f"pair {i + 1}: ") for i, p in enumerate(items)]
    texts = list(dict.fromkeys(t for p in pairs for t in p.texts))
    tvecs = (yield Embed(tuple(texts))) if texts else []
    located = {t: locate_text(store, t, v) for t, v in zip(texts, tvecs)}
    results = []
    for i, pair in enumerate(pairs):
        chunks, missing = resolve(store, pair, located)
        result = yield from teach_one(store, requery, pair, chunks, cfg)
        results.append(replace(result, not_found=[*missing, *result.not_found]))
        if progress:
            progress(i + 1, len(pairs))
    return TeachReport(results)


def read_pairs(lines: Sequence[str], where: str = "") -> list[TeachPair]:
    """Teach pairs from JSON lines (blank lines skipped); raises
    :class:`InvalidTeachPairError` naming the first bad line."""
    import json

    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidTeachPairError(f"{where}line {n}: not JSON ({exc.msg})") from None
        out.append(TeachPair.of(item, f"{where}line {n}: "))
    return out
