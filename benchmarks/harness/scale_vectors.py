"""Node vectors for the synthetic scale graphs (:mod:`.scale`): i.i.d. random unit vectors,
or unit vectors drawn from Gaussians with the mean and covariance of real MiniLM vectors."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np


def minilm_moments(corpus: str | os.PathLike[str], cache_dir: str | os.PathLike[str]) -> Path:
    """Fit the ``minilm`` embeddings: embed a corpus file's passages (``text`` of each JSONL
    row, its ``title`` above it as the bench does) and the offline extractor's entity names
    with the packaged MiniLM, and save the mean and covariance of each set as an ``.npz`` in
    ``cache_dir`` (named by the corpus's content; reused when present). Returns its path."""
    from remindrag_integrations.adapters.embeddings import default_embedder
    from remindrag_integrations.core.extract_rules import rule_based_extraction

    from .data import read_jsonl, row_document

    raw = Path(corpus).read_bytes()
    path = Path(cache_dir) / f"minilm-moments-{hashlib.sha1(raw).hexdigest()[:12]}.npz"
    if path.exists():
        return path
    passages = [row_document(r).text for r in read_jsonl(Path(corpus))]
    names = sorted({e for t in passages for e in rule_based_extraction(t).entities})
    embedder = default_embedder()
    fitted = {}
    for label, texts in (("entity", names), ("passage", passages)):
        vecs = np.asarray(embedder.embed(texts), np.float64)
        if len(vecs) <= vecs.shape[1]:
            raise ValueError(f"{corpus}: {len(vecs)} {label} vectors cannot fit a covariance")
        fitted[f"{label}_mean"] = vecs.mean(axis=0)
        fitted[f"{label}_cov"] = np.cov(vecs, rowvar=False)
        fitted[f"{label}_n"] = np.asarray(len(vecs))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **fitted)
    return path


def synthetic_embeddings(
    n_nodes: int, dim: int, seed: int = 0, moments: str | None = None, n_entities: int = 0
) -> np.ndarray:
    """The float32 unit vectors :func:`.scale.synthetic_graph` gives its nodes, in node order:
    i.i.d. random, or with ``moments`` (a :func:`minilm_moments` file) the first
    ``n_entities`` rows from the entity-name Gaussian and the rest from the passage one."""
    rng = np.random.default_rng([seed, 1])
    if moments is None:
        emb = rng.standard_normal((n_nodes, dim), dtype=np.float32)
    else:
        with np.load(moments) as z:
            parts = []
            for label, n in (("entity", n_entities), ("passage", n_nodes - n_entities)):
                mean, cov = z[f"{label}_mean"], z[f"{label}_cov"]
                if len(mean) != dim:
                    raise ValueError(f"{moments} holds {len(mean)}-dimensional moments, not {dim}")
                vals, vecs = np.linalg.eigh(cov)  # cov = V diag(vals) V^T
                root = (vecs * np.sqrt(np.clip(vals, 0.0, None))).astype(np.float32)
                z_rows = rng.standard_normal((n, dim), dtype=np.float32)
                parts.append(z_rows @ root.T + mean.astype(np.float32))
        emb = np.concatenate(parts)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return emb
