"""``python -m benchmarks.harness prepare``: the public multi-hop QA files, as downloaded, into the benchmark
format (``<name>.questions.jsonl`` + ``<name>.corpus.jsonl``) that ``bench run`` / ``curve``
read with ``--data DIR``.

Accepted inputs, in their original formats:

- HotpotQA (``hotpot_dev_distractor_v1.json``): a JSON list of ``{_id, question, answer,
  type, level, supporting_facts: [[title, sentence no.]], context: [[title, [sentences]]]}``;
- MuSiQue (``musique_ans_v1.0_dev.jsonl``): one JSON object a line, ``{id, question, answer,
  answer_aliases, answerable, paragraphs: [{idx, title, paragraph_text, is_supporting}],
  question_decomposition: [{question, answer, paragraph_support_idx}]}``; unanswerable
  questions are left out;
- 2WikiMultihopQA (``dev.json``): a JSON list like HotpotQA's (``evidences`` instead of
  ``level``).

A passage's ``pid`` is ``title#`` + 8 hex digits of its text, so the same passage shared by
several questions is one corpus row.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

FORMATS = ("hotpotqa", "musique", "2wiki")


class PrepareError(ValueError):
    """An input file that is not one of the accepted formats."""


def pid_of(title: str, text: str) -> str:
    return f"{title}#{hashlib.sha1(text.encode('utf-8')).hexdigest()[:8]}"


def detect(path: Path) -> str:
    """The format of ``path``: MuSiQue is JSON lines; a JSON list is 2Wiki when its items
    carry ``evidences``, else HotpotQA."""
    with open(path, encoding="utf-8") as f:
        head = f.read(1 << 16).lstrip()
    if head.startswith("{"):
        return "musique"
    if head.startswith("["):
        return "2wiki" if '"evidences"' in head else "hotpotqa"
    raise PrepareError(f"{path}: not a HotpotQA / 2Wiki JSON list or a MuSiQue JSON-lines file")


def _wiki_rows(item: dict[str, Any], dataset: str) -> tuple[dict[str, Any], list[dict]]:
    """One HotpotQA / 2Wiki item (same shape) as a question and its passages."""
    rows, by_title = [], {}
    for title, sentences in item["context"]:
        text = " ".join(s.strip() for s in sentences if s.strip())
        row = {"pid": pid_of(title, text), "title": title, "text": text}
        rows.append(row)
        by_title[title] = (row["pid"], [s.strip() for s in sentences])
    gold_pids, gold_sentences = [], []
    for title, n in item["supporting_facts"]:
        if title not in by_title:
            continue
        pid, sentences = by_title[title]
        if pid not in gold_pids:
            gold_pids.append(pid)
        if 0 <= n < len(sentences):
            gold_sentences.append(sentences[n])
    extra = {k: item[k] for k in ("level", "evidences") if k in item}
    question = {
        "qid": str(item["_id"]),
        "dataset": dataset,
        "question": item["question"],
        "answers": [str(item["answer"])],
        "type": item.get("type", ""),
        "gold_pids": gold_pids,
        "gold_sentences": gold_sentences,
        "context_pids": [r["pid"] for r in rows],
        "extra": extra,
    }
    return question, rows


def _musique_rows(item: dict[str, Any]) -> tuple[dict[str, Any], list[dict]]:
    rows = []
    for p in item["paragraphs"]:
        text = p["paragraph_text"].strip()
        rows.append({"pid": pid_of(p["title"], text), "title": p["title"], "text": text})
    by_idx = {p["idx"]: r["pid"] for p, r in zip(item["paragraphs"], rows)}
    decomposition = [
        {
            "question": step["question"],
            "answer": step["answer"],
            "gold_pid": by_idx.get(step.get("paragraph_support_idx")),
        }
        for step in item.get("question_decomposition", [])
    ]
    question = {
        "qid": str(item["id"]),
        "dataset": "musique",
        "question": item["question"],
        "answers": [str(item["answer"]), *map(str, item.get("answer_aliases", []))],
        "type": str(item["id"]).split("__")[0],
        "gold_pids": [r["pid"] for p, r in zip(item["paragraphs"], rows) if p["is_supporting"]],
        "gold_sentences": [],
        "context_pids": [r["pid"] for r in rows],
        "extra": {"decomposition": decomposition},
    }
    return question, rows


def _items(path: Path, fmt: str) -> Iterator[dict[str, Any]]:
    try:
        if fmt == "musique":
            with open(path, encoding="utf-8") as f:
                yield from (json.loads(line) for line in f if line.strip())
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, list):
                raise PrepareError(f"{path}: expected a JSON list of questions")
            yield from data
    except json.JSONDecodeError as exc:
        raise PrepareError(f"{path}: not valid JSON ({exc})") from exc


def convert(
    items: Iterable[dict[str, Any]], fmt: str, limit: int | None = None
) -> tuple[list[dict], list[dict]]:
    """Questions and de-duplicated corpus rows from the items of one file."""
    questions: list[dict] = []
    corpus: dict[str, dict] = {}
    for item in items:
        if limit is not None and len(questions) >= limit:
            break
        if fmt == "musique" and not item.get("answerable", True):
            continue
        try:
            q, rows = _musique_rows(item) if fmt == "musique" else _wiki_rows(item, fmt)
        except (KeyError, TypeError, ValueError) as exc:
            raise PrepareError(f"question {len(questions) + 1}: not {fmt} format ({exc})") from exc
        questions.append(q)
        for r in rows:
            corpus.setdefault(r["pid"], r)
    return questions, list(corpus.values())


def prepare(
    source: str | Path,
    out_dir: str | Path,
    name: str,
    fmt: str = "auto",
    limit: int | None = None,
) -> tuple[Path, Path, int, int]:
    """Write ``<out_dir>/<name>.questions.jsonl`` and ``.corpus.jsonl`` from ``source``;
    returns both paths, the number of questions and of corpus rows."""
    path = Path(source)
    if not path.is_file():
        raise PrepareError(f"no such file: {path}")
    fmt = detect(path) if fmt == "auto" else fmt
    if fmt not in FORMATS:
        raise PrepareError(f"unknown format {fmt!r} (one of: auto, {', '.join(FORMATS)})")
    questions, corpus = convert(_items(path, fmt), fmt, limit)
    if not questions:
        raise PrepareError(f"{path}: no usable question")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    qpath, cpath = out / f"{name}.questions.jsonl", out / f"{name}.corpus.jsonl"
    for target, rows in ((qpath, questions), (cpath, corpus)):
        with open(target, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return qpath, cpath, len(questions), len(corpus)
