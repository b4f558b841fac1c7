"""The store contract: the behaviour every :class:`~..core.store.GraphStore` must show (the
embedded store and PostgreSQL both pass it), as one table of cases (:data:`CASES`), each
naming the capability it checks: ``graph``, ``memory`` and ``traces`` always run; a case of an
optional capability (:data:`~..core.store.CAPABILITIES`) runs only on a store that has it.

Subclass :class:`StoreContract` in a pytest module (a test per case, named
``test_<capability>__<case>``; a capability the store lacks is skipped, saying so), or call
:func:`store_contract`. A failure is a :class:`ContractFailure` naming the capability and
the case."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..core.store import GraphStore
from . import contract_memory, contract_optional, contract_store, contract_writes
from .contract_case import CapabilityAbsent, Case, ContractFailure, StoreUnderTest, run
from .contract_graph import contract_graph

__all__ = ["CASES", "Case", "ContractFailure", "StoreContract", "contract_graph", "store_contract"]

CASES: list[Case] = [
    *contract_store.CASES,
    *contract_writes.CASES,
    *contract_memory.CASES,
    *contract_optional.CASES,
]
"""Every case of the contract, required ones first."""


class StoreContract:
    """The contract as pytest tests. Subclass it and provide a ``make_store`` fixture: a
    callable ``make_store(namespace="contract")`` that returns an EMPTY store for that
    namespace::

        class TestMyStore(StoreContract):
            @pytest.fixture
            def make_store(self):
                return lambda namespace="contract": MyStore(namespace=namespace)
    """

    dim = 32
    # how far a stored vector may come back from what was inserted (a store keeping float16
    # vectors sets about 1e-3)
    embedding_atol = 1e-6


def _test(case: Case) -> Callable[[Any, Callable[..., GraphStore]], None]:
    def test(self: StoreContract, make_store: Callable[..., GraphStore]) -> None:
        try:
            run(case, StoreUnderTest(make_store, dim=self.dim, atol=self.embedding_atol))
        except CapabilityAbsent as absent:
            import pytest  # a StoreContract runs under pytest

            pytest.skip(f"optional capability {case.capability!r}: {absent}")

    test.__name__ = test.__qualname__ = case.test_name
    test.__doc__ = f"[{case.capability}] {case.doc}"
    return test


for _case in CASES:
    setattr(StoreContract, _case.test_name, _test(_case))


def store_contract(
    make_store: Callable[..., GraphStore], *, embedding_atol: float = 1e-6
) -> list[str]:
    """Run every case of :data:`CASES` that applies to the store ``make_store`` makes;
    returns the test names of those that ran (``test_<capability>__<case>``). Raises
    :class:`ContractFailure` at the first failing case. ``embedding_atol``: see
    :attr:`StoreContract.embedding_atol`."""
    ran = []
    for case in CASES:
        try:
            run(case, StoreUnderTest(make_store, atol=embedding_atol))
        except CapabilityAbsent:
            continue
        ran.append(case.test_name)
    return ran
