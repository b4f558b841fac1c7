"""The config a user reads: a short first screen, nested configs for the method's knobs, the
previous release's names working with a warning (arguments, overrides, attributes, saved stores),
docs/config.md in step with the fields, and the errors in one module."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import remindrag_integrations as top
from remindrag_integrations import (
    ConfigError,
    Document,
    IndexConfig,
    MemoryConfig,
    PriorConfig,
    ReMindRAG,
    ReMindRetriever,
    RetrievalConfig,
    faces,
)
from remindrag_integrations import errors as public_errors
from remindrag_integrations.core import errors as core_errors
from remindrag_integrations.core import persist
from remindrag_integrations.core.config import RENAMED
from remindrag_integrations.errors import ReMindDeprecationWarning, ReMindError
from remindrag_integrations.faces.search_args import call_overrides
from remindrag_integrations.testing import HashEmbedder

DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"
QUESTION = "Who directed Sinister?"

# what the previous release's RetrievalConfig().model_dump() wrote into engine.json, with
# every renamed field off its default (so a field that lands in the wrong place shows)
OLD_SAVED_RETRIEVAL = {
    "k": 3, "seeds": 2, "alpha": 0.2, "lam": 0.6, "max_replay_nodes": 32, "replay_starts": 7,
    "max_hops": 10, "max_iterations": 20, "max_neighbors_shown": 30,
    "max_traversal_tokens": 20000, "max_idle_decisions": 6, "on_invalid_move": "fallback",
    "max_back_choices": 5, "max_subquestions": 1, "pre_query": False, "verify_replay": False,
    "fill_to_k": True, "chunk_chars_in_prompt": 300, "llm_timeout": 120.0,
    "feedback_max_depth": 3, "rank_memory_weight": 0.5, "self_memorize": "enhance",
    "memorize_judge": "citations", "named_support_penalises": False, "nav_enough_chunks": 3,
    "nav_min_similarity": 0.1, "nav_filter_top": 1, "prior": False,
    "prior_lexical_weight": 0.3, "prior_graph_weight": 0.9, "prior_damping": 0.7,
    "prior_iterations": 15, "prior_hops": 3, "prior_max_nodes": 4000, "prior_max_degree": 400,
    "prior_candidates": 40, "prior_restart_passages": 4, "prior_passage_restart": 0.5,
    "prior_feedback": 0.5, "prior_feedback_passages": 3, "filter": None,
}  # fmt: skip
OLD_SAVED_INDEX = {
    "chunk_tokens": 300, "chunk_overlap": 0, "synonym_threshold": 0.85, "max_concurrency": 4,
    "embed_batch_size": 256, "insert_batch_documents": 256, "max_document_chars": 20000000,
    "max_entities_per_chunk": 40, "on_extraction_error": "raise", "llm_titles": True,
}  # fmt: skip


def _engine() -> ReMindRAG:
    rag = ReMindRAG(embeddings=HashEmbedder(dim=64))
    rag.insert(
        [
            Document(
                "derrickson", "Scott Derrickson is an American director. He directed Sinister."
            ),
            Document("sinister", "Sinister is a 2012 horror film starring Ethan Hawke."),
        ]
    )
    return rag


def _new_place(cfg: RetrievalConfig, old: str) -> Any:
    section, field = RENAMED[old]
    return getattr(getattr(cfg, section), field)


# ---------------------------------------------------------------------------------------------
# the shape


def test_the_first_screen_is_short_and_the_knobs_are_nested() -> None:
    flat = [n for n, f in RetrievalConfig.model_fields.items() if not _nested(f.annotation)]
    # the choices an application makes, in four groups (a new field goes on this screen only
    # if a user must choose it; the method's knobs go in a nested config)
    assert flat == [
        *("k", "filter", "fill_to_k", "min_score", "seeds"),
        *("max_hops", "max_iterations", "max_neighbors_shown", "max_traversal_tokens"),
        *("max_idle_decisions", "llm_timeout"),
        *("llm_navigation", "pre_query", "max_subquestions", "verify_replay", "on_invalid_move"),
        *("self_memorize", "memorize_judge", "named_support_penalises"),
    ]
    assert not [n for n in flat if n.startswith(("prior", "nav_"))]
    assert {n for n, f in RetrievalConfig.model_fields.items() if _nested(f.annotation)} == {
        "prior",
        "memory",
        "navigator",
        "prompt",
    }
    assert "llm_titles" not in IndexConfig.model_fields  # read nowhere: removed


@pytest.mark.parametrize(
    "values", [{"k": True}, {"k": "3"}, {"prior": {"damping": "0.7"}}, {"nonsense": 1}]
)
def test_the_constructor_is_strict_with_a_typed_error(values: dict[str, Any]) -> None:
    with pytest.raises(ConfigError):
        RetrievalConfig(**values)
    with pytest.raises(ConfigError):
        RetrievalConfig.build(**values)
    assert issubclass(ConfigError, ValueError)  # what pydantic's ValidationError also is


def test_a_nested_dict_changes_only_what_it_names() -> None:
    base = RetrievalConfig(prior=PriorConfig(damping=0.7, hops=3))
    cfg = base.with_overrides(prior={"graph_weight": 0.5}, k=2)
    assert (cfg.prior.damping, cfg.prior.hops, cfg.prior.graph_weight, cfg.k) == (0.7, 3, 0.5, 2)
    whole = base.with_overrides(prior=PriorConfig(graph_weight=0.5))  # an object replaces
    assert (whole.prior.damping, whole.prior.hops) == (0.8, 4)
    assert base.prior.graph_weight == 1.0  # frozen: the original is unchanged
    with pytest.raises(ConfigError, match="damping"):
        base.with_overrides(prior={"damping": 1.5})
    with pytest.raises(ConfigError, match="nonsense"):
        base.with_overrides(memory={"nonsense": 1})


def test_a_per_call_nested_override_changes_the_walk() -> None:
    rag = _engine()
    off = rag.retrieve(QUESTION, k=2, prior={"enabled": False})
    on = rag.retrieve(QUESTION, k=2)
    assert not any("lexical" in p for p in off.trace.rank_evidence.values())  # cosine only
    assert any(p["lexical"] > 0 for p in on.trace.rank_evidence.values())
    assert rag.retrieval_config.prior.enabled  # one call only


# ---------------------------------------------------------------------------------------------
# the previous release's names


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_every_old_name_works_with_a_warning(old: str) -> None:
    value = OLD_SAVED_RETRIEVAL[old]
    with pytest.warns(ReMindDeprecationWarning, match=rf"{old}=.*use {RENAMED[old][0]}="):
        cfg = RetrievalConfig(**{old: value})
    assert _new_place(cfg, old) == value
    with pytest.warns(ReMindDeprecationWarning, match=rf"RetrievalConfig\.{old} .*deprecated"):
        assert getattr(cfg, old) == value
    with pytest.warns(ReMindDeprecationWarning):
        again = RetrievalConfig().with_overrides(**{old: value})
    assert again == cfg
    with pytest.warns(ReMindDeprecationWarning):
        assert RetrievalConfig.build(**{old: value}) == cfg


def test_the_warning_points_at_the_callers_line() -> None:
    with pytest.warns(ReMindDeprecationWarning) as caught:
        RetrievalConfig(prior_damping=0.7)
    assert caught[0].filename == __file__


def test_prior_as_a_bool_still_works() -> None:
    with pytest.warns(ReMindDeprecationWarning, match="prior=True/False"):
        cfg = RetrievalConfig(prior=False)
    assert cfg.prior.enabled is False
    with pytest.warns(ReMindDeprecationWarning, match="prior.enabled"):
        assert not cfg.prior  # ``if cfg.prior:`` read the switch


def test_old_names_stay_strict_and_cannot_contradict_the_new() -> None:
    with pytest.warns(ReMindDeprecationWarning), pytest.raises(ConfigError, match="damping"):
        RetrievalConfig.build(prior_damping="0.7")
    with pytest.warns(ReMindDeprecationWarning), pytest.raises(ConfigError, match="different"):
        RetrievalConfig.build(prior_damping=0.7, prior={"damping": 0.6})
    with pytest.warns(ReMindDeprecationWarning), pytest.raises(ConfigError, match="prior"):
        RetrievalConfig.build(prior_damping=0.7, prior=1)
    with pytest.warns(ReMindDeprecationWarning):  # the same value twice is no contradiction
        assert RetrievalConfig(alpha=0.2, memory={"alpha": 0.2}).memory.alpha == 0.2
    with pytest.warns(ReMindDeprecationWarning):  # an object's unset fields are no claim
        cfg = RetrievalConfig(prior_damping=0.7, prior=PriorConfig(hops=3))
    assert (cfg.prior.damping, cfg.prior.hops) == (0.7, 3)


def test_old_names_per_call_and_on_the_retriever() -> None:
    rag = _engine()
    with pytest.warns(ReMindDeprecationWarning, match="prior_lexical_weight"):
        old = rag.retrieve(QUESTION, k=2, prior_lexical_weight=0.0)
    new = rag.retrieve(QUESTION, k=2, prior={"lexical_weight": 0.0})
    assert [c.chunk.id for c in old.chunks] == [c.chunk.id for c in new.chunks]
    assert call_overrides({"nav_min_similarity": 0.1}) == {"nav_min_similarity": 0.1}
    with pytest.raises(ConfigError, match="nav_min_similarty"):
        call_overrides({"nav_min_similarty": 0.1})
    with pytest.warns(ReMindDeprecationWarning) as caught:
        r = ReMindRetriever.from_texts(
            ["Sinister is a 2012 horror film."], prior_damping=0.7, llm_titles=False, k=1
        )
    named = {m.group(1) for w in caught if (m := re.search(r"\((\w+)=", str(w.message)))}
    assert {"prior_damping", "llm_titles"} <= named
    assert r.engine.retrieval_config.prior.damping == 0.7
    with pytest.warns(ReMindDeprecationWarning, match="nav_enough_chunks"):
        assert r.invoke("Which film?", nav_enough_chunks=1)


def test_llm_titles_is_accepted_and_ignored() -> None:
    with pytest.warns(ReMindDeprecationWarning, match="never had an effect"):
        assert IndexConfig(llm_titles=False) == IndexConfig()


def _old_save(rag: ReMindRAG, root: Path) -> Path:
    """What the previous release's ``rag.save(root)`` wrote: a generation and engine.json."""
    from remindrag_integrations.adapters import embedder_record

    used = embedder_record.record(rag.embedder, rag.store.dim, None)
    return persist.save(rag.store, rag.index_config, rag.retrieval_config, root, used)


def test_a_store_saved_by_the_previous_release_loads(tmp_path: Path) -> None:
    """A folder the previous release saved (generations and an engine.json of the older
    config shape) opens converted, without a warning, its config read in the new places; the
    settings the store keeps from then on have the new shape (the old file kept aside)."""
    from remindrag_integrations.stores import sqlite_store

    rag = _engine()
    _old_save(rag, tmp_path / "s")
    saved = persist.read_checked_json(tmp_path / "s" / persist.ENGINE_FILE)
    saved.update(index=OLD_SAVED_INDEX, retrieval=OLD_SAVED_RETRIEVAL)
    persist.write_checked_json(tmp_path / "s" / persist.ENGINE_FILE, saved)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the user did nothing wrong: no warning
        loaded = ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder(dim=64))
    cfg = loaded.retrieval_config
    for old in RENAMED:
        assert _new_place(cfg, old) == OLD_SAVED_RETRIEVAL[old], old
    assert cfg.prior.enabled is False and cfg.k == 3
    assert loaded.index_config.chunk_tokens == 300
    assert loaded.retrieve(QUESTION, k=1).chunks
    kept = tmp_path / "s" / sqlite_store.BACKUP / persist.ENGINE_FILE
    assert persist.read_checked_json(kept)["retrieval"] == OLD_SAVED_RETRIEVAL
    loaded.save(tmp_path / "s")  # saved again: the new shape
    body = sqlite_store.read_settings(tmp_path / "s")["engine"]["retrieval"]
    assert body["prior"]["damping"] == 0.7 and "prior_damping" not in body
    assert body["memory"] == MemoryConfig(
        alpha=0.2, lam=0.6, max_replay_nodes=32, replay_starts=7, rank_weight=0.5,
        max_bridge_hops=3,
    ).model_dump()  # fmt: skip
    loaded.close()
    again = ReMindRAG.load(tmp_path / "s", embeddings=HashEmbedder(dim=64))
    assert again.retrieval_config == cfg and again.index_config == loaded.index_config


def test_a_retriever_saved_by_the_previous_release_keeps_its_fields(tmp_path: Path) -> None:
    """The previous release saved a retriever's k, filter and score_threshold as plain JSON
    in retriever.json beside engine.json: the folder opens converted, with those fields."""
    import json

    from remindrag_integrations import ReMindRetriever

    _old_save(_engine(), tmp_path / "s")
    fields = {"k": 2, "filter": None, "score_threshold": 0.0}
    (tmp_path / "s" / "retriever.json").write_text(json.dumps(fields), encoding="utf-8")
    loaded = ReMindRetriever.load(tmp_path / "s", embeddings=HashEmbedder(dim=64))
    assert (loaded.k, loaded.filter, loaded.score_threshold) == (2, None, 0.0)
    assert len(loaded.invoke(QUESTION)) <= 2


# ---------------------------------------------------------------------------------------------
# the reference page


def _rows() -> dict[str, tuple[str, str]]:
    """docs/config.md's table rows: field -> (default, description)."""
    out = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([\w.]+)` \| (.+?) \| (.+) \|$", line)
        if m:
            out[m.group(1)] = (m.group(2), m.group(3))
    return out


def _nested(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def test_the_reference_page_lists_every_field_as_the_code_says() -> None:
    rows, want = _rows(), {}
    for cls in (RetrievalConfig, IndexConfig):
        for name, field in cls.model_fields.items():
            if _nested(field.annotation):
                want[name] = (f"`{field.annotation.__name__}()`", field.description)
                for sub, f in field.annotation.model_fields.items():
                    want[f"{name}.{sub}"] = (f"`{f.default!r}`", f.description)
            else:
                want[name] = (f"`{field.default!r}`", field.description)
    assert rows == want


# ---------------------------------------------------------------------------------------------
# errors: one module


def test_every_error_is_defined_in_and_exported_from_one_module() -> None:
    defined = {
        name
        for name, obj in vars(core_errors).items()
        if isinstance(obj, type) and issubclass(obj, (ReMindError, Warning))  # and the warnings
    }
    assert all(getattr(core_errors, n).__module__ == core_errors.__name__ for n in defined)
    assert set(public_errors.__all__) == set(core_errors.__all__) == defined
    assert "NoTraceError" in defined and "InvalidTeachPairError" in defined
    for name in defined:
        assert getattr(public_errors, name) is getattr(core_errors, name)


def test_the_top_level_keeps_the_errors_an_application_catches() -> None:
    kept = {n for n in top.__all__ if n in public_errors.__all__}
    assert kept == {
        "ReMindError",
        "ConfigError",
        "InvalidDocumentError",
        "InvalidQueryError",
        "LLMError",
        "StoreError",
    }
    for name in kept:  # no warning
        assert getattr(top, name) is getattr(public_errors, name)


@pytest.mark.parametrize("name", ["StoreLockedError", "InvalidTeachPairError", "LLMTimeoutError"])
def test_the_other_errors_still_import_from_the_top_level_with_a_warning(name: str) -> None:
    with pytest.warns(ReMindDeprecationWarning, match=f"remindrag_integrations.errors.{name}"):
        assert getattr(top, name) is getattr(public_errors, name)
    with pytest.warns(ReMindDeprecationWarning):
        exec(f"from remindrag_integrations import {name}", {})  # noqa: S102
    with pytest.warns(ReMindDeprecationWarning, match="core.types"):
        exec(f"from remindrag_integrations.core.types import {name}", {})  # noqa: S102
    with pytest.raises(AttributeError):
        top.NoSuchError  # noqa: B018


@pytest.mark.parametrize("old", faces.MOVED)
def test_a_face_module_at_its_old_path_warns_and_is_the_same_module(old: str) -> None:
    """The framework faces moved under ``faces/``; each old import path still works for one
    release, warns, and gives the very module (its classes are the same classes)."""
    import importlib
    import sys

    name = f"remindrag_integrations.{old}"
    head = f"remindrag_integrations.{old.split('.')[0]}"
    kept = {
        m: sys.modules.pop(m) for m in list(sys.modules) if m == head or m.startswith(head + ".")
    }
    try:
        with pytest.warns(ReMindDeprecationWarning, match="faces"):
            module = importlib.import_module(name)
        assert module is importlib.import_module(f"remindrag_integrations.faces.{old}")
    finally:
        sys.modules.update(kept)


def test_one_wiring_for_flat_fields_over_a_saved_engine(tmp_path: Path) -> None:
    """``ReMindRAG.from_fields`` (what ``from_documents`` uses): flat fields go to their config;
    over a saved engine they change only what they name; a bad name makes no folder."""
    with pytest.raises(ConfigError, match="unknown configuration field"):
        ReMindRAG.from_fields(embeddings=HashEmbedder(), store=tmp_path / "x", k_typo=3)
    assert not (tmp_path / "x").exists()
    rag = ReMindRAG.from_fields(
        embeddings=HashEmbedder(), store=tmp_path / "kb", k=3, chunk_tokens=300
    )
    assert (rag.retrieval_config.k, rag.index_config.chunk_tokens) == (3, 300)
    rag.insert([Document("a", "Alice lives in Paris.")])
    again = ReMindRAG.from_fields(embeddings=HashEmbedder(), store=tmp_path / "kb", k=7)
    assert (again.retrieval_config.k, again.index_config.chunk_tokens) == (7, 300)
    again.change_fields(prior={"damping": 0.5})
    assert again.retrieval_config.prior.damping == 0.5 and again.retrieval_config.k == 7
    with pytest.raises(ConfigError):
        again.change_fields(nope=1)
    assert again.retrieval_config.k == 7
