"""Time the built-in plugin kernels on a CUDA GPU and write the results as JSON.

    python benchmarks/plugins_bench.py --out results/plugins_<gpu>.json [--repeats 200] [--quick]

For each configuration and dtype (fp32, fp16) it times, with CUDA events (median of --repeats runs
after --warmup runs):

* the plugin kernel, launched through cuda-python exactly as the TensorRT plugin's enqueue does
  (arguments packed once, so the host cost of packing is not in the kernel time);
* the plugin's torch reference on the same CUDA tensors (plain torch ops, 100 runs; roi_align's
  reference synchronizes with the host, which is part of its cost);
* torchvision's own CUDA op;
* the launch-rule alternatives: roi_align's direct and channels-last paths, deform_conv2d's gemm
  path at split-K 1/2/4/8 and (fp32) on CUDA cores instead of 3xTF32 wmma (``variants``);
* a device-to-device copy of the same number of bytes the kernel reads and writes, and the copy
  bandwidth of a large buffer measured in the same run, so kernel times can be read as a fraction
  of what the memory system does.

Kernel launches are queued behind a short GPU sleep so that back-to-back launches measure GPU time,
not Python launch overhead. The JSON holds the device name and capability, torch/CUDA/NVRTC/
cuda-python versions, the date and every measurement; nothing here is asserted (benchmarks are not
tests).
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import functools
import json
import platform
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torchvision

from torch2trt_lite.errors import PluginError
from torch2trt_lite.plugins import get_plugin, load_builtin_plugins, nvrtc
from torch2trt_lite.plugins.api import PluginDef
from torch2trt_lite.plugins_cuda import deform_conv2d, roi_align


def cuda_time(fn: Callable[[], Any], repeats: int, warmup: int) -> dict[str, float]:
    """Median/min/mean milliseconds of ``fn`` from per-run CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(repeats)]
    torch.cuda._sleep(20_000_000)  # NOTE: keeps the GPU busy while the host queues the runs below
    for s, e in zip(starts, ends, strict=True):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    ms = [s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)]
    return {"median_ms": statistics.median(ms), "min_ms": min(ms), "mean_ms": statistics.fmean(ms), "runs": repeats}


class PreparedKernel:
    """A plugin's launches with arguments packed once: ``__call__`` only calls cuLaunchKernel."""

    def __init__(self, pdef: PluginDef, inputs: list[torch.Tensor | None], attrs: dict[str, Any]) -> None:
        assert pdef.cuda is not None
        self.attrs = pdef.resolve_attrs(attrs)
        present = pdef.present(self.attrs, inputs)
        self.tensors = [x.contiguous() for x in present if x is not None]
        info = self.info = pdef.launch_info(self.attrs, [tuple(x.shape) for x in self.tensors], [x.dtype for x in self.tensors])
        dev = self.tensors[0].device
        self.outputs = [torch.empty(s, dtype=d, device=dev) for s, d in zip(info.outputs, info.output_dtypes, strict=True)]
        ws = pdef.cuda.workspace_bytes(info)
        self.ws = torch.empty(ws, dtype=torch.uint8, device=dev) if ws else None
        self.drv = nvrtc._driver()
        self.launches = []
        for lc in pdef.cuda.launches(info):
            fn = nvrtc.get_function(pdef.cuda, lc.kernel)
            holders = nvrtc.pack_args(lc, info, [x.data_ptr() for x in self.tensors],
                                      [o.data_ptr() for o in self.outputs], self.ws.data_ptr() if self.ws is not None else 0)
            params = (ctypes.c_void_p * max(len(holders), 1))(*[ctypes.addressof(h) for h in holders])
            self.launches.append((fn, lc, holders, params))
        self.kernels = [lc.kernel for _, lc, _, _ in self.launches]

    def __call__(self, only: int | None = None) -> list[torch.Tensor]:
        """All launches in order, or launch ``only`` alone (its inputs, e.g. the workspace another
        launch fills, are whatever an earlier full call left there)."""
        stream = self.drv.CUstream(torch.cuda.current_stream().cuda_stream)
        for i, (fn, lc, _, params) in enumerate(self.launches):
            if 0 in lc.grid or (only is not None and i != only):
                continue
            err, *_ = self.drv.cuLaunchKernel(fn, *lc.grid, *lc.block, lc.shared_mem, stream, ctypes.addressof(params), 0)
            if int(err) != 0:
                raise RuntimeError(f"cuLaunchKernel({lc.kernel}) failed: {err}")
        return self.outputs

    def per_kernel(self, streamed_bytes: dict[str, int], repeats: int, warmup: int) -> list[dict[str, Any]]:
        """Each launch timed alone. The memory-bound ones (``streamed_bytes``: kernel -> the bytes it
        must read plus write) also get a device copy of as many bytes timed, and the fraction of the
        copy bandwidth they reach (copy time / kernel time): issue 4's >= 0.8 goal."""
        rows = []
        for i, (_, lc, _, _) in enumerate(self.launches):
            t = cuda_time(functools.partial(self, i), repeats, warmup)
            row: dict[str, Any] = {"kernel": lc.kernel, "grid": list(lc.grid), **t}
            nb = streamed_bytes.get(lc.kernel)
            if nb:
                copy = cuda_time(copy_of(nb), repeats, warmup)
                row.update(streamed_bytes=nb, GBps=nb / (t["median_ms"] * 1e-3) / 1e9, copy_same_bytes=copy,
                           fraction_of_copy_bandwidth=copy["median_ms"] / t["median_ms"])
            rows.append(row)
        return rows


def nbytes(*ts: torch.Tensor | None) -> int:
    return sum(t.numel() * t.element_size() for t in ts if t is not None)


def copy_bandwidth_gbs(repeats: int, warmup: int, size: int = 1 << 28) -> dict[str, float]:
    src = torch.empty(size, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    t = cuda_time(lambda: dst.copy_(src), repeats, warmup)
    return {"bytes": size, **t, "read_plus_write_GBps": 2 * size / (t["median_ms"] * 1e-3) / 1e9}


def copy_of(nb: int) -> Callable[[], Any]:
    src = torch.empty(max(nb // 2, 1), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)  # NOTE: reads and writes nb bytes in all, like the kernel's traffic


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return (got.float() - want.float()).abs().max().item() / max(want.float().abs().max().item(), 1e-6)


def deform_configs(quick: bool) -> list[dict[str, Any]]:
    cfgs = [
        dict(name="dcnv2_r50_c3", n=8, cin=128, h=64, w=64, cout=128, k=3, groups=1, og=1, mask=True),
        dict(name="dcnv1_c5_og4", n=4, cin=512, h=16, w=16, cout=512, k=3, groups=1, og=4, mask=False),
        dict(name="dcn_depthwise", n=4, cin=64, h=56, w=56, cout=64, k=3, groups=64, og=1, mask=True),
    ]
    return cfgs[:1] if quick else cfgs


def roi_configs(quick: bool) -> list[dict[str, Any]]:
    cfgs = [
        dict(name="fpn_p2_1000rois_7x7_sr2", n=2, c=256, h=200, w=304, k=1000, out=(7, 7), scale=0.25, sr=2, aligned=True),
        dict(name="p4_512rois_14x14_adaptive", n=2, c=256, h=50, w=76, k=512, out=(14, 14), scale=1 / 16, sr=-1,
             aligned=False),
    ]
    return cfgs[:1] if quick else cfgs


def bench_deform(pdef: PluginDef, cfg: dict[str, Any], dtype: torch.dtype, repeats: int, warmup: int) -> dict[str, Any]:
    g = torch.Generator(device="cuda").manual_seed(0)
    n, cin, h, w, cout, k = cfg["n"], cfg["cin"], cfg["h"], cfg["w"], cfg["cout"], cfg["k"]
    x = torch.randn(n, cin, h, w, device="cuda", generator=g, dtype=dtype)
    off = torch.randn(n, 2 * cfg["og"] * k * k, h, w, device="cuda", generator=g, dtype=dtype)
    wt = (torch.randn(cout, cin // cfg["groups"], k, k, device="cuda", generator=g) * 0.05).to(dtype)
    m = torch.rand(n, cfg["og"] * k * k, h, w, device="cuda", generator=g, dtype=dtype) if cfg["mask"] else None
    b = torch.randn(cout, device="cuda", generator=g, dtype=dtype)
    kw = {"stride": (1, 1), "padding": (k // 2, k // 2), "dilation": (1, 1)}
    kernel = PreparedKernel(pdef, [x, off, wt, m, b], {**kw, "has_mask": m is not None, "has_bias": True})
    (out,) = kernel()
    ref = pdef.reference(x, off, wt, m, b, **kw)
    flops = 2 * n * cout * h * w * (cin // cfg["groups"]) * k * k
    res: dict[str, Any] = {
        "op": "deform_conv2d", **cfg, "dtype": str(dtype), "kernels": kernel.kernels,
        "rel_err_vs_reference": rel_err(out, ref), "bytes_moved": nbytes(x, off, wt, m, b, out), "flops": flops,
        "plugin": cuda_time(kernel, repeats, warmup),
        "torch_reference": cuda_time(lambda: pdef.reference(x, off, wt, m, b, **kw), 100, 3),
    }
    try:
        res["torchvision"] = cuda_time(lambda: torchvision.ops.deform_conv2d(x, off, wt, b, mask=m, **kw), repeats, warmup)
    except (RuntimeError, NotImplementedError) as e:  # NOTE: torchvision builds without CUDA ops or fp16 support
        res["torchvision"] = {"error": str(e).splitlines()[0]}
    res["copy_same_bytes"] = cuda_time(copy_of(res["bytes_moved"]), repeats, warmup)
    res["plugin_TFLOPs"] = flops / (res["plugin"]["median_ms"] * 1e-3) / 1e12
    if "gemm" in "".join(kernel.kernels):
        res["variants"] = deform_variants(dtype, [x, off, wt, m, b], kernel.attrs, ref, flops, repeats, warmup)
    plan = deform_conv2d.launch_plan(kernel.info)
    sfx = "fp16" if dtype == torch.float16 else "fp32"
    res["per_kernel"] = kernel.per_kernel(
        {  # NOTE: the memory-bound helpers; the gemm and m16 kernels are compute- or gather-bound
            f"deform_conv2d_{sfx}_wprep": nbytes(wt) + plan["wt_bytes"],
            f"deform_conv2d_{sfx}_splitk_sum": plan["splits"] * out.numel() * 4 + nbytes(out, b),  # fp32 partials
        },
        repeats, warmup,
    )
    return res


def deform_variants(
    dtype: torch.dtype, inputs: list[torch.Tensor | None], attrs: Any, ref: torch.Tensor, flops: int, repeats: int,
    warmup: int,
) -> dict[str, Any]:
    """The gemm path with its split-K factor forced, and fp32 on CUDA cores instead of 3xTF32: the
    measurements the launch rule's choices (SPLIT_BELOW, TARGET_BLOCKS, the fp32 math) rest on."""
    options: dict[str, dict[str, Any]] = {f"splits={s}": {"splits": s} for s in (1, 2, 4, 8)}
    if dtype == torch.float32:
        options["fp32_cuda_cores"] = {"f32_simt": True}
    out: dict[str, Any] = {}
    for name, kw in options.items():
        vk = PreparedKernel(deform_conv2d.variant(**kw), inputs, dict(attrs))
        (got,) = vk()
        t = cuda_time(vk, repeats, warmup)
        out[name] = {"kernels": vk.kernels, "rel_err_vs_reference": rel_err(got, ref), **t,
                     "TFLOPs": flops / (t["median_ms"] * 1e-3) / 1e12}
    return out


def bench_roi(pdef: PluginDef, cfg: dict[str, Any], dtype: torch.dtype, repeats: int, warmup: int) -> dict[str, Any]:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(cfg["n"], cfg["c"], cfg["h"], cfg["w"], device="cuda", generator=g, dtype=dtype)
    img = torch.tensor([cfg["w"], cfg["h"]], device="cuda") / cfg["scale"]
    xy = torch.rand(cfg["k"], 2, device="cuda", generator=g) * img * 0.8
    wh = torch.rand(cfg["k"], 2, device="cuda", generator=g) * img * 0.3 + 4
    bidx = torch.randint(0, cfg["n"], (cfg["k"], 1), device="cuda", generator=g).float()
    rois = torch.cat([bidx, xy, xy + wh], 1).to(dtype)
    attrs = {"output_size": cfg["out"], "spatial_scale": cfg["scale"], "sampling_ratio": cfg["sr"], "aligned": cfg["aligned"]}
    kernel = PreparedKernel(pdef, [x, rois], attrs)
    (out,) = kernel()
    ref = pdef.reference(x, rois, **attrs)
    ref64 = pdef.reference(x.double(), rois.double(), **attrs)  # NOTE: how far fp32 coordinates alone move results
    res: dict[str, Any] = {
        "op": "roi_align", **cfg, "dtype": str(dtype), "kernels": kernel.kernels,
        "rel_err_vs_reference": rel_err(out, ref), "rel_err_vs_fp64_reference": rel_err(out, ref64),
        "reference_rel_err_vs_fp64_reference": rel_err(ref, ref64), "bytes_written": nbytes(out),
        **roi_traffic(x, rois, cfg),
        "plugin": cuda_time(kernel, repeats, warmup),
        "torch_reference": cuda_time(lambda: pdef.reference(x, rois, **attrs), 100, 3),
    }
    for layout in ("nchw", "nhwc"):  # NOTE: both paths of the launch rule, whichever it picks
        try:
            forced = PreparedKernel(roi_align.variant(layout), [x, rois], attrs)
        except PluginError as e:
            res[f"plugin_{layout}"] = {"error": str(e)}
            continue
        (out_l,) = forced()
        res[f"plugin_{layout}"] = {
            "kernels": forced.kernels, "rel_err_vs_reference": rel_err(out_l, ref),
            **cuda_time(forced, repeats, warmup),
            "per_kernel": forced.per_kernel(  # NOTE: the transpose is the memory-bound one
                {k: 2 * nbytes(x) for k in forced.kernels if "nchw_to_nhwc" in k}, repeats, warmup
            ),
        }
    try:
        tv = torchvision.ops.roi_align(x, rois, cfg["out"], cfg["scale"], cfg["sr"], cfg["aligned"])
        res["rel_err_vs_torchvision"] = rel_err(out, tv)
        res["torchvision_rel_err_vs_fp64_reference"] = rel_err(tv, ref64)
        res["torchvision"] = cuda_time(
            lambda: torchvision.ops.roi_align(x, rois, cfg["out"], cfg["scale"], cfg["sr"], cfg["aligned"]), repeats, warmup
        )
    except (RuntimeError, NotImplementedError) as e:
        res["torchvision"] = {"error": str(e).splitlines()[0]}
    res["copy_same_bytes"] = cuda_time(copy_of(2 * res["bytes_written"]), repeats, warmup)
    res["copy_compulsory_bytes"] = cuda_time(copy_of(res["compulsory_bytes"]), repeats, warmup)
    res["fraction_of_copy_bandwidth"] = res["copy_compulsory_bytes"]["median_ms"] / res["plugin"]["median_ms"]
    return res


def roi_traffic(x: torch.Tensor, rois: torch.Tensor, cfg: dict[str, Any]) -> dict[str, Any]:
    """The least DRAM traffic any RoIAlign kernel needs (write the output, read each input element the
    samples touch once) and how many bilinear taps it makes (4 per sample): the roofline inputs."""
    n, c, h, w = x.shape
    es = x.element_size()
    ph, pw = cfg["out"]
    half = 0.5 if cfg["aligned"] else 0.0
    rois = rois.double().cpu()  # NOTE: one transfer; the loop below reads every box
    box = rois[:, 1:] * cfg["scale"] - half
    rw, rh = box[:, 2] - box[:, 0], box[:, 3] - box[:, 1]
    if not cfg["aligned"]:
        rw, rh = rw.clamp(min=1), rh.clamp(min=1)
    gh = torch.full_like(rh, cfg["sr"]) if cfg["sr"] > 0 else torch.ceil(rh / ph)
    gw = torch.full_like(rw, cfg["sr"]) if cfg["sr"] > 0 else torch.ceil(rw / pw)
    touched = torch.zeros(n, h, w, dtype=torch.bool)
    for (b, *_), (bx0, by0, bx1, by1) in zip(rois.tolist(), box.tolist(), strict=True):
        # NOTE: the bounding region of each box's samples (plus one pixel)
        touched[int(b), int(max(by0, 0)) : int(min(by1 + 2, h)), int(max(bx0, 0)) : int(min(bx1 + 2, w))] = True
    out_bytes = rois.shape[0] * c * ph * pw * es
    in_bytes = int(touched.sum().item()) * c * es
    taps = int((gh * gw).clamp(min=1).sum().item()) * c * ph * pw * 4
    return {"compulsory_bytes": out_bytes + in_bytes, "input_bytes_touched": in_bytes, "bilinear_taps": taps}


def goals(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Issue 4's goals per measured case: faster than torchvision's CUDA op, the error bound (fp32
    1e-5, fp16 1e-2, relative to the largest reference magnitude), and the fraction of the copy
    bandwidth each memory-bound kernel reaches (goal >= 0.8)."""
    rows = []
    for r in results:
        tv = r.get("torchvision", {}).get("median_ms")
        ours = r["plugin"]["median_ms"]
        tol = 1e-5 if r["dtype"] == str(torch.float32) else 1e-2
        rows.append({
            "op": r["op"], "name": r["name"], "dtype": r["dtype"],
            "speedup_vs_torchvision": tv / ours if tv else float("nan"),
            "faster_than_torchvision": bool(tv and ours < tv),
            "within_tolerance": r["rel_err_vs_reference"] <= tol,
            "memory_bound_kernels_fraction_of_copy_bandwidth": {
                row["kernel"]: row["fraction_of_copy_bandwidth"]
                for rows_ in (r.get("per_kernel", []), r.get("plugin_nhwc", {}).get("per_kernel", []))
                for row in rows_ if "fraction_of_copy_bandwidth" in row
            },
            **({"fraction_of_copy_bandwidth": r["fraction_of_copy_bandwidth"]} if "fraction_of_copy_bandwidth" in r else {}),
        })
    return rows


def environment() -> dict[str, Any]:
    import cuda.bindings

    props = torch.cuda.get_device_properties(0)
    return {
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(0),
        "capability": list(torch.cuda.get_device_capability(0)),
        "sm_count": props.multi_processor_count,
        "memory_GiB": round(props.total_memory / 2**30, 1),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "torchvision": torchvision.__version__,
        "cuda_python": getattr(cuda.bindings, "__version__", "?"),
        "nvrtc": ".".join(map(str, nvrtc.nvrtc_version())),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--repeats", type=int, default=200, help="timed runs per measurement (median reported)")
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="one configuration per op")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("plugins_bench: no CUDA device; nothing to measure", file=sys.stderr)
        return 2
    if args.repeats < 100:
        print("plugins_bench: --repeats below 100 gives unstable medians; using 100", file=sys.stderr)
        args.repeats = 100
    load_builtin_plugins()
    dc, ra = get_plugin("deform_conv2d", "1"), get_plugin("roi_align", "1")
    torch.backends.cudnn.benchmark = False
    results: dict[str, Any] = {"environment": environment(), "settings": vars(args), "results": []}
    results["copy_bandwidth"] = copy_bandwidth_gbs(args.repeats, args.warmup)
    print(f"{results['environment']['device']}: copy {results['copy_bandwidth']['read_plus_write_GBps']:.0f} GB/s")
    for dtype in (torch.float32, torch.float16):
        for cfg in deform_configs(args.quick):
            r = bench_deform(dc, cfg, dtype, args.repeats, args.warmup)
            results["results"].append(r)
            print(f"deform_conv2d {cfg['name']:18} {str(dtype):14} plugin {r['plugin']['median_ms']:.3f} ms "
                  f"({r['plugin_TFLOPs']:.1f} TFLOP/s)  torchvision {r['torchvision'].get('median_ms', float('nan')):.3f} ms  "
                  f"reference {r['torch_reference']['median_ms']:.3f} ms  err {r['rel_err_vs_reference']:.1e}")
            for name, v in r.get("variants", {}).items():
                print(f"    variant {name:16} {v['median_ms']:.3f} ms  err {v['rel_err_vs_reference']:.1e}")
        for cfg in roi_configs(args.quick):
            r = bench_roi(ra, cfg, dtype, args.repeats, args.warmup)
            results["results"].append(r)
            print(f"roi_align     {cfg['name']:18} {str(dtype):14} plugin {r['plugin']['median_ms']:.3f} ms  "
                  f"torchvision {r['torchvision'].get('median_ms', float('nan')):.3f} ms  "
                  f"reference {r['torch_reference']['median_ms']:.3f} ms  err {r['rel_err_vs_reference']:.1e} "
                  f"(vs torchvision {r.get('rel_err_vs_torchvision', float('nan')):.1e})  "
                  f"{r['fraction_of_copy_bandwidth']:.2f} of copy bandwidth  "
                f"[direct {r['plugin_nchw'].get('median_ms', float('nan')):.3f} ms, "
                f"channels-last {r['plugin_nhwc'].get('median_ms', float('nan')):.3f} ms]")
    results["goals"] = goals(results["results"])
    for g in results["goals"]:
        print(f"goal {g['op']:13} {g['name']:26} {g['dtype']:14} speedup vs torchvision {g['speedup_vs_torchvision']:.2f} "
              f"({'met' if g['faster_than_torchvision'] else 'NOT met'})  within tolerance: {g['within_tolerance']}")
        for k, f in g["memory_bound_kernels_fraction_of_copy_bandwidth"].items():
            print(f"     memory-bound {k:32} {f:.2f} of copy bandwidth ({'met' if f >= 0.8 else 'NOT met'})")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(results, indent=2))
    tmp.replace(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
