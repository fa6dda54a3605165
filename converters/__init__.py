"""Built-in converters, one module per op family. Importing this package registers them all."""

from __future__ import annotations

from . import activation  # noqa: F401
