"""Put first on ``PYTHONPATH`` by ``tests/conftest.py`` in the processor-drift mode only
(``REMINDRAG_TEST_EMBED_NOISE``): a Python subprocess a test starts (the CLI, the MCP server)
perturbs the packaged embedder's vectors as the test process does (``tests/embed_noise.py``).
It patches the embedder's module when that module is first imported, so a subprocess that
never embeds pays nothing."""

import importlib.abc
import os
import sys

_TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WATCHED = "remindrag_integrations.adapters.embeddings"


class _PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201
        if name != _WATCHED:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):  # noqa: ANN001, ANN201
                return loader.create_module(spec)

            def exec_module(self, module):  # noqa: ANN001, ANN201
                loader.exec_module(module)
                if _TESTS not in sys.path:
                    sys.path.insert(0, _TESTS)
                import embed_noise

                embed_noise.install()

        spec.loader = _Loader()
        return spec


if os.environ.get("REMINDRAG_TEST_EMBED_NOISE", "").strip():
    import importlib.util

    sys.meta_path.insert(0, _PatchOnImport())
