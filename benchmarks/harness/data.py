"""Load the normalised benchmark files (``<set>.questions.jsonl``, ``.corpus.jsonl``,
``.variants.jsonl``; format in the datasets' README) and turn corpus rows into documents."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remindrag_integrations.core.types import Document

DEFAULT_DATA_DIR = Path(os.environ.get("REMINDRAG_BENCH_DATA", "../shared/datasets"))


@dataclass(frozen=True)
class Dataset:
    """One benchmark set: questions, corpus rows by pid, and query variants."""

    name: str
    questions: list[dict[str, Any]]
    corpus: dict[str, dict[str, Any]]
    variants: list[dict[str, Any]] = field(default_factory=list)

    @property
    def long_document(self) -> bool:
        """Rows are whole documents (LooGLE, QuALITY), not passages."""
        return any("doc_id" in q for q in self.questions)

    def head(self, n: int | None) -> Dataset:
        """The first ``n`` questions, their variants, and the whole corpus."""
        if n is None:
            return self
        qs = self.questions[:n]
        keep = {q["qid"] for q in qs}
        return Dataset(self.name, qs, self.corpus, [v for v in self.variants if v["qid"] in keep])

    def document(self, pid: str) -> Document:
        return row_document(self.corpus[pid], with_title=not self.long_document)

    def documents(self, pids: list[str] | None = None) -> list[Document]:
        return [self.document(p) for p in (pids if pids is not None else list(self.corpus))]


def row_document(row: dict[str, Any], with_title: bool = True) -> Document:
    """A corpus row as a document: ``title`` on its own line above the passage (for multi-hop
    sets the title is the Wikipedia page name, which every method gets to see)."""
    text = row["text"]
    if with_title and row.get("title"):
        text = f"{row['title']}\n{text}"
    return Document(id=row["pid"], text=text, metadata={"title": row.get("title", "")})


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_dataset(name: str, data_dir: str | os.PathLike[str] | None = None) -> Dataset:
    """Load ``<data_dir>/<name>.{questions,corpus,variants}.jsonl`` (variants optional)."""
    root = Path(data_dir) if data_dir is not None else DEFAULT_DATA_DIR
    qpath, cpath = root / f"{name}.questions.jsonl", root / f"{name}.corpus.jsonl"
    for p in (qpath, cpath):
        if not p.exists():
            raise FileNotFoundError(f"no benchmark file {p} (set --data DIR)")
    vpath = root / f"{name}.variants.jsonl"
    corpus = {r["pid"]: r for r in read_jsonl(cpath)}
    variants = read_jsonl(vpath) if vpath.exists() else []
    return Dataset(name, read_jsonl(qpath), corpus, variants)
