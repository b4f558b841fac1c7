"""Moved to :mod:`remindrag_integrations.faces.llama_index`; this path (and its modules
``convert``, ``events``) works for one release, with a deprecation warning."""

from ..faces import moved

moved(__name__)
