"""The package's import graph by floor, drawn as Mermaid, and the rules it must keep.

Floors, from the ground up (a module may import its own floor and the floors below it):

0. ``core``: the method;
1. ``stores``, ``adapters``: where the graph lives, other libraries' models;
2. the engine: ``engine.py`` (``ReMindRAG``, the default wiring), ``graph_export.py``,
   ``errors.py``: the framework-free library;
3. the faces: ``faces/`` (``ReMindRetriever``, ``faces/langchain``, ``faces/llama_index``)
   and the package's door (``__init__.py``), where users meet LangChain and LlamaIndex;
4. ``app``, ``testing.py``: programs and tools built on everything below.

The benchmark harness is not in the package (``benchmarks/harness``): no module of the package
imports ``benchmarks``, at any floor.

Every ``import`` counts, at module level, inside a function (lazy) or under
``if TYPE_CHECKING:``. The rules: ``core`` imports nothing above it, no import runs up a floor,
and no modules import each other in a circle, counting the imports under ``TYPE_CHECKING``
(they cannot loop at run time, but a reader and a type checker walk them).
Inside ``core`` and ``faces`` the same holds room by room (:func:`core_room`,
:func:`face_room`); neighbours listed in
:data:`ONE_WAY` import each other one way only.

    python tools/import_floors.py            # the Mermaid picture, its numbers, the verdict
    python tools/import_floors.py --check    # only the verdict (exit 1 on a broken rule)
    python tools/import_floors.py --root ../other/remindrag_integrations   # another checkout

Uses only the standard library (``ast``), so it runs on any checkout without installing it.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

PACKAGE = "remindrag_integrations"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE
BENCHMARKS = "benchmarks"  # the harness and its scripts, beside the package: never imported
FLOOR_NAMES = ("core", "stores and adapters", "the engine", "faces", "app and testing")
ENGINE = ("engine", "graph_export", "errors")  # the top-level modules of floor 2
# Imports exempt from both checks (an import up a floor or closing a circle), each with its
# reason. None today: the store contract's import of ``testing.py`` (contract <-> testing) went
# when the store door (issue 24) moved the hash embedder into ``stores/``.
ALLOWED: set[tuple[str, str]] = set()


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both dotted module names) at ``line``; ``kind`` is
    ``"top"`` (module level), ``"lazy"`` (inside a function) or ``"type"`` (type checking)."""

    source: str
    target: str
    line: int
    kind: str


def floor(module: str) -> int:
    """A module's floor (module doc): its first name under the package decides."""
    parts = module.split(".")[1:]
    head = parts[0] if parts else "__init__"
    if head == "core":
        return 0
    if head in ("stores", "adapters"):
        return 1
    if head in ENGINE:
        return 2
    if head in ("app", "testing"):
        return 4
    return 3


CORE_ROOMS = ("parts", "halves", "stages", "facade")


def core_room(module: str) -> int:
    """Inside ``core``, from the ground up: 0 the parts (types, ids, config, prompts, the
    walk, the prior, the runtime ...), 1 the method's two halves (``navigate``, ``memory``),
    2 the stages that chain them (``pipeline`` with its ranking rules and score calibration,
    ``insert``, ``answer``), 3 the facade (``facade``: ``Engine``)."""
    parts = module.split(".")[2:]
    if parts[:1] in (["navigate"], ["memory"]):
        return 1
    if parts in (["pipeline"], ["ranking"], ["calibration"], ["insert"], ["answer"]):
        return 2
    return 3 if parts == ["facade"] else 0


FACE_ROOMS = ("parts", "frameworks", "retriever")


def face_room(module: str) -> int:
    """Inside ``faces``, from the ground up: 0 the parts (inputs, results, search arguments,
    options, the memory hooks' base, the last trace), 1 each framework's conversion and
    memory hook (``faces.langchain``, ``faces.llama_index``), 2 ``ReMindRetriever``, the
    user's door: the query climbs down from it and never back."""
    parts = module.split(".")[2:]
    if parts == ["retriever"]:
        return 2
    return 1 if parts[:1] in (["langchain"], ["llama_index"]) else 0


def group(module: str, root: Path = ROOT) -> str:
    """The node a module is drawn in: its package (``core.memory``), its room for ``core``'s
    own modules (``core stages``), ``engine`` (the top-level modules of floor 2), ``door``
    (the package's ``__init__``) or ``testing``."""
    parts = module.split(".")[1:]
    if not parts:
        return "door"
    if parts[0] in ENGINE:
        return "engine"
    if parts in (["core"], ["faces"]):  # the packages' __init__ are among their parts
        return f"{parts[0]} parts"
    if parts and root.joinpath(*parts).is_dir():  # a package's __init__
        return ".".join(parts)
    if len(parts) == 2 and parts[0] == "core":  # core's own modules by room
        return f"core {CORE_ROOMS[core_room(module)]}"
    if len(parts) == 2 and parts[0] == "faces":  # the faces' own modules by room
        return f"faces {FACE_ROOMS[face_room(module)]}"
    if len(parts) >= 2 and (root.joinpath(*parts[:-1]) / "__init__.py").exists():
        return ".".join(parts[:-1])
    if parts and (root / parts[0]).is_dir():
        return parts[0]
    return "testing" if parts == ["testing"] else "faces"  # (no other top-level module)


def modules(root: Path = ROOT) -> dict[str, Path]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    """The deepest module of the package that ``name`` names (``a.b.Class`` → ``a.b``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_pkg: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
        return
    base = module if is_pkg else module.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    prefix = (base + "." + node.module if node.module else base) if node.level else node.module
    for alias in node.names:  # `from . import x` names a submodule or a member
        yield f"{prefix}.{alias.name}"


class _Visitor(ast.NodeVisitor):
    def __init__(self, module: str, is_pkg: bool, known: dict[str, Path]) -> None:
        self.module, self.is_pkg, self.known = module, is_pkg, known
        self.edges: list[Edge] = []
        self.kind = "top"

    def _nested(self, node: ast.AST, kind: str) -> None:
        outer, self.kind = self.kind, kind if self.kind == "top" else self.kind
        self.generic_visit(node)
        self.kind = outer

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._nested(node, "lazy")

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._nested(node, "lazy")

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        if test in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            outer, self.kind = self.kind, "type"
            for child in node.body:
                self.visit(child)
            self.kind = outer
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self._import(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self._import(node)

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        for name in _imported(node, self.module, self.is_pkg):
            if name == BENCHMARKS or name.startswith(BENCHMARKS + "."):  # broken: violations()
                self.edges.append(Edge(self.module, name, node.lineno, self.kind))
                continue
            target = _resolve(name, self.known) if name.startswith(PACKAGE) else None
            for t in _with_packages(target, self.module):
                self.edges.append(Edge(self.module, t, node.lineno, self.kind))


def _with_packages(target: str | None, source: str) -> list[str]:
    """``target`` and the packages above it that importing it runs (not the source's own)."""
    if target is None or target == source:
        return []
    out, name = [target], target.rpartition(".")[0]
    while name and name != PACKAGE and not (source + ".").startswith(name + "."):
        out.append(name)
        name = name.rpartition(".")[0]
    return out


def edges(root: Path = ROOT) -> list[Edge]:
    known = modules(root)
    found: list[Edge] = []
    for module, path in known.items():
        visitor = _Visitor(module, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found += visitor.edges
    return sorted(set(found), key=lambda e: (e.source, e.target, e.line))


def cycles(found: list[Edge]) -> list[frozenset[str]]:
    """The circles of imports, type-only ones included (but the :data:`ALLOWED` ones): every
    strongly connected set of two or more modules (Tarjan's algorithm)."""
    graph: dict[str, set[str]] = {}
    for e in found:
        if (e.source, e.target) not in ALLOWED:
            graph.setdefault(e.source, set()).add(e.target)
            graph.setdefault(e.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.add(w)
                if w == v:
                    break
            if len(scc) > 1:
                out.append(frozenset(scc))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# Neighbours on one floor (or in one room) that import each other one way only:
# (importer, imported) -> why not.
ONE_WAY = {
    ("core.memory", "core.navigate"): "navigate reads memory's replay score, not back",
    ("faces.langchain", "faces.llama_index"): "the two frameworks' faces stand side by side",
    ("faces.llama_index", "faces.langchain"): "the two frameworks' faces stand side by side",
}


def _in_package(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def _within(module: str, package: str) -> bool:
    return (module + ".").startswith(f"{PACKAGE}.{package}.")


def _same_floor(source: str, target: str) -> str:
    """The rule an import between neighbours breaks, or ''."""
    if floor(source) == floor(target) == 0 and core_room(target) > core_room(source):
        return "core imports up a room"
    if _within(source, "faces") and _within(target, "faces"):
        if face_room(target) > face_room(source):
            return "a face imports up a room"
    for (a, b), why in ONE_WAY.items():
        if _within(source, a) and _within(target, b):
            return f"{a} imports {b} ({why})"
    return ""


def violations(found: list[Edge]) -> list[str]:
    """Every broken rule, one line each (empty: the house stands)."""
    short = len(PACKAGE) + 1
    out = []
    for e in found:
        if not _in_package(e.target):
            out.append(
                f"the library imports the benchmarks: {e.source[short:]}:{e.line} -> "
                f"{e.target} ({e.kind})"
            )
            continue
        if floor(e.target) > floor(e.source) and (e.source, e.target) not in ALLOWED:
            rule = "core imports a higher floor" if floor(e.source) == 0 else "import runs up"
            out.append(f"{rule}: {e.source[short:]}:{e.line} -> {e.target[short:]} ({e.kind})")
        if floor(e.source) == floor(e.target):
            rule = _same_floor(e.source, e.target)
            if rule:
                out.append(f"{rule}: {e.source[short:]}:{e.line} -> {e.target[short:]} ({e.kind})")
    for scc in cycles(found):
        out.append("import circle: " + " <-> ".join(sorted(m[short:] for m in scc)))
    return out


def _node(group: str) -> str:
    return group.replace(".", "_").replace(" ", "_")


def mermaid(found: list[Edge], root: Path = ROOT) -> str:
    """The house: one box per floor (ground at the bottom), one node per package, one arrow
    per pair of packages labelled with how many imports it stands for (dotted: only lazy or
    type-checking imports; red: runs up a floor)."""
    members = Counter(group(m, root) for m in modules(root))
    lines = ["flowchart BT"]
    for level in range(len(FLOOR_NAMES) - 1, -1, -1):
        lines.append(f'  subgraph F{level}["{level}: {FLOOR_NAMES[level]}"]')
        for g in sorted(members):
            if floor(f"{PACKAGE}.{g.split()[0]}") == level:
                lines.append(f'    {_node(g)}["{g} ({members[g]})"]')
        lines.append("  end")
    pairs: dict[tuple[str, str], list[Edge]] = {}
    for e in filter(lambda e: _in_package(e.target), found):  # (the rest: violations)
        a, b = group(e.source, root), group(e.target, root)
        if a != b:
            pairs.setdefault((a, b), []).append(e)
    up = []
    for i, ((a, b), es) in enumerate(sorted(pairs.items())):
        arrow = "-->" if any(e.kind == "top" for e in es) else "-.->"
        lines.append(f"  {_node(a)} {arrow}|{len(es)}| {_node(b)}")
        if floor(es[0].target) > floor(es[0].source):
            up.append(str(i))
    if up:
        lines.append(f"  linkStyle {','.join(up)} stroke:red,stroke-width:2px")
    return "\n".join(lines)


def summary(found: list[Edge], root: Path = ROOT) -> str:
    """The picture in numbers, as ARCHITECTURE.md states them (tests/test_layers.py): floors
    holding a module, rooms (the picture's nodes), files (modules) and arrows."""
    members = Counter(group(m, root) for m in modules(root))
    used = {floor(f"{PACKAGE}.{g.split()[0]}") for g in members}
    arrows = {
        (group(e.source, root), group(e.target, root)) for e in found if _in_package(e.target)
    }
    arrows = {(a, b) for a, b in arrows if a != b}
    return (
        f"{len(used)} floors, {len(members)} rooms, {sum(members.values())} files, "
        f"{len(arrows)} arrows"
    )


def main(argv: list[str]) -> int:
    root = Path(argv[argv.index("--root") + 1]).resolve() if "--root" in argv else ROOT
    found = edges(root)
    if "--check" not in argv:
        print("```mermaid\n" + mermaid(found, root) + "\n```")
    broken = violations(found)
    for line in broken:
        print(line, file=sys.stderr)
    print(
        f"{summary(found, root)}; {len(found)} imports, {len(broken)} broken rules", file=sys.stderr
    )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
