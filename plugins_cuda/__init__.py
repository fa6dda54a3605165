"""Built-in CUDA plugins, one folder each: kernel source (kernel.cu), contract (README.md), and the
declaration with its torch reference (__init__.py). Importing this package declares them and
registers their converters; ``torch2trt_lite.plugins.load_builtin_plugins()`` does it on demand.
"""

from __future__ import annotations

from pathlib import Path

from . import deform_conv2d, roi_align

BUILTINS: tuple[str, ...] = ("deform_conv2d", "roi_align")
PLUGINS = {"deform_conv2d": deform_conv2d.PLUGIN, "roi_align": roi_align.PLUGIN}


def kernel_sources() -> list[Path]:
    """Every .cu file under plugins_cuda/ (the NVRTC compile checks walk this list)."""
    return sorted(Path(__file__).parent.glob("*/*.cu"))


__all__ = ["BUILTINS", "PLUGINS", "kernel_sources"]
