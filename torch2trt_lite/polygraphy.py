"""Polygraphy runners for engines and TRTModules, where the README documents them.

The implementation lives in :mod:`torch2trt_lite.tools.polygraphy`; this module keeps the documented
path ``torch2trt_lite.polygraphy.TRTModuleRunner`` working.
"""

from __future__ import annotations

from torch2trt_lite.tools.polygraphy import *  # noqa: F403
from torch2trt_lite.tools.polygraphy import __all__  # noqa: F401
