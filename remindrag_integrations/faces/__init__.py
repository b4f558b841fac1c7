"""The framework faces: what makes the engine a LangChain and a LlamaIndex retriever.

``retriever.py`` (:class:`ReMindRetriever`, one object that is both frameworks' retriever)
sits on top; below it ``search_args.py`` (each framework's argument names), ``options.py``
(the typed keyword arguments), ``inputs.py`` (a framework document as the engine's),
``results.py`` (the ``metadata["remindrag"]`` key), ``memory_hooks.py`` and ``last_trace.py``;
``langchain/`` and ``llama_index/`` hold each framework's conversion and post-answer memory
hook. The faces import the engine (``engine.py``, ``core``); nothing below imports them.

Users import from the package's top level (``from remindrag_integrations import
ReMindRetriever``). The faces' modules lived at the package root before this release; those
paths still work for one release with a :class:`~..errors.ReMindDeprecationWarning`
(:func:`moved`).
"""

from __future__ import annotations

import importlib
import sys

from ..core.errors import warn_deprecated

# the modules that moved here, by their old name under the package (CHANGELOG.md, Migration)
MOVED = (
    "retriever",
    "search_args",
    "options",
    "inputs",
    "results",
    "memory_hooks",
    "last_trace",
    "langchain",
    "langchain.callbacks",
    "langchain.convert",
    "llama_index",
    "llama_index.convert",
    "llama_index.events",
)


def moved(old: str) -> None:
    """Make the module ``old`` (``remindrag_integrations.retriever``, imported from its old
    place) the one under ``faces`` (the same module object: its classes are the same
    classes), and warn once per import."""
    package, _, rest = old.partition(".")
    new = f"{package}.faces.{rest}"
    warn_deprecated(f"the module {old}", f"import {new} (or the name from {package})")
    sys.modules[old] = importlib.import_module(new)
    for sub in MOVED:  # a package's modules too, before the import system looks for them
        if sub.startswith(f"{rest}."):
            sys.modules[f"{package}.{sub}"] = importlib.import_module(f"{package}.faces.{sub}")
