"""Large byte buffers that are written in full right after they are made.

``bytearray(n)`` zero-fills, which on a fresh allocation means a page fault per 4 KiB before the
caller touches every page again. Growing an empty bytearray with ``PyByteArray_Resize`` leaves
the new bytes uninitialized: the caller must write every one of them.
"""

from __future__ import annotations

import ctypes
from typing import Any


def _resize_prototype() -> Any:
    try:
        proto = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_ssize_t)
        return proto(("PyByteArray_Resize", ctypes.pythonapi))
    except (AttributeError, OSError):  # not CPython
        return None


_BYTEARRAY_RESIZE = _resize_prototype()


def grow(buf: bytearray, n: int) -> bool:
    """Grow the empty ``buf`` to n uninitialized bytes; False (``buf`` unchanged) where unsupported."""
    if _BYTEARRAY_RESIZE is None or n <= 0 or len(buf):
        return False
    _BYTEARRAY_RESIZE(buf, n)  # raises MemoryError on failure (PYFUNCTYPE checks the error flag)
    return True


def uninitialized(n: int) -> bytearray:
    """A bytearray of n bytes whose contents are undefined (zeros where growing is unsupported)."""
    out = bytearray()
    return out if grow(out, n) else bytearray(n)
