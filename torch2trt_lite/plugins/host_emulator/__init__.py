"""Run CUDA plugin kernels on the CPU: a host emulator for checking kernel logic without a GPU.

    from torch2trt_lite.plugins.host_emulator import emulate_plugin
    (out,) = emulate_plugin(MY_PLUGIN, [x], {"beta": 1.5})   # CPU tensors in, CPU tensors out

Needs a C++20 compiler (``g++``, or ``$CXX``); no CUDA toolkit, no GPU.

g++ compiles the kernel source as C++ with ``runtime.h`` force-included (CUDA's keywords, thread
indices, ``__syncthreads``, warp shuffles, atomics) and stand-ins for ``<cuda_fp16.h>`` and
``<mma.h>`` (``include/``). Every CUDA thread of a block is a fiber; fibers run one at a time up to
the next barrier, in forward or reverse thread order (a missing ``__syncthreads`` shows up as a
difference between the two orders). Arithmetic is IEEE fp32 without contraction, i.e. what the
device computes with ``--fmad=false``; with contraction on, the device's results differ from these
in the last bits.

What it checks: indexing, tiling and barrier logic (a barrier not every thread reaches is reported
as a deadlock), which elements get written (outputs are NaN-poisoned), writes outside an output or
the workspace (guard zones), wmma pointer alignment and leading dimensions, numerics of the
algorithm. What it cannot: speed, real data races, memory-model effects, reads out of bounds, the
device's half-precision/tensor-core rounding details. ``emulate_plugin`` mirrors the GPU path of a
plugin (launch rule, argument packing, workspace) with CPU tensors.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from torch2trt_lite.errors import PluginError
from torch2trt_lite.plugins.declaration import PluginDef
from torch2trt_lite.plugins.nvrtc import CACHE_ENV, pack_args
from torch2trt_lite.plugins.spec import Launch, cdiv

HERE = Path(__file__).resolve().parent
_RUNTIME_FILES = ("runtime.h", "scheduler.inc", "include/cuda_fp16.h", "include/mma.h")
_GLOBAL = re.compile(r"\bT2T_EMU_GLOBAL\s+void\s+(\w+)\s*\(")
_LOADED: dict[str, EmuModule] = {}


_PROBE = "#include <ucontext.h>\n#include <barrier>\n_Float16 h = (_Float16)1.5f;\nint main() { return (int)(float)h; }\n"
_COMPILER: list[str | None] = []


def compiler() -> str | None:
    """The C++ compiler the emulator uses ($CXX or g++), None when there is none or it lacks what
    the emulator needs (C++20, ``_Float16``, ``<ucontext.h>``)."""
    if not _COMPILER:
        cxx = shutil.which(os.environ.get("CXX", "g++"))
        if cxx is not None:
            res = subprocess.run(
                [cxx, "-std=c++20", "-fsyntax-only", "-x", "c++", "-"],
                input=_PROBE,
                capture_output=True,
                text=True,
                check=False,
            )
            cxx = cxx if res.returncode == 0 else None
        _COMPILER.append(cxx)
    return _COMPILER[0]


@functools.cache
def _host_flags() -> tuple[str, ...]:
    """-mf16c where the CPU has F16C: half <-> float conversions become single instructions
    instead of library calls (same rounding), which makes fp16 kernels several times faster here."""
    try:
        with open("/proc/cpuinfo") as f:
            return ("-mf16c",) if " f16c" in f.read() else ()
    except OSError:
        return ()


@functools.cache
def _runtime_text() -> str:
    """The emulator's own sources (part of every build's cache key)."""
    return "".join((HERE / f).read_text() for f in _RUNTIME_FILES)


def _cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)  # NOTE: the variable NVRTC's cache uses; a subfolder of it
    return (Path(env) if env else Path.home() / ".cache" / "torch2trt_lite") / "host_emulator"


def _run(cmd: list[str], stdin: str | None = None) -> str:
    res = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise PluginError(f"CUDA emulator: {' '.join(cmd[:2])} failed:\n{res.stderr[-4000:]}")
    return res.stdout


def _params(text: str, start: int) -> list[str]:
    """The parameter declarations of the function whose '(' is at ``start``."""
    depth, i, cur, out = 0, start, "", []
    while i < len(text):
        ch = text[i]
        if ch in "(<[":
            depth += 1
            if depth > 1:
                cur += ch
        elif ch in ")>]":
            depth -= 1
            if depth == 0:
                break
            cur += ch
        elif ch == "," and depth == 1:
            out.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    if cur.strip():
        out.append(cur)
    return [" ".join(p.split()) for p in out if p.strip() and p.strip() != "void"]


def _param_type(decl: str) -> str:
    m = re.fullmatch(r"(.*?[\s*&])(\w+)", decl.strip())
    if m is None:
        raise PluginError(f"CUDA emulator: cannot read the kernel parameter {decl!r}")
    return m.group(1).replace("__restrict__", "").strip()


class EmuModule:
    """A kernel source compiled for the host; ``launch`` runs one entry point over a grid."""

    def __init__(self, path: Path, entry_points: Sequence[str]) -> None:
        self.lib = ctypes.CDLL(str(path))
        self.lib.t2t_emu_launch.restype = ctypes.c_int
        self.calls = {
            name: ctypes.cast(getattr(self.lib, f"t2t_emu_call_{name}"), ctypes.c_void_p)
            for name in entry_points
        }

    def launch(
        self, launch: Launch, args: Sequence[Any], *, order: str = "forward", workers: int = 1
    ) -> None:
        if launch.shared_mem:
            raise PluginError("CUDA emulator: dynamic shared memory is not emulated")
        holders = list(args)
        params = (ctypes.c_void_p * max(len(holders), 1))(*[ctypes.addressof(h) for h in holders])
        err = ctypes.create_string_buffer(512)
        rc = self.lib.t2t_emu_launch(
            self.calls[launch.kernel],
            params,
            *[ctypes.c_uint(v) for v in (*launch.grid, *launch.block)],
            ctypes.c_int(1 if order == "reverse" else 0),
            ctypes.c_int(workers),
            err,
            ctypes.c_int(len(err)),
        )
        if rc != 0:
            raise PluginError(f"CUDA emulator: kernel '{launch.kernel}': {err.value.decode()}")


def host_options(options: Sequence[str]) -> list[str]:
    """The NVRTC options that mean something on the host: macro definitions and include paths
    (``-DX=1``, ``--define-macro=X``, ``-I dir``, ``--include-path=dir``). The rest (architecture,
    ``--fmad``, ``-lineinfo``, ``--use_fast_math``...) is ignored: the host computes IEEE fp32 without
    contraction."""
    out: list[str] = []
    it = iter(options)
    for o in it:
        for short, long_ in (("-D", "--define-macro"), ("-I", "--include-path")):
            if o in (short, long_):
                out.append(short + next(it, ""))
            elif o.startswith(long_ + "="):
                out.append(short + o[len(long_) + 1 :])
            elif o.startswith(short) and len(o) > 2:
                out.append(o)
    return out


def build(
    source: str, *, filename: str, entry_points: Sequence[str], arch: int = 900, options: Sequence[str] = ()
) -> EmuModule:
    """Compile ``source`` (CUDA) for the host with ``__CUDA_ARCH__`` = ``arch`` (cached on disk).
    ``options``: the plugin's NVRTC options (see :func:`host_options` for what is kept)."""
    cxx = compiler()
    if cxx is None:
        raise PluginError(
            "CUDA emulator: no usable C++ compiler (set $CXX or install g++ 12 or newer: C++20 and _Float16)"
        )
    runtime = _runtime_text()
    host = [*_host_flags(), *host_options(options)]
    key = hashlib.sha256(
        "\0".join([source, filename, str(arch), ",".join(entry_points), runtime, cxx, *host]).encode()
    ).hexdigest()[:24]
    if key in _LOADED:
        return _LOADED[key]
    out = _cache_dir() / f"{key}.so"
    if not out.exists():
        flags = [
            f"-D__CUDA_ARCH__={arch}",
            "-std=c++20",
            "-include",
            str(HERE / "runtime.h"),
            "-I",
            str(HERE / "include"),
        ]
        scanned = _run([cxx, "-E", "-P", "-DT2T_EMU_SCAN", *host, *flags, "-x", "c++", "-"], stdin=source)
        wrappers = []
        for name in entry_points:
            m = next((m for m in _GLOBAL.finditer(scanned) if m.group(1) == name), None)
            if m is None:
                raise PluginError(f"CUDA emulator: no __global__ function '{name}' in {filename}")
            types = [_param_type(p) for p in _params(scanned, m.end() - 1)]
            unpack = ", ".join(f"*({t}*)a[{i}]" for i, t in enumerate(types))
            wrappers.append(f'extern "C" void t2t_emu_call_{name}(void** a) {{ {name}({unpack}); }}')
        unit = "\n".join(
            [
                f'#line 1 "{filename}"',
                source,
                '#line 1 "<emulator>"',
                *wrappers,
                f'#include "{HERE / "scheduler.inc"}"',
                "",
            ]
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            src = Path(tmp) / "unit.cpp"
            src.write_text(unit)
            so = Path(tmp) / "unit.so"
            _run(
                [
                    cxx,
                    "-O1",
                    "-g0",
                    "-fPIC",
                    "-shared",
                    "-pthread",
                    "-ffp-contract=off",
                    "-fno-strict-aliasing",
                    "-Wno-unknown-pragmas",
                    *host,
                    *flags,
                    "-o",
                    str(so),
                    str(src),
                ]
            )
            os.replace(so, out)
    mod = EmuModule(out, entry_points)
    _LOADED[key] = mod
    return mod


def _poison(t: torch.Tensor) -> torch.Tensor:
    if t.is_floating_point():
        return t.fill_(float("nan"))
    return t.fill_(-0x5A5A5A5A if t.dtype in (torch.int32, torch.int64) else 0x5A)


def emulate_plugin(
    pdef: PluginDef,
    inputs: Sequence[torch.Tensor | None],
    attrs: dict[str, Any],
    *,
    arch: int = 900,
    order: str = "forward",
    workers: int | None = None,
) -> list[torch.Tensor]:
    """Run ``pdef``'s CUDA kernel(s) on CPU tensors exactly as the GPU path launches them.

    ``inputs`` follow the plugin's input list (None for an absent optional input), ``attrs`` its
    attributes. Outputs and workspace are poisoned (NaN / 0x5A bytes) before the launches. Blocks
    run on ``workers`` OS threads (default: the CPU count, at most 8).
    """
    workers = workers if workers is not None else min(os.cpu_count() or 1, 8)
    if pdef.cuda is None:
        raise PluginError(f"{pdef.label} has no CUDA kernel")
    resolved = pdef.resolve_attrs(attrs)
    present = pdef.present(resolved, inputs)
    tensors = [x.detach().cpu().contiguous() for x in present if x is not None]
    info = pdef.launch_info(resolved, [tuple(x.shape) for x in tensors], [x.dtype for x in tensors])
    # Every output and the workspace sit between two guard zones: a write outside them is an error.
    shapes = [(tuple(s), d) for s, d in zip(info.outputs, info.output_dtypes, strict=True)]
    ws_bytes = pdef.cuda.workspace_bytes(info)
    nbytes = [math.prod(s) * torch.empty((), dtype=d).element_size() for s, d in shapes] + [ws_bytes]
    arenas = [
        torch.full((_GUARD + cdiv(n, _GUARD) * _GUARD + _GUARD,), _GUARD_BYTE, dtype=torch.uint8) for n in nbytes
    ]
    outputs = [
        _poison(a[_GUARD : _GUARD + n].view(d).view(s))
        for a, n, (s, d) in zip(arenas, nbytes, shapes, strict=False)
    ]
    ws = arenas[-1][_GUARD : _GUARD + ws_bytes].fill_(0x5A) if ws_bytes else None
    source, filename = pdef.cuda.text()
    mod = build(
        source, filename=filename, entry_points=pdef.cuda.entry_points, arch=arch, options=pdef.cuda.options
    )
    for lc in pdef.cuda.launches(info):
        if 0 in lc.grid:
            continue
        args = pack_args(
            lc,
            info,
            [x.data_ptr() for x in tensors],
            [o.data_ptr() for o in outputs],
            ws.data_ptr() if ws is not None else 0,
        )
        mod.launch(lc, args, order=order, workers=workers)
        for i, (a, n) in enumerate(zip(arenas, nbytes, strict=True)):
            outside = torch.cat([a[:_GUARD], a[_GUARD + n :]])
            if not bool((outside == _GUARD_BYTE).all()):
                what = "the workspace" if i == len(nbytes) - 1 else f"output {i}"
                raise PluginError(f"CUDA emulator: kernel '{lc.kernel}' wrote outside {what} ({n} bytes)")
    return [o.clone() for o in outputs]


_GUARD = 256  # bytes of guard zone before and after every output and the workspace
_GUARD_BYTE = 0xA5


__all__ = ["EmuModule", "build", "compiler", "emulate_plugin"]
