"""What real apps send, the frameworks' indexing idioms (issue 45; RESULTS §13): a folder kept in
sync by LangChain's ``index()``, children that name their parent, documents without ids.

    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/app_shapes_idioms.py --data ../shared/datasets \\
        --label after --out benchmarks/results/app_shapes_idioms.json

Real passages (the first ``--docs`` rows of the set's corpus, each a document: title line, text),
the packaged embedder, no LLM. Where the code measured lacks an idiom (the code before issue 45),
the app does what it had to: ``add_documents`` instead of ``index()`` (a removed file is never
deleted), each child added on its own, documents without ids added as they come. Shapes:

- **index()**: each document a file (``source``) split by ``RecursiveCharacterTextSplitter``
  (``--chunk-size``); ``--rounds`` rounds each edit a seeded third (a sentence inserted at a
  sentence boundary) and remove a seeded tenth, then ``index(..., cleanup="full")`` (an
  ``InMemoryRecordManager``). Counted: **stale** stored pieces (text of a superseded version or of
  a removed file), **stale returned** (a retrieval for a document's title returning such a
  piece), **duplicates** (two stored documents with one text), and the texts embedded by a
  re-run with nothing changed.
- **children**: each document's sentences (``RecursiveCharacterTextSplitter``, 160 characters)
  as children with ``metadata["doc_id"]`` = the document, added one at a time and all in one
  call. Counted: **lost children** (given, not stored) and calls refused.
- **without ids**: LlamaIndex ``Document(text=...)`` with no ``id_``, split by
  ``SentenceSplitter``, ingested three times, the third with a third edited; LangChain
  documents with neither id nor source split at 200 then, edited, at 400. Counted: stored
  **duplicates** and **silent second versions** (an edit stored beside its old version with
  no error), edits refused with a typed error, and distinct passages without ids (the other
  half of the corpus, added one by one after the first) **refused by mistake**.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.indexing import DocumentIndex, InMemoryRecordManager, index
from langchain_text_splitters import RecursiveCharacterTextSplitter
from llama_index.core import Document as LIDocument
from llama_index.core.node_parser import SentenceSplitter

from remindrag_integrations import ReMindRetriever
from remindrag_integrations.errors import InvalidDocumentError

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import load_dataset  # noqa: E402
from benchmarks.harness.resources import machine  # noqa: E402


class Counting:
    """The packaged embedder (or the hash one), counting the texts it embeds."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.texts = inner, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Any) -> Any:
        texts = list(texts)
        self.texts += len(texts)
        return self.inner.embed(texts)


def embedder(kind: str) -> Any:
    if kind == "hash":
        from remindrag_integrations.testing import HashEmbedder

        return HashEmbedder()
    from remindrag_integrations.adapters.embeddings import default_embedder

    return default_embedder()


def stored_texts(r: ReMindRetriever) -> list[str]:
    store = r.engine.store
    return [c.text for d in store.document_ids() for c in store.document_chunks(d)]


def stored_pieces(r: ReMindRetriever) -> list[tuple[str, str]]:
    """Each stored chunk as (its file, its text): one piece of one file stored twice shows."""
    store = r.engine.store
    return [
        (str(c.metadata.get("source")), c.text)
        for d in store.document_ids()
        for c in store.document_chunks(d)
    ]


def revise(text: str, rnd: int, rng: random.Random) -> str:
    """``text`` with a neutral sentence inserted at a random sentence boundary."""
    cuts = [m.end() for m in re.finditer(r"[.!?] ", text)] or [len(text)]
    at = rng.choice(cuts)
    return f"{text[:at]}This passage was revised in round {rnd} of the review. {text[at:]}"


def folder_shape(docs: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    emb = Counting(embedder(args.embedder))
    r = ReMindRetriever.from_documents([], embeddings=emb, k=5)
    rm = InMemoryRecordManager("folder")
    rm.create_schema()
    splitter = RecursiveCharacterTextSplitter(chunk_size=args.chunk_size, chunk_overlap=0)
    files, old_texts = dict(docs), set()
    native = isinstance(r, DocumentIndex)

    def pieces() -> list[Document]:
        return splitter.split_documents(
            [Document(page_content=t, metadata={"source": f"{p}.txt"}) for p, t in files.items()]
        )

    def sync(changed: set[str] | None) -> None:
        if native:
            index(pieces(), rm, r, cleanup="full", source_id_key="source", key_encoder="sha256")
        else:  # the workaround: add what changed (replaced by its source), nothing deleted
            given = pieces()
            r.add_documents(
                given
                if changed is None
                else [d for d in given if d.metadata["source"][:-4] in changed]
            )

    sync(None)
    before = emb.texts
    sync(set())
    rerun_embedded = emb.texts - before
    rows = []
    for rnd in range(1, args.rounds + 1):
        ids = sorted(files)
        edited = set(rng.sample(ids, len(ids) // 3))
        removed = set(rng.sample(sorted(set(ids) - edited), len(ids) // 10))
        for p in edited:
            old_texts |= {
                d.page_content for d in splitter.split_documents([Document(page_content=files[p])])
            }
            files[p] = revise(files[p], rnd, rng)
        for p in removed:
            old_texts |= {
                d.page_content
                for d in splitter.split_documents([Document(page_content=files.pop(p))])
            }
        current = {d.page_content for d in pieces()}
        sync(edited)
        texts = stored_texts(r)
        placed = stored_pieces(r)
        stale = [t for t in texts if t in old_texts and t not in current]
        returned = 0
        for p in sorted(files)[: args.questions] + sorted(removed):
            title = docs[p].split("\n", 1)[0]
            returned += sum(
                1
                for d in r.invoke(title)
                if d.page_content in old_texts and d.page_content not in current
            )
        rows.append(
            {
                "round": rnd,
                "edited": len(edited),
                "removed": len(removed),
                "stored_pieces": len(texts),
                "stale_stored": len(stale),
                "stale_returned": returned,
                "duplicates": len(placed) - len(set(placed)),
            }
        )
    return {"native_index": native, "rerun_embedded_texts": rerun_embedded, "rounds": rows}


def children_shape(
    docs: dict[str, str], one_call: bool, args: argparse.Namespace
) -> dict[str, Any]:
    r = ReMindRetriever.from_documents([], embeddings=embedder(args.embedder))
    splitter = RecursiveCharacterTextSplitter(chunk_size=160, chunk_overlap=0)
    children = [
        Document(page_content=c.page_content, metadata={"doc_id": p})
        for p, t in docs.items()
        for c in splitter.split_documents([Document(page_content=t)])
    ]
    refused = 0
    calls = [children] if one_call else [[c] for c in children]
    for call in calls:
        try:
            r.add_documents(call)
        except InvalidDocumentError:
            refused += 1
    stored = set(stored_texts(r))
    lost = sum(1 for c in children if c.page_content not in stored)
    return {"children": len(children), "lost": lost, "calls_refused": refused}


def idless_shape(docs: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed + 1)
    out: dict[str, Any] = {}
    # LlamaIndex: Document(text=...) without id_, SentenceSplitter, three ingestions
    r = ReMindRetriever.from_documents([], embeddings=embedder(args.embedder))
    splitter = SentenceSplitter(chunk_size=96, chunk_overlap=0)
    texts = dict(docs)
    refused = 0
    edited: set[str] = set()
    refused_unedited = 0
    # the first reading in one call (an IngestionPipeline's output), then twice per document
    r.add_documents(splitter.get_nodes_from_documents([LIDocument(text=t) for t in texts.values()]))
    for rnd in (1, 2):
        if rnd == 2:
            edited = set(rng.sample(sorted(texts), len(texts) // 3))
            for p in edited:
                texts[p] = revise(texts[p], rnd, rng)
        for p, t in texts.items():
            try:
                r.add_documents(splitter.get_nodes_from_documents([LIDocument(text=t)]))
            except InvalidDocumentError:
                refused += 1
                refused_unedited += p not in edited
    stored = len(r.engine.store.document_ids())
    out["llamaindex"] = {
        "documents_given": len(texts),
        "edited": len(edited),
        "stored_documents": stored,
        "duplicates": max(0, stored - len(texts)),
        "edits_refused": refused - refused_unedited,
        "unedited_refused": refused_unedited,
    }
    # LangChain: neither id nor source, split at 200, then edited and split at 400
    r = ReMindRetriever.from_documents([], embeddings=embedder(args.embedder))
    small = RecursiveCharacterTextSplitter(chunk_size=200, chunk_overlap=0)
    large = RecursiveCharacterTextSplitter(chunk_size=400, chunk_overlap=0)
    refused, silent = 0, 0
    # the first reading in one call, as an app adds a loader's split output
    r.add_documents(small.split_documents([Document(page_content=t) for t in docs.values()]))
    for t in docs.values():
        old = {d.page_content for d in small.split_documents([Document(page_content=t)])}
        second = large.split_documents([Document(page_content=revise(t, 1, rng))])
        try:
            r.add_documents(second)
        except InvalidDocumentError:
            refused += 1
            continue
        kept = set(stored_texts(r))
        silent += bool(old & kept)  # stored beside its old version, no error
    out["langchain_resplit"] = {
        "documents_given": len(docs),
        "silent_second_versions": silent,
        "edits_refused": refused,
    }
    # distinct real passages, without ids, added in two halves: refused by mistake?
    r = ReMindRetriever.from_documents([], embeddings=embedder(args.embedder))
    pids = sorted(texts)
    half = len(pids) // 2
    r.add_documents([Document(page_content=docs[p]) for p in pids[:half]])
    wrongly = 0
    for p in pids[half:]:
        try:
            r.add_documents([Document(page_content=docs[p])])
        except InvalidDocumentError:
            wrongly += 1
    out["distinct_refused"] = {"documents_given": len(pids) - half, "refused": wrongly}
    return out


def table(s: dict[str, Any]) -> str:
    f = s["folder"]
    last = f["rounds"][-1]
    lines = [
        f"| shape ({s['label']}) | counted | value |",
        "|---|---|---|",
        f"| index(), {len(f['rounds'])} rounds | stale pieces stored / returned (last round) | {last['stale_stored']} / {last['stale_returned']} |",
        f"| index() | a file's piece stored twice | {last['duplicates']} |",
        f"| index(), nothing changed | texts embedded on the re-run | {f['rerun_embedded_texts']} |",
    ]
    for name in ("children_one_by_one", "children_one_call"):
        c = s[name]
        lines.append(
            f"| {name.replace('_', ' ')} | children lost (of {c['children']}) / calls refused | {c['lost']} / {c['calls_refused']} |"
        )
    li, lc = s["idless"]["llamaindex"], s["idless"]["langchain_resplit"]
    lines.append(
        f"| LlamaIndex without id_, 3 ingestions, {li['edited']} edited | duplicates stored / edits refused / unedited refused | {li['duplicates']} / {li['edits_refused']} / {li.get('unedited_refused', 0)} |"
    )
    lines.append(
        f"| LangChain without id or source, re-split edited | silent second versions / edits refused | {lc['silent_second_versions']} / {lc['edits_refused']} |"
    )
    dr = s["idless"]["distinct_refused"]
    lines.append(
        f"| distinct passages without ids, added after others | refused by mistake (of {dr['documents_given']}) | {dr['refused']} |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default="../shared/datasets")
    p.add_argument("--set", default="musique_train100")
    p.add_argument("--docs", type=int, default=60)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--questions", type=int, default=20, help="title queries a round")
    p.add_argument("--chunk-size", type=int, default=300)
    p.add_argument("--embedder", choices=("default", "hash"), default="default")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--label", default="")
    p.add_argument("--out", default="benchmarks/results/app_shapes_idioms.json")
    args = p.parse_args(argv)
    ds = load_dataset(args.set, args.data)
    rows = list(ds.corpus.values())[: args.docs]
    docs = {r["pid"]: f"{r['title']}\n{r['text']}" for r in rows}
    t0 = time.perf_counter()
    summary = {
        "kind": "app_shapes_idioms",
        "label": args.label,
        "set": args.set,
        "docs": len(docs),
        "embedder": args.embedder,
        "folder": folder_shape(docs, args),
        "children_one_by_one": children_shape(docs, False, args),
        "children_one_call": children_shape(docs, True, args),
        "idless": idless_shape(docs, args),
        "seconds": round(time.perf_counter() - t0, 1),
        "machine": machine(),
        "command": " ".join(["benchmarks/app_shapes_idioms.py", *(argv or sys.argv[1:])]),
    }
    print(table(summary))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
