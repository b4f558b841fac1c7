"""The config a user reads: a short first screen, nested configs for the method's knobs, the
previous release's names working with a warning (arguments, overrides, attributes, saved stores),
docs/config.md in step with the fields, and the errors in one module."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import remindrag_integrations as top
from remindrag_integrations import (
    ConfigError,
    Document,
    IndexConfig,
    PriorConfig,
    ReMindRAG,
    ReMindRetriever,
    RetrievalConfig,
)
from remindrag_integrations import errors as public_errors
from remindrag_integrations.core import errors as core_errors
from remindrag_integrations.core import persist
from remindrag_integrations.errors import ReMindError
from remindrag_integrations.faces.search_args import call_overrides
from remindrag_integrations.testing import HashEmbedder

DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"
QUESTION = "Who directed Sinister?"


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
# a name that is no field (the flat names of an unreleased draft among them)


def test_a_flat_name_of_a_nested_knob_is_an_unknown_field_naming_its_place() -> None:
    """``prior_damping`` and the like are no fields: the typed error names the nested field
    the user meant, the same from the constructor, an override, a call and the retriever."""
    with pytest.raises(ConfigError, match=r"prior_damping: no such field .*prior=\{'damping'"):
        RetrievalConfig(prior_damping=0.7)
    with pytest.raises(ConfigError, match=r"navigator=\{'min_similarity'"):
        RetrievalConfig().with_overrides(nav_min_similarity=0.1)
    with pytest.raises(ConfigError, match=r"nav_min_similarity \(did you mean navigator="):
        call_overrides({"nav_min_similarity": 0.1})
    rag = _engine()
    with pytest.raises(ConfigError, match=r"prior=\{'lexical_weight'"):
        rag.retrieve(QUESTION, k=2, prior_lexical_weight=0.0)
    with pytest.raises(ConfigError, match=r"prior_damping \(did you mean prior="):
        ReMindRetriever.from_texts(["Sinister is a 2012 horror film."], prior_damping=0.7)


def test_a_name_near_no_field_lists_the_fields() -> None:
    with pytest.raises(ConfigError, match="llm_titles: no such field") as caught:
        IndexConfig(llm_titles=False)
    assert all(f in str(caught.value) for f in IndexConfig.model_fields)
    with pytest.raises(ConfigError, match="chunk_tokns .did you mean chunk_tokens"):
        ReMindRetriever.from_texts(["Sinister is a 2012 horror film."], chunk_tokns=100)
    with pytest.raises(ConfigError, match="valid dictionary or instance of PriorConfig"):
        RetrievalConfig(prior=False)  # the on/off switch is prior.enabled


def _old_save(rag: ReMindRAG, root: Path) -> Path:
    """What the previous release's ``rag.save(root)`` wrote: a generation and engine.json."""
    from remindrag_integrations.adapters import embedder_record

    used = embedder_record.record(rag.embedder, rag.store.dim, None)
    return persist.save(rag.store, rag.index_config, rag.retrieval_config, root, used)


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
def test_the_other_errors_import_from_errors_only(name: str) -> None:
    assert getattr(public_errors, name) is getattr(core_errors, name)
    with pytest.raises(AttributeError, match=name):
        getattr(top, name)
    with pytest.raises(ImportError, match=name):
        exec(f"from remindrag_integrations.core.types import {name}", {})  # noqa: S102


def test_the_package_root_holds_the_door_the_engine_errors_testing_and_the_export() -> None:
    """No module at the root but these (the faces live in ``faces/``; their draft paths at the
    root, ``remindrag_integrations.retriever`` and the like, are gone)."""
    root = Path(top.__file__).parent
    modules = {p.stem for p in root.glob("*.py")}
    assert modules == {"__init__", "engine", "errors", "graph_export", "testing"}
    packages = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    assert packages == {"adapters", "app", "core", "faces", "stores"}


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
