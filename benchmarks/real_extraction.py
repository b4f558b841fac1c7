"""LLM extraction with a real model on the first N gold passages of a set: entities,
relations and LLM tokens per source token (the paper reports 2.64 with GPT-4o-mini).

    python benchmarks/real_extraction.py --set hotpotqa_train100 --llm local:qwen2.5-1.5b -n 10
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from remindrag_integrations.adapters.llm import as_chat_llm
from remindrag_integrations.adapters.llm_specs import load_llm
from remindrag_integrations.adapters.local_llm import LlamaCppChatModel

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: benchmarks.harness
from benchmarks.harness.data import load_dataset  # noqa: E402
from benchmarks.harness.real import PrefixLog, measure_extraction  # noqa: E402
from benchmarks.harness.resources import make_embedder  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default="../shared/datasets")
    p.add_argument("--set", dest="set_name", default="hotpotqa_train100")
    p.add_argument("--llm", default="local:qwen2.5-1.5b")
    p.add_argument("-n", type=int, default=10)
    p.add_argument("--max-tokens", type=int, default=512, help="room for a whole extraction")
    args = p.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    model = load_llm(args.llm)
    if isinstance(model, LlamaCppChatModel):
        model = model.model_copy(update={"max_tokens": args.max_tokens})
    log = PrefixLog(as_chat_llm(model), args.llm, lambda s: print(s, flush=True))
    ds = load_dataset(args.set_name, args.data)
    out = measure_extraction(ds, log, make_embedder("minilm"), args.n)
    print(json.dumps({"set": args.set_name, "llm": args.llm, **out}, indent=1))


if __name__ == "__main__":
    main()
