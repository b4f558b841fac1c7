"""Graph stores: the embedded default and (extra ``postgres``) PostgreSQL + pgvector."""

from .memory_store import InMemoryGraphStore

__all__ = ["InMemoryGraphStore"]
