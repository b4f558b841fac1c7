"""``remindrag serve``: a local web console over a live store (docs/look-inside.md).

:func:`~.server.build_app` makes the ASGI application for an engine; :func:`~.server.serve`
runs it for the command line."""
