"""Moved to :mod:`remindrag_integrations.faces.langchain`; this path (and its modules
``callbacks``, ``convert``) works for one release, with a deprecation warning."""

from ..faces import moved

moved(__name__)
