"""Cold start stays cold-cheap: what a fresh process imports, asserted on ``sys.modules`` in
subprocesses (never on time; ``benchmarks/cold_start.py`` measures time)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from remindrag_integrations import ReMindRetriever
from remindrag_integrations.adapters.embeddings import packaged_model_path
from remindrag_integrations.adapters.onnx_embedder import export

ROOT = Path(__file__).resolve().parents[1]

# Neither framework, no model runtime, no optional library: the engine alone needs none.
HEAVY = (
    "langchain_core",
    "langchain",
    "langsmith",
    "llama_index",
    "sqlalchemy",
    "torch",
    "transformers",
    "sentence_transformers",
    "huggingface_hub",
    "onnxruntime",
    "onnx",
    "tokenizers",
    "networkx",
    "tqdm",
    "nltk",
    "tiktoken",
    "psycopg",
    "matplotlib",
    "llama_cpp",
)
# The framework modules ReMindRetriever subclasses or converts to; importing it may add
# nothing else outside this package (filelock: the stores' lock file, pure Python).
FRAMEWORK = (
    "langchain_core.callbacks",
    "langchain_core.documents",
    "langchain_core.embeddings.embeddings",
    "langchain_core.indexing.base",  # ReMindRetriever is a DocumentIndex
    "langchain_core.retrievers",
    "langchain_core.vectorstores.base",  # as_vectorstore()'s class
    "llama_index.core.retrievers",
    "llama_index.core.schema",
    "llama_index.core.vector_stores.types",
    "llama_index.core.base.response.schema",
    "llama_index.core.instrumentation.event_handlers",
    "llama_index.core.instrumentation.events.synthesis",
)
MODEL_RUNTIMES = ("torch", "transformers", "sentence_transformers", "huggingface_hub")


def fresh(code: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter (this checkout first on the path); it prints one
    JSON line, returned here."""
    full = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", **env}
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def loaded(names: tuple[str, ...]) -> str:
    return f"print(__import__('json').dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(names)!r})))"


def test_importing_the_package_loads_no_framework_and_no_model_runtime():
    got = fresh("import sys, remindrag_integrations\n" + loaded(HEAVY))
    assert got == []


def test_the_retriever_adds_only_its_own_modules_to_the_frameworks_it_subclasses():
    code = (
        "import importlib, json, sys\n"
        f"for m in {FRAMEWORK!r}: importlib.import_module(m)\n"
        "before = set(sys.modules)\n"
        "from remindrag_integrations import ReMindRetriever\n"
        "extra = {m for m in set(sys.modules) - before\n"
        "         if not m.startswith('remindrag_integrations')\n"
        "         and m.split('.')[0] not in ('filelock', 'sqlite3', '_sqlite3')}\n"
        "print(json.dumps(sorted(extra)))"
    )
    assert fresh(code) == []


def test_first_results_on_the_default_embedder_never_import_torch(tmp_path: Path):
    export(packaged_model_path())  # the one-time export (cached; it needs torch)
    store = tmp_path / "store"
    ReMindRetriever.from_texts(["Marie Curie worked in Paris.", "Paris is in France."]).save(store)
    code = (
        "import json, sys\n"
        "from remindrag_integrations import ReMindRetriever\n"
        "q = 'Where did Marie Curie work?'\n"
        "new = ReMindRetriever.from_texts(['Marie Curie worked in Paris.', 'Rome is in Italy.'])\n"
        f"saved = ReMindRetriever.load({str(store)!r})\n"
        "docs = [new.invoke(q)[0].page_content, saved.invoke(q)[0].page_content]\n"
        f"runtimes = sorted({{m.split('.')[0] for m in sys.modules}} & {set(MODEL_RUNTIMES)!r})\n"
        "print(json.dumps([docs, runtimes, 'onnxruntime' in sys.modules]))"
    )
    docs, runtimes, on_onnx = fresh(code, REMINDRAG_EMBEDDER_BACKEND="")
    assert docs == ["Marie Curie worked in Paris.", "Marie Curie worked in Paris."]
    assert runtimes == []
    assert on_onnx


def test_the_framework_faces_still_load_on_first_use():
    got = fresh(
        "import json, sys, remindrag_integrations as r\n"
        "lc = r.ReMindMemoryCallback.__module__, 'llama_index' in sys.modules\n"
        "li = r.ReMindMemoryEventHandler.__module__, 'llama_index' in sys.modules\n"
        "print(json.dumps([lc, li]))"
    )
    assert got == [
        ["remindrag_integrations.faces.langchain.callbacks", False],
        ["remindrag_integrations.faces.llama_index.events", True],
    ]


def test_the_command_line_answers_without_importing_a_framework(tmp_path: Path):
    export(packaged_model_path())
    (tmp_path / "a.txt").write_text("Marie Curie worked in Paris.\n", encoding="utf-8")
    (tmp_path / "b.txt").write_text("Rome is in Italy.\n", encoding="utf-8")
    store = str(tmp_path / "store")
    code = (
        "import contextlib, io, json, sys\n"
        "from remindrag_integrations.app.cli import main\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    main(['index', {str(tmp_path)!r}, '--store', {store!r}])\n"
        f"    main(['ask', 'Where did Marie Curie work?', '--store', {store!r}, '--json'])\n"
        "answer = json.loads(out.getvalue()[out.getvalue().index('{'):])\n"
        f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY) - {'onnxruntime', 'tokenizers', 'tqdm'}!r})\n"
        "print(json.dumps([answer['passages'][0]['text'], heavy]))"
    )
    text, heavy = fresh(code, REMINDRAG_EMBEDDER_BACKEND="")
    assert text == "Marie Curie worked in Paris."
    assert heavy == []


def test_the_first_query_after_an_insert_does_not_import_the_lexical_index():
    """bm25s (and SciPy's sparse module) is imported by the store's first write of chunks,
    not by the first query (~0.2 s, which was the p95 of small benchmark sets)."""
    code = (
        "import json, sys\n"
        "from remindrag_integrations import ReMindRAG\n"
        "from remindrag_integrations.testing import HashEmbedder\n"
        "rag = ReMindRAG(embeddings=HashEmbedder(16))\n"
        "made = 'bm25s' in sys.modules\n"
        "rag.insert(['Marie Curie worked in Paris.', 'Paris is in France.'])\n"
        "written = 'bm25s' in sys.modules\n"
        "before = set(sys.modules)\n"
        "rag.retrieve('Where did Marie Curie work?')\n"
        "print(json.dumps([made, written, sorted(m for m in set(sys.modules) - before\n"
        "                  if m.split('.')[0] in ('bm25s', 'scipy'))]))"
    )
    assert fresh(code) == [False, True, []]
