"""The framework faces: what makes the engine a LangChain and a LlamaIndex retriever.

``retriever.py`` (:class:`ReMindRetriever`, one object that is both frameworks' retriever)
sits on top; below it ``search_args.py`` (each framework's argument names), ``options.py``
(the typed keyword arguments), ``inputs.py`` (a framework document as the engine's),
``results.py`` (the ``metadata["remindrag"]`` key), ``memory_hooks.py`` and ``last_trace.py``;
``langchain/`` and ``llama_index/`` hold each framework's conversion and post-answer memory
hook. The faces import the engine (``engine.py``, ``core``); nothing below imports them.

Users import from the package's top level (``from remindrag_integrations import
ReMindRetriever``).
"""
