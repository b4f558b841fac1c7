"""LangChain's standard retriever integration tests, run against ReMindRetriever."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from remindrag_integrations import ReMindRAG, ReMindRetriever
from remindrag_integrations.testing import HashEmbedder

# the suite's one async test needs the asyncio mark (pytest-asyncio runs in strict mode);
# marking it where it is defined keeps the standard tests un-overridden
pytest.mark.asyncio(RetrieversIntegrationTests.test_ainvoke_returns_documents)

CORPUS = Path(__file__).parent / "data" / "hotpotqa_train100_sample.corpus.jsonl"


@cache
def _engine() -> ReMindRAG:
    """A zero-token engine over the HotpotQA sample corpus (built once)."""
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]
    engine = ReMindRAG(embeddings=HashEmbedder())
    engine.insert([(r["pid"], f"{r['title']}\n{r['text']}", {"title": r["title"]}) for r in rows])
    return engine


class TestReMindRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[ReMindRetriever]:
        return ReMindRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"engine": _engine()}

    @property
    def retriever_query_example(self) -> str:
        return "Which magazine was started first, Arthur's Magazine or First for Women?"
