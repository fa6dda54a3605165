"""Layer families of the sim. Each module defines layer classes and a mixin of ``add_*`` methods.

Adding a family: write ``<family>.py`` with its ``I*Layer`` classes and a ``<Family>Mixin`` class,
then add the mixin to ``MIXINS`` below.
"""

from __future__ import annotations

from .basic import BasicMixin
from .control import ControlMixin
from .linalg import LinalgMixin
from .nn import NNMixin
from .plugin import PluginMixin
from .tensor import TensorMixin

MIXINS: tuple[type, ...] = (BasicMixin, NNMixin, LinalgMixin, TensorMixin, ControlMixin, PluginMixin)
