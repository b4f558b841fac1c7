"""Moved to :mod:`remindrag_integrations.faces.search_args`; this path works for one release, with a
deprecation warning."""

from .faces import moved

moved(__name__)
