"""What the command line shows: progress bars and one-line descriptions of a walk."""

from __future__ import annotations

from typing import Any

from ..core.progress import tqdm_bar


def progress_bar(desc: str, unit: str = "chunk") -> Any:
    """An ``insert(progress=...)`` / ``teach(progress=...)`` callback drawing a tqdm bar (on
    stderr)."""
    return tqdm_bar(desc, unit, always=False)


def describe_path(engine: Any, trace: Any) -> list[str]:
    """One line per seed, replayed edge and move of a trace."""
    store = engine.store

    def name(node_id: str | None) -> str:
        return store.get_node(node_id).name[:60] if node_id else "?"

    lines = [f"seed     {name(s)}" for s in trace.seeds]
    for eid in trace.replayed_edges:
        e = store.get_edge(eid)
        lines.append(f"replay   {name(e.u)} -- {name(e.v)}")
    for m in trace.moves:
        if m.action == "invalid":
            lines.append(f"invalid  {m.note[:80]}")
        elif m.action != "read":
            lines.append(f"{m.action:<8} {name(m.from_node)} -> {name(m.node_id)}")
    lines.append(f"stop     {trace.stop_reason}")
    if trace.navigation:
        lines.append(f"walk     {trace.navigation.get('reason', '')}")
    return lines
