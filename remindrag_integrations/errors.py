"""Every error the library raises (each a :class:`ReMindError`) and its warnings.

``from remindrag_integrations.errors import StoreLockedError``. The package's top level keeps
only :class:`ReMindError` and the few errors an application catches; the others are here.
"""

from __future__ import annotations

from .core.errors import *  # noqa: F403  (every name of its __all__, below)
from .core.errors import __all__ as __all__
