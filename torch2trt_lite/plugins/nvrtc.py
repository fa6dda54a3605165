"""Run-time CUDA compilation (NVRTC) with an on-disk cache, and kernel launches (CUDA driver API).

Both come from ``cuda-python`` (``cuda.bindings.nvrtc`` / ``cuda.bindings.driver``); no CUDA toolkit
is needed: headers are taken from the installed ``nvidia-*`` wheels, or ``CUDA_HOME``/``CUDA_PATH``.

* :func:`compile_source` compiles for one architecture (``sm_XX`` cubin when NVRTC supports the
  architecture, else PTX for the newest supported one, which the driver JIT-compiles) and caches the
  result under ``$TORCH2TRT_LITE_CACHE`` or ``~/.cache/torch2trt_lite/nvrtc``, keyed by the hash of
  source, options, architecture and NVRTC version. Compile errors become a :class:`PluginError`
  quoting the compiler's messages with file and line.
* :func:`ptxas_resources` reads registers, stack and spills per kernel from the ptxas log.
* :func:`run_launches` launches a plugin's kernels on a stream from raw device pointers (used by the
  TensorRT plugin's ``enqueue``); :func:`run_plugin` does the same for torch CUDA tensors.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..errors import BackendUnavailableError, PluginError
from .declaration import PluginDef
from .spec import F32, F64, I32, I64, Attrs, CudaKernel, In, Launch, LaunchInfo, Out, Workspace

CACHE_ENV = "TORCH2TRT_LITE_CACHE"
DEFAULT_OPTIONS: tuple[str, ...] = ("--std=c++17", "-lineinfo")
_HEADER_PROBE = "cuda_fp16.h"


# ----------------------------------------------------------------------------- cuda-python
def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError:
        try:
            from cuda import nvrtc  # type: ignore[no-redef]  # cuda-python < 12.6 layout
        except ImportError:
            raise BackendUnavailableError(
                "compiling plugin kernels needs cuda-python (NVRTC bindings): pip install cuda-python"
            ) from None
    return nvrtc


def _driver() -> Any:
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver  # type: ignore[no-redef]
        except ImportError:
            raise BackendUnavailableError(
                "launching plugin kernels needs cuda-python (driver bindings): pip install cuda-python"
            ) from None
    return driver


def _check(result: Any, what: str) -> Any:
    """Unpack a cuda-python result tuple (err, *values); raise PluginError on failure."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        name = getattr(err, "name", str(err))
        raise PluginError(f"{what} failed: {name} ({int(err)})")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


def nvrtc_version() -> tuple[int, int]:
    major, minor = _check(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def supported_archs() -> list[int]:
    """Compute capabilities (e.g. 75, 90) this NVRTC can produce cubins for."""
    nvrtc = _nvrtc()
    if hasattr(nvrtc, "nvrtcGetSupportedArchs"):
        return [int(a) for a in _check(nvrtc.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs")]
    return [75, 80, 86, 89, 90]


# --------------------------------------------------------------------------------- headers
def include_dirs() -> list[str]:
    """Directories holding the CUDA headers kernels include (cuda_fp16.h and friends).

    ``CUDA_HOME`` / ``CUDA_PATH`` first (an explicit choice), then the ``nvidia-*`` wheels
    (``nvidia/cu13/include``, ``nvidia/cuda_runtime/include``, ...), then ``/usr/local/cuda``.
    """
    found: list[str] = []

    def add(p: Path) -> None:
        if (p / _HEADER_PROBE).is_file() and str(p) not in found:
            found.append(str(p))

    for env in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(env)
        if home:
            add(Path(home) / "include")
    try:
        import nvidia  # namespace package of the nvidia-* wheels

        roots = [Path(p) for p in getattr(nvidia, "__path__", [])]
    except ImportError:
        roots = []
    for root in roots:
        for name in ("cu13", "cu12", "cuda_runtime", "cuda_nvrtc", "cuda_cccl"):
            add(root / name / "include")
        if root.is_dir():
            for sub in sorted(root.iterdir()):
                add(sub / "include")
    add(Path("/usr/local/cuda/include"))
    return found


# ----------------------------------------------------------------------------------- cache
def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "torch2trt_lite" / "nvrtc"


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


# --------------------------------------------------------------------------------- compile
@dataclass(frozen=True)
class CompiledModule:
    """A compiled CUDA module: ``image`` is a cubin (``kind`` "cubin") or PTX text ("ptx")."""

    image: bytes
    kind: str
    arch: str  # "sm_90" or "compute_90"
    log: str
    key: str
    from_cache: bool = False


def arch_target(arch: int | str) -> tuple[str, str]:
    """("sm_XX", "cubin") when NVRTC supports ``arch``; else ("compute_YY", "ptx") for the newest
    supported YY <= XX, which the driver JIT-compiles for the device."""
    if isinstance(arch, str):
        m = re.fullmatch(r"(?:sm_|compute_)?(\d+)[a-z]?", arch)
        if not m:
            raise PluginError(f"invalid CUDA architecture {arch!r}; expected e.g. 90 or 'sm_90'")
        if arch.startswith("compute_"):
            return arch, "ptx"
        cc = int(m.group(1))
    else:
        cc = int(arch)
    archs = supported_archs()
    if cc in archs:
        return f"sm_{cc}", "cubin"
    lower = [a for a in archs if a <= cc]
    if not lower:
        raise PluginError(
            f"NVRTC {'.'.join(map(str, nvrtc_version()))} cannot compile for compute capability {cc}; "
            f"it supports {archs}"
        )
    return f"compute_{max(lower)}", "ptx"


def compile_source(
    source: str,
    *,
    arch: int | str,
    filename: str = "kernel.cu",
    options: Sequence[str] = (),
    ptxas_verbose: bool = False,
    use_cache: bool = True,
) -> CompiledModule:
    """Compile CUDA ``source`` for ``arch`` with NVRTC (cached on disk)."""
    nvrtc = _nvrtc()
    target, kind = arch_target(arch)
    incs = include_dirs()
    opts = [*DEFAULT_OPTIONS, f"--gpu-architecture={target}", *(f"--include-path={d}" for d in incs), *options]
    if ptxas_verbose and kind == "cubin":
        opts.append("--ptxas-options=-v")
    version = nvrtc_version()
    h = hashlib.sha256()
    for part in (source, filename, "\0".join(opts), f"{version}", kind):
        h.update(part.encode())
        h.update(b"\0")
    key = h.hexdigest()
    cdir = cache_dir()
    img_path, meta_path = cdir / f"{key}.{kind}", cdir / f"{key}.json"
    if use_cache and img_path.is_file() and meta_path.is_file():
        try:
            meta = json.loads(meta_path.read_text())
            return CompiledModule(img_path.read_bytes(), kind, target, meta.get("log", ""), key, True)
        except (OSError, ValueError):
            pass  # NOTE: a damaged cache entry is recompiled and overwritten
    prog = _check(
        nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], []), "nvrtcCreateProgram"
    )
    try:
        bopts = [o.encode() for o in opts]
        err = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        log = _program_log(nvrtc, prog)
        if int(err[0]) != 0:
            raise PluginError(_compile_error_message(filename, target, source, log, incs))
        if kind == "cubin":
            size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
            buf = bytearray(int(size))
            _check(nvrtc.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
        else:
            size = _check(nvrtc.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
            buf = bytearray(int(size))
            _check(nvrtc.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    image = bytes(buf)
    if use_cache:
        try:
            _atomic_write(img_path, image)
            _atomic_write(meta_path, json.dumps({"log": log, "arch": target, "file": filename}).encode())
        except OSError:
            pass  # NOTE: an unwritable cache only costs a recompile next time
    return CompiledModule(image, kind, target, log, key, False)


def _program_log(nvrtc: Any, prog: Any) -> str:
    size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    # NOTE: NVRTC writes into the buffer: it must be a bytearray. (NVIDIA's samples pass b" " * size,
    # and for an empty log, size 1, that is CPython's shared one-byte b" ", which NVRTC then turns
    # into b"\0" for the whole process.)
    buf = bytearray(int(size))
    _check(nvrtc.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return buf.rstrip(b"\0 ").decode(errors="replace")


_DIAG = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<sev>catastrophic error|error|warning)[^:]*: (?P<msg>.*)$")


def _compile_error_message(filename: str, target: str, source: str, log: str, incs: list[str]) -> str:
    lines = source.splitlines()
    quoted: list[str] = []
    for ln in log.splitlines():
        m = _DIAG.match(ln.strip())
        if m and "error" in m.group("sev"):
            no = int(m.group("line"))
            quoted.append(f"  {m.group('file')}:{no}: {m.group('sev')}: {m.group('msg')}")
            if 1 <= no <= len(lines):
                quoted.append(f"      {lines[no - 1].strip()}")
    head = f"NVRTC failed to compile {filename} for {target}"
    body = "\n".join(quoted) if quoted else log.strip()
    hint = ""
    if "open source file" in log:
        hint = (
            f"\nHeader search path: {incs or 'none found'}. Install the CUDA headers "
            "(pip install nvidia-cuda-runtime) or set CUDA_HOME to a CUDA toolkit."
        )
    return f"{head}:\n{body}{hint}\n--- full compiler log ---\n{log.strip()}"


def compile_kernel(cuda: CudaKernel, arch: int | str, *, ptxas_verbose: bool = False) -> CompiledModule:
    source, filename = cuda.text()
    return compile_source(source, arch=arch, filename=filename, options=cuda.options, ptxas_verbose=ptxas_verbose)


# --------------------------------------------------------------------------- resource usage
@dataclass(frozen=True)
class KernelResources:
    kernel: str
    arch: str
    registers: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int = 0
    complete: bool = True  # the log had the function-properties line (stack and spill bytes) too


_FN_START = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_FN_PROPS = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads"
)
_FN_REGS = re.compile(r"Used (?P<regs>\d+) registers(?:.*?(?P<smem>\d+) bytes smem)?")


def ptxas_resources(log: str) -> dict[str, KernelResources]:
    """Per-kernel registers, stack and spills from a ``ptxas -v`` log (NVRTC's or nvcc's)."""
    out: dict[str, KernelResources] = {}
    cur: dict[str, Any] | None = None
    for ln in log.splitlines():
        m = _FN_START.search(ln)
        if m:
            cur = {"kernel": m.group("name"), "arch": m.group("arch"), "stack": 0, "st": 0, "ld": 0, "props": False}
            continue
        if cur is None:
            continue
        m = _FN_PROPS.search(ln)
        if m:
            cur.update(stack=int(m.group("stack")), st=int(m.group("st")), ld=int(m.group("ld")), props=True)
            continue
        m = _FN_REGS.search(ln)
        if m:
            out[cur["kernel"]] = KernelResources(
                cur["kernel"], cur["arch"], int(m.group("regs")), cur["stack"], cur["st"], cur["ld"],
                int(m.group("smem") or 0), cur["props"],
            )
            cur = None
    return out


# ---------------------------------------------------------------------------------- launch
_LOCK = threading.Lock()
_MODULES: dict[tuple[int, str], Any] = {}
_FUNCTIONS: dict[tuple[int, str, str], Any] = {}
_ARCH: dict[int, int] = {}
_INIT = False


def _current_context() -> tuple[Any, int]:
    """(driver module, current context handle); retains device 0's primary context if none."""
    global _INIT
    drv = _driver()
    if not _INIT:
        try:
            _check(drv.cuInit(0), "cuInit")
        except RuntimeError as e:  # NOTE: cuda-python raises when the driver library is missing
            raise BackendUnavailableError(f"the CUDA driver is not available: {e}") from None
        _INIT = True
    ctx = _check(drv.cuCtxGetCurrent(), "cuCtxGetCurrent")
    if int(ctx) == 0:
        dev = _check(drv.cuDeviceGet(0), "cuDeviceGet")
        ctx = _check(drv.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
        _check(drv.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    return drv, int(ctx)


def current_device_arch() -> int:
    """Compute capability (e.g. 90) of the current context's device."""
    drv, ctx = _current_context()
    hit = _ARCH.get(ctx)
    if hit is None:
        dev = _check(drv.cuCtxGetDevice(), "cuCtxGetDevice")
        attr = drv.CUdevice_attribute
        major = _check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev), "attr")
        minor = _check(drv.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev), "attr")
        hit = _ARCH[ctx] = int(major) * 10 + int(minor)
    return hit


def get_function(cuda: CudaKernel, name: str) -> Any:
    """The CUfunction ``name`` of ``cuda``, compiled for and loaded into the current context."""
    drv, ctx = _current_context()
    arch = current_device_arch()
    compiled = compile_kernel(cuda, arch)
    fkey = (ctx, compiled.key, name)
    with _LOCK:
        fn = _FUNCTIONS.get(fkey)
        if fn is not None:
            return fn
        mod = _MODULES.get((ctx, compiled.key))
        if mod is None:
            image = compiled.image if compiled.kind == "cubin" else compiled.image.rstrip(b"\0") + b"\0"
            mod = _check(drv.cuModuleLoadData(image), f"cuModuleLoadData ({compiled.arch})")
            _MODULES[(ctx, compiled.key)] = mod
        fn = _check(drv.cuModuleGetFunction(mod, name.encode()), f"cuModuleGetFunction('{name}')")
        _FUNCTIONS[fkey] = fn
    return fn


def function_resources(cuda: CudaKernel, name: str) -> dict[str, int]:
    """Registers and local memory per thread of a loaded kernel (from the driver)."""
    drv, _ = _current_context()
    fn = get_function(cuda, name)
    a = drv.CUfunction_attribute
    return {
        "registers": int(_check(drv.cuFuncGetAttribute(a.CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "attr")),
        "local_bytes": int(_check(drv.cuFuncGetAttribute(a.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn), "attr")),
    }


def pack_args(
    launch: Launch, info: LaunchInfo, in_ptrs: Sequence[int], out_ptrs: Sequence[int], workspace: int
) -> list[Any]:
    """ctypes values for a launch's arguments (pointers resolved; absent inputs are null)."""
    vals: list[Any] = []
    for a in launch.args:
        if isinstance(a, In):
            idx = a.input if isinstance(a.input, int) else info.inputs.index(a.input)
            vals.append(ctypes.c_void_p(int(in_ptrs[idx]) if idx is not None else 0))
        elif isinstance(a, Out):
            vals.append(ctypes.c_void_p(int(out_ptrs[a.index])))
        elif isinstance(a, Workspace):
            if not workspace:
                raise PluginError(f"kernel '{launch.kernel}' uses the workspace, but none was allocated")
            vals.append(ctypes.c_void_p(int(workspace) + a.offset))
        elif isinstance(a, I32):
            vals.append(ctypes.c_int32(a.value))
        elif isinstance(a, I64):
            vals.append(ctypes.c_int64(a.value))
        elif isinstance(a, F32):
            vals.append(ctypes.c_float(a.value))
        elif isinstance(a, F64):
            vals.append(ctypes.c_double(a.value))
        else:
            raise PluginError(f"kernel '{launch.kernel}': unknown argument {a!r}")
    return vals


def run_launches(
    cuda: CudaKernel,
    info: LaunchInfo,
    in_ptrs: Sequence[int],
    out_ptrs: Sequence[int],
    workspace: int,
    stream: int,
) -> None:
    """Launch every kernel of ``cuda``'s launch rule for ``info`` on ``stream``, in order."""
    drv, _ = _current_context()
    for lc in cuda.launches(info):
        if 0 in lc.grid:
            continue  # NOTE: an empty grid means an empty tensor: nothing to compute
        fn = get_function(cuda, lc.kernel)
        holders = pack_args(lc, info, in_ptrs, out_ptrs, workspace)
        params = (ctypes.c_void_p * max(len(holders), 1))(*[ctypes.addressof(h) for h in holders])
        _check(
            drv.cuLaunchKernel(
                fn, *lc.grid, *lc.block, lc.shared_mem, drv.CUstream(int(stream)), ctypes.addressof(params), 0
            ),
            f"cuLaunchKernel('{lc.kernel}', grid={lc.grid}, block={lc.block})",
        )


def run_plugin(
    pdef: PluginDef,
    inputs: Sequence[torch.Tensor | None],
    attrs: Mapping[str, Any] | Attrs,
    *,
    outputs: Sequence[torch.Tensor] | None = None,
    stream: int | None = None,
) -> list[torch.Tensor]:
    """Run ``pdef``'s CUDA kernels on CUDA tensors (one entry per declared input, None if absent).

    Outputs are allocated when not given; the launch goes to ``stream`` or torch's current stream.
    """
    if pdef.cuda is None:
        raise PluginError(f"{pdef.label} has no CUDA kernel")
    resolved = attrs if isinstance(attrs, Attrs) else pdef.resolve_attrs(dict(attrs))
    present = pdef.present(resolved, inputs)
    if any(x is None for x in present):
        raise PluginError(f"{pdef.label}: a required input is None")
    tensors = [x.contiguous() for x in present if x is not None]
    if not tensors or any(not x.is_cuda for x in tensors):
        raise PluginError(f"{pdef.label}: run_plugin needs CUDA tensors")
    device = tensors[0].device
    info = pdef.launch_info(resolved, [tuple(x.shape) for x in tensors], [x.dtype for x in tensors])
    if outputs is None:
        outputs = [torch.empty(s, dtype=d, device=device) for s, d in zip(info.outputs, info.output_dtypes, strict=True)]
    for o, s, d in zip(outputs, info.outputs, info.output_dtypes, strict=True):
        if tuple(o.shape) != s or o.dtype != d or not o.is_contiguous():
            raise PluginError(f"{pdef.label}: output buffer must be a contiguous {d} tensor of shape {s}")
    ws_bytes = pdef.cuda.workspace_bytes(info)
    ws = torch.empty(ws_bytes, dtype=torch.uint8, device=device) if ws_bytes else None
    with torch.cuda.device(device):
        torch.cuda.init()
        handle = stream if stream is not None else torch.cuda.current_stream(device).cuda_stream
        run_launches(
            pdef.cuda, info, [x.data_ptr() for x in tensors], [o.data_ptr() for o in outputs],
            ws.data_ptr() if ws is not None else 0, int(handle),
        )
    return list(outputs)



__all__ = [
    "CACHE_ENV", "CompiledModule", "KernelResources", "arch_target", "cache_dir", "compile_kernel",
    "compile_source", "current_device_arch", "function_resources", "get_function", "include_dirs",
    "nvrtc_version", "pack_args", "ptxas_resources", "run_launches", "run_plugin", "supported_archs",
]
