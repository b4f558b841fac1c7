"""What a store contract case is: a named check of one capability, run on a
:class:`StoreUnderTest` (the store factory, with the contract graph at hand)."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..core.memory.write import update
from ..core.store import CAPABILITIES, GraphStore
from .contract_graph import contract_graph

REQUIRED = ("graph", "memory", "traces")
"""The parts of :class:`~..core.store.GraphStore` every store has (the cases of each always
run); the optional capabilities are the keys of :data:`~..core.store.CAPABILITIES`."""


class CapabilityAbsent(Exception):
    """The store does not declare the capability a case checks: the case does not apply."""


class ContractFailure(AssertionError):
    """A store failed a case of the contract; the message names the capability and the case."""

    def __init__(self, case: Case, cause: BaseException) -> None:
        what = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        # the contract's own line that failed (the last frame in a contract_* module)
        frames = [f for f in traceback.extract_tb(cause.__traceback__) if "contract_" in f.filename]
        at = f" at {Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else ""
        line = f" `{frames[-1].line}`" if frames and frames[-1].line else ""
        super().__init__(
            f"store contract, capability {case.capability!r}, case {case.name!r} "
            f"({case.doc}): {what}{at}{line}"
        )
        self.case = case


@dataclass(frozen=True)
class StoreUnderTest:
    """The store factory a case runs on: ``make_store(namespace)`` returns an EMPTY store.
    ``capability``: the one the running case checks (a store without it is not checked)."""

    make_store: Callable[..., GraphStore]
    capability: str = "graph"
    dim: int = 32
    atol: float = 1e-6  # how far a stored vector may come back from what was inserted

    def empty(self, namespace: str = "contract") -> Any:
        """A new empty store; :class:`CapabilityAbsent` when it lacks the case's capability."""
        store = self.make_store(namespace)
        proto = CAPABILITIES.get(self.capability)
        if proto is not None and not isinstance(store, proto):
            raise CapabilityAbsent(f"{type(store).__name__} has no {proto.__name__}")
        return store

    def filled(self, namespace: str = "contract") -> Any:
        """A store holding :func:`~.contract_graph.contract_graph` (documents d1, d2)."""
        store = self.empty(namespace)
        store.add_graph(**contract_graph(dim=self.dim))
        return store

    def tagged(self) -> tuple[Any, dict]:
        """A store holding the contract graph over d1..d3 with metadata to filter on."""
        g = contract_graph(("d1", "d2", "d3"), dim=self.dim)
        meta: dict[str, dict[str, Any]] = {
            "d1": {"dept": "x", "year": 2020, "tag": "a"},
            "d2": {"dept": "y", "year": 2023, "tag": "b"},
            "d3": {"dept": "x", "year": "2024"},  # a string year never compares with a number
        }
        g["documents"] = [(d, h, meta[d]) for d, h, _ in g["documents"]]
        store = self.empty()
        store.add_graph(**g)
        return store, g


@dataclass(frozen=True)
class Case:
    """One row of the contract: the capability it checks, its name and the check."""

    capability: str
    check: Callable[[StoreUnderTest], None]

    @property
    def name(self) -> str:
        return self.check.__name__

    @property
    def doc(self) -> str:
        return (self.check.__doc__ or self.name.replace("_", " ")).strip().splitlines()[0]

    @property
    def test_name(self) -> str:
        """The pytest method name: the capability, then the case."""
        return f"test_{self.capability}__{self.name}"


def cases(capability: str, *checks: Callable[[StoreUnderTest], None]) -> list[Case]:
    """The rows of one capability."""
    if capability not in REQUIRED and capability not in CAPABILITIES:
        raise ValueError(f"unknown store capability {capability!r}")
    return [Case(capability, c) for c in checks]


def run(case: Case, s: StoreUnderTest) -> None:
    """Run ``case``: :class:`CapabilityAbsent` when it does not apply, else
    :class:`ContractFailure` (naming the capability and the case) when the store fails it."""
    s = StoreUnderTest(s.make_store, case.capability, s.dim, s.atol)
    try:
        case.check(s)
    except CapabilityAbsent:
        raise
    except Exception as exc:
        raise ContractFailure(case, exc) from exc


def write(store: GraphStore, enhance: list[str], penalise: list[str], q: np.ndarray) -> None:
    """One memory write, as the engine makes it."""
    update(store, enhance, penalise, q)


def raises(
    exc: type[BaseException] | tuple[type[BaseException], ...], fn: Callable[[], object]
) -> None:
    try:
        fn()
    except exc:
        return
    raise AssertionError(f"expected {exc}")
