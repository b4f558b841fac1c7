"""The house stands: the import graph by floor (``tools/import_floors.py``) keeps its rules,
and ARCHITECTURE.md draws the house the code builds."""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _floors() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_floors", ROOT / "tools/import_floors.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["import_floors"] = module
    spec.loader.exec_module(module)
    return module


floors = _floors()


@pytest.fixture(scope="module")
def package_edges() -> list:
    """The package's imports, read once for the tests that look at the package itself."""
    return floors.edges()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A toy package of the same name, with the same floors, to break the rules on."""
    root = tmp_path / "remindrag_integrations"
    for name in ("", "core", "stores", "app", *files):
        path = root / name if name.endswith(".py") else root / name / "__init__.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(files.get(name, ""), encoding="utf-8")
    return root


def test_the_package_keeps_every_rule(package_edges: list) -> None:
    assert floors.violations(package_edges) == []


def test_core_imports_nothing_above_it_not_even_lazily(package_edges: list) -> None:
    up = [e for e in package_edges if floors.floor(e.source) == 0 < floors.floor(e.target)]
    assert up == []


@pytest.mark.parametrize(
    "code, kind",
    [
        ("from ..stores import Store\n", "top"),
        ("def f():\n    from ..stores import Store\n    return Store\n", "lazy"),
        ("import remindrag_integrations.stores as s\n", "top"),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import stores\n",
            "type",
        ),
    ],
)
def test_a_core_module_reaching_up_is_caught(tmp_path: Path, code: str, kind: str) -> None:
    root = _package(tmp_path, {"core/walk.py": code})
    broken = floors.violations(floors.edges(root))
    assert broken and all(line.startswith("core imports a higher floor") for line in broken)
    assert "core.walk:" in broken[0] and f"-> stores ({kind})" in broken[0]


def test_an_import_circle_is_caught(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "stores/a.py": "def f():\n    from . import b\n",  # lazy imports close circles too
            "stores/b.py": "from .a import f\n",
        },
    )
    assert floors.violations(floors.edges(root)) == ["import circle: stores.a <-> stores.b"]


def test_a_circle_closed_by_a_type_only_import_is_a_circle_too(tmp_path: Path) -> None:
    """It cannot loop at run time, but a reader and a type checker walk it."""
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import f\n"
    root = _package(tmp_path, {"stores/a.py": "from .b import g\n", "stores/b.py": guarded})
    assert floors.violations(floors.edges(root)) == ["import circle: stores.a <-> stores.b"]


def test_inside_core_memory_does_not_reach_up_to_the_stages(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "core/pipeline.py": "",
            "core/memory/__init__.py": "",
            "core/memory/teach.py": "from .. import pipeline\n",
        },
    )
    broken = floors.violations(floors.edges(root))
    assert broken == ["core imports up a room: core.memory.teach:1 -> core.pipeline (top)"]


def test_a_face_part_reaching_up_to_the_retriever_is_caught(tmp_path: Path) -> None:
    """Inside ``faces`` the query climbs down from the retriever and never back: a part (or a
    framework's face) importing the retriever, even lazily, breaks the rule."""
    root = _package(
        tmp_path,
        {
            "faces/__init__.py": "",
            "faces/retriever.py": "from .results import x\nfrom .langchain import convert\n",
            "faces/results.py": "def f():\n    from .retriever import R\n",
            "faces/langchain/__init__.py": "",
            "faces/langchain/convert.py": "from ..retriever import R\n",
        },
    )
    broken = floors.violations(floors.edges(root))
    assert [b for b in broken if b.startswith("a face imports up a room")] == [
        "a face imports up a room: faces.langchain.convert:1 -> faces.retriever (top)",
        "a face imports up a room: faces.results:2 -> faces.retriever (lazy)",
    ]


def test_the_two_frameworks_faces_stand_side_by_side(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "faces/__init__.py": "",
            "faces/langchain/__init__.py": "",
            "faces/langchain/convert.py": "from ..llama_index import convert\n",
            "faces/llama_index/__init__.py": "",
            "faces/llama_index/convert.py": "",
        },
    )
    broken = floors.violations(floors.edges(root))
    assert broken and all(b.startswith("faces.langchain imports faces.llama_index") for b in broken)


def test_the_engine_never_imports_the_faces(tmp_path: Path) -> None:
    root = _package(tmp_path, {"faces/__init__.py": "", "engine.py": "from .faces import x\n"})
    assert floors.violations(floors.edges(root)) == ["import runs up: engine:1 -> faces (top)"]


@pytest.mark.parametrize(
    "code",
    [
        "def f():\n    from benchmarks.harness.cli import main\n",
        "import benchmarks.harness\n",
        "from benchmarks import harness\n",
    ],
)
def test_the_library_never_imports_the_benchmark_harness(tmp_path: Path, code: str) -> None:
    """The harness lives beside the package (``benchmarks/harness``): no floor imports it, not
    even the command line, not even lazily."""
    root = _package(tmp_path, {"app/cli.py": code})
    broken = floors.violations(floors.edges(root))
    assert len(broken) == 1 and broken[0].startswith("the library imports the benchmarks: app.cli:")
    assert "-> benchmarks" in broken[0] and "benchmarks" not in floors.mermaid(floors.edges(root))


def test_the_librarys_own_tests_never_import_the_harness() -> None:
    """Only the harness's own tests (tests/harness/) import ``benchmarks``; the library's
    tests get their helpers from the library or from tests/ (conftest.py's ``sample_set``,
    ``testing.synthetic_graph``)."""
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if "harness" in path.relative_to(ROOT / "tests").parts[:1]:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.match(r"\s*(from|import) benchmarks\b", line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []
    assert not (ROOT / "remindrag_integrations" / "bench").exists()
    assert (ROOT / "benchmarks" / "harness" / "__main__.py").exists()


def test_every_allowed_exception_is_still_in_the_code(package_edges: list) -> None:
    """An exception names an import that exists (delete it from ``ALLOWED`` in
    tools/import_floors.py when the import goes); there are none today."""
    found = {(e.source, e.target) for e in package_edges}
    assert floors.ALLOWED <= found, "delete the stale entry from ALLOWED"
    assert not floors.ALLOWED, "the contract <-> testing circle is gone; keep it so"


def _arrows(text: str) -> set[tuple[str, str, str]]:
    return set(re.findall(r"^\s*(\w+) (-->|-\.->)\|\d+\| (\w+)$", text, re.MULTILINE))


def _rooms(text: str) -> set[tuple[str, str]]:
    """The picture's nodes with their file counts: ``app["app (13)"]`` -> ("app", "13")."""
    return set(re.findall(r'^\s*(\w+)\["[^"]*\((\d+)\)"\]$', text, re.MULTILINE))


def _page() -> str:
    return (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")


def test_architecture_draws_the_house_the_code_builds(package_edges: list) -> None:
    """The picture's rooms with their file counts, its arrows (which room imports which; the
    import counts on them may drift) and the numbers the page states are the code's: after a
    change, paste the output of ``python tools/import_floors.py``."""
    page = _page()
    drawn = re.search(r"```mermaid\n(.*?)```", page, re.DOTALL)
    assert drawn is not None
    code = floors.mermaid(package_edges)
    assert _rooms(drawn.group(1)) == _rooms(code)
    assert _arrows(drawn.group(1)) == _arrows(code)
    stated = re.search(r"The house today: \*\*(.+?)\*\*", page)
    assert stated is not None and stated.group(1) == floors.summary(package_edges)


def test_architecture_has_one_copy_of_each_section() -> None:
    """Each heading once (a second, older copy of a section drifted unseen before), and the
    sections a reader looks for are there."""
    headings = re.findall(r"^(#{2,3} .+)$", _page(), re.MULTILINE)
    assert len(headings) == len(set(headings)), sorted(h for h in headings if headings.count(h) > 1)
    for want in ("The rooms", "The house: imports by floor", "A query", "An insert", "Ids"):
        assert f"## {want}" in headings
    assert any(h.startswith("## A memory write") for h in headings)
    assert "## The door for stores" in headings


def test_architecture_points_at_files_and_names_that_exist() -> None:
    """Every ``room/file.py`` and ``room/file.py::Name`` the page names is in the package."""
    package = ROOT / "remindrag_integrations"
    refs = re.findall(r"((?:core|stores|adapters|faces|app)/[\w/]+\.py)(?:::(\w+))?", _page())
    assert refs
    for path, name in refs:
        assert (package / path).is_file(), path
        if name:
            source = (package / path).read_text(encoding="utf-8")
            assert re.search(rf"^\s*(class|def|async def) {name}\b|^{name}\b", source, re.M), (
                f"{path}::{name}"
            )


def test_ids_are_read_in_core_ids_only() -> None:
    """No module but ``core/ids.py`` tells an id's kind by its prefix or spells an id's
    pattern (ARCHITECTURE.md, "Ids"; PostgreSQL's SQL is the one exception the page names)."""
    package = ROOT / "remindrag_integrations"
    reads = re.compile(r"""startswith\(\(?["'][caemrkxl]-|\[[cae]+\]-\[0-9a-f\]|\bc-\[0-9a-f\]""")
    found = []
    for path in sorted(package.rglob("*.py")):
        if path.relative_to(package).as_posix() == "core/ids.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if reads.search(line):
                found.append(f"{path.relative_to(package)}:{n}: {line.strip()}")
    assert found == []


def test_architecture_names_every_store_capability() -> None:
    """The page's paragraph on the door for stores names every optional capability the code
    has (``core.store.CAPABILITIES``), and each protocol where it lives."""
    from remindrag_integrations.core import store

    page = (ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8")
    door = page[page.index("## The door for stores") :]
    door = door[: door.index("\n## ", 1)]
    named = set(re.findall(r"`(\w+)`", door))
    assert set(store.CAPABILITIES) <= named, set(store.CAPABILITIES) - named
    for path, cls in re.findall(r"`core/(\w+)\.py::(\w+Store)\.", page):
        module = importlib.import_module(f"remindrag_integrations.core.{path}")
        assert hasattr(module, cls), f"ARCHITECTURE.md puts {cls} in core/{path}.py"


def test_the_store_protocols_have_one_door() -> None:
    """The package imports the store protocols from ``core.store`` only; ``core.protocols``
    holds the chat LLM and the embedder, nothing of the store's."""
    from remindrag_integrations.core import protocols, store

    pkg = ROOT / "remindrag_integrations"
    moved = {"GraphStore", "LexicalStore", "MemoryFn", "SettingsStore", "SnapshotStore"}
    moved |= {"TraceClaims", "reading"}
    for path in pkg.rglob("*.py"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if re.match(r"from [.\w]*protocols import", line):
                names = {n.strip() for n in line.split("import", 1)[1].split(",")}
                assert not names & moved, f"{path.relative_to(ROOT)}: {line}"
    assert not moved & set(vars(protocols)) and hasattr(store, "GraphStore")


def test_a_query_from_the_users_door_enters_each_face_once_going_down() -> None:
    """From ``invoke`` / ``retrieve`` the query goes down the faces' rooms and never climbs
    back: each face module it calls into is entered once, in room order (the retriever handed a
    retrieval to ``results.py``, then to the framework's converter, which went back to
    ``results.py`` for every chunk)."""
    from remindrag_integrations import ReMindRetriever
    from remindrag_integrations.testing import HashEmbedder

    package = str(ROOT / "remindrag_integrations") + "/"
    texts = ["Alice lives in Paris.", "Bob works in Rome.", "Carol met Alice in Paris."]
    r = ReMindRetriever.from_texts(texts, embeddings=HashEmbedder(), k=2)
    entered: list[str] = []

    def watch(frame: Any, event: str, arg: Any) -> None:
        where = frame.f_code.co_filename  # entered from another file (not a call within one)
        caller = frame.f_back.f_code.co_filename if frame.f_back else ""
        if event == "call" and where.startswith(package + "faces/") and caller != where:
            name = where[len(package) :]
            if not entered or entered[-1] != name:
                entered.append(name)

    for call in (lambda: r.invoke("Where does Alice live?"), lambda: r.retrieve("Alice?")):
        entered.clear()
        sys.setprofile(watch)
        try:
            call()
        finally:
            sys.setprofile(None)
        faces = [f for f in entered if f != "faces/retriever.py"]
        tail = faces[faces.index("faces/last_trace.py", 1) + 1 :]  # after the engine's call
        assert len(tail) == len(set(tail)) == 2, entered
        assert tail[0].split("/")[1] in ("langchain", "llama_index") and tail[1] == (
            "faces/results.py"
        )
