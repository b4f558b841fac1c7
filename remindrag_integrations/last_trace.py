"""Moved to :mod:`remindrag_integrations.faces.last_trace`; this path works for one release, with a
deprecation warning."""

from .faces import moved

moved(__name__)
