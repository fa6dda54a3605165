"""CUDA plugin kernels run on the CPU through the host emulator (torch2trt_lite.plugins.host_emulator), against torch.

No GPU needed: g++ compiles each kernel for the host with ``__CUDA_ARCH__`` set to 750 (Turing) and
900 (Hopper), so both sides of an architecture branch are executed. Outputs are NaN-poisoned, so an
element the kernel never writes fails the comparison. Every case runs with the threads of a block
in forward and in reverse order and the two results must be bit-identical: a missing
``__syncthreads`` (a read of shared memory another thread has not written yet) changes them.

Tolerances (relative to the largest reference magnitude, as the GPU checks): fp32 1e-5 (the
emulator computes without FMA contraction), fp16 1e-2.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import zlib
from typing import Any

import pytest
import torch

from torch2trt_lite.errors import PluginError
from torch2trt_lite.plugins.api import Launch
from torch2trt_lite.plugins.host_emulator import build, compiler, emulate_plugin

pytestmark = pytest.mark.skipif(
    compiler() is None, reason="the CUDA host emulator needs a C++ compiler (g++)"
)

torchvision = pytest.importorskip(
    "torchvision", reason="the built-in plugins are checked against torchvision"
)

from tests.plugins.test_plugins import DEFORM_CASES as SHARED_DEFORM_CASES  # noqa: E402
from tests.plugins.test_plugins import deform_inputs, roi_inputs  # noqa: E402
from torch2trt_lite.plugins_cuda.deform_conv2d import PLUGIN as DEFORM  # noqa: E402
from torch2trt_lite.plugins_cuda.deform_conv2d import variant as deform_variant  # noqa: E402
from torch2trt_lite.plugins_cuda.roi_align import PLUGIN as ROI_ALIGN  # noqa: E402
from torch2trt_lite.plugins_cuda.roi_align import variant as roi_align_variant  # noqa: E402

ARCHS = (750, 900)
# fp16: a few fp16 units of the output (one rounding is ~3e-4 here; fp32 accumulation measured <= 4e-4)
TOL = {torch.float32: 1e-5, torch.float16: 2e-3}


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    if want.numel() == 0:
        return 0.0
    diff = (got.float() - want.float()).abs().max().item()
    return float("inf") if diff != diff else diff / max(want.float().abs().max().item(), 1e-6)


def ptr(t: torch.Tensor) -> ctypes.c_void_p:
    return ctypes.c_void_p(t.data_ptr())


def run(
    source: str, name: str, grid: Any, block: Any, args: list[Any], *, arch: int = 900, order: str = "forward"
) -> None:
    mod = build(source, filename=f"<{name}>.cu", entry_points=(name,), arch=arch)
    mod.launch(Launch(name, grid, block, []), args, order=order)


# ------------------------------------------------------------------------------ the emulator itself
INDEX_SRC = r"""
extern "C" __global__ void ids(int* out, int n) {
  const int b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int i = b * blockDim.x * blockDim.y * blockDim.z + t;
  if (i < n) out[i] = i;
}
"""


def test_thread_and_block_indices_cover_the_grid() -> None:
    out = torch.full((2 * 3 * 2 * 4 * 2 * 3,), -1, dtype=torch.int32)
    run(INDEX_SRC, "ids", (2, 3, 2), (4, 2, 3), [ptr(out), ctypes.c_int32(out.numel())])
    torch.testing.assert_close(out, torch.arange(out.numel(), dtype=torch.int32), rtol=0, atol=0)


REDUCE_SRC = r"""
template <bool SYNC>
__device__ void reduce(const float* x, float* out) {
  __shared__ float buf[64];
  buf[threadIdx.x] = x[blockIdx.x * 64 + threadIdx.x];
  if (SYNC) __syncthreads();
  for (int s = 32; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    if (SYNC) __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = buf[0];
}
extern "C" __global__ void reduce_ok(const float* x, float* out) { reduce<true>(x, out); }
extern "C" __global__ void reduce_racy(const float* x, float* out) { reduce<false>(x, out); }
"""


def test_shared_memory_and_barriers() -> None:
    x = torch.randn(3, 64)
    for order in ("forward", "reverse"):
        out = torch.full((3,), float("nan"))
        run(REDUCE_SRC, "reduce_ok", 3, 64, [ptr(x), ptr(out)], order=order)
        torch.testing.assert_close(out, x.sum(1), rtol=1e-5, atol=1e-5)


def test_a_missing_barrier_shows_as_an_order_difference() -> None:
    x = torch.randn(3, 64)
    outs = []
    for order in ("forward", "reverse"):
        out = torch.full((3,), float("nan"))
        run(REDUCE_SRC, "reduce_racy", 3, 64, [ptr(x), ptr(out)], order=order)
        outs.append(out)
    assert not torch.equal(outs[0], outs[1])


ALIGN_SRC = r"""
extern "C" __global__ void aligned_vec(const float* x, float* out) {
  __shared__ __align__(16) float buf[64];
  reinterpret_cast<float4*>(buf)[threadIdx.x] = reinterpret_cast<const float4*>(x)[threadIdx.x];
  __syncthreads();
  const float4 v = reinterpret_cast<const float4*>(buf)[15 - threadIdx.x];
  out[threadIdx.x] = v.x + v.y + v.z + v.w + (float)(reinterpret_cast<unsigned long long>(buf) % 16);
}
"""


def test_aligned_shared_memory_and_vector_loads() -> None:
    x = torch.randn(64)
    out = torch.full((16,), float("nan"))
    run(ALIGN_SRC, "aligned_vec", 1, 16, [ptr(x), ptr(out)])
    torch.testing.assert_close(out, x.view(16, 4).sum(1).flip(0), rtol=1e-6, atol=1e-6)


DEADLOCK_SRC = r"""
extern "C" __global__ void half_barrier(float* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1.f;
  __syncwarp();
}
"""


def test_a_barrier_not_reached_by_every_thread_is_reported() -> None:
    out = torch.zeros(32)
    with pytest.raises(PluginError, match="deadlock"):
        run(DEADLOCK_SRC, "half_barrier", 1, 32, [ptr(out)])


SHFL_SRC = r"""
extern "C" __global__ void warp_ops(const float* x, float* down, float* bfly, float* bcast) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = x[i], w = x[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffffu, w, o);
  if ((threadIdx.x & 31) == 0) down[i / 32] = v;
  bfly[i] = w;
  bcast[i] = __shfl_sync(0xffffffffu, x[i], 5);
}
"""


def test_warp_shuffles() -> None:
    x = torch.randn(2 * 64)
    down, bfly, bcast = (
        torch.full((4,), float("nan")),
        torch.full((128,), float("nan")),
        torch.full((128,), float("nan")),
    )
    run(SHFL_SRC, "warp_ops", 2, 64, [ptr(x), ptr(down), ptr(bfly), ptr(bcast)])
    warps = x.view(4, 32)
    torch.testing.assert_close(down, warps.sum(1), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bfly, warps.sum(1).repeat_interleave(32), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(bcast, warps[:, 5].repeat_interleave(32), rtol=0, atol=0)


WMMA_SRC = r"""
#include <mma.h>
using namespace nvcuda;
extern "C" __global__ void mm_half(const __half* a, const __half* b, float* c) {  // a row-major, b col-major
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
  wmma::fill_fragment(fc, 0.f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::mma_sync(fc, fa, fb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
extern "C" __global__ void mm_3xtf32(const float* a, const float* b, float* c) {  // 16x8 @ 8x16, row-major
#if __CUDA_ARCH__ >= 800
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> ab, as;
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> bb, bs;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> fc;
  wmma::fill_fragment(fc, 0.f);
  wmma::load_matrix_sync(ab, a, 8);
  wmma::load_matrix_sync(bb, b, 16);
  for (int i = 0; i < ab.num_elements; ++i) {
    const float v = ab.x[i];
    ab.x[i] = wmma::__float_to_tf32(v);
    as.x[i] = wmma::__float_to_tf32(v - ab.x[i]);
  }
  for (int i = 0; i < bb.num_elements; ++i) {
    const float v = bb.x[i];
    bb.x[i] = wmma::__float_to_tf32(v);
    bs.x[i] = wmma::__float_to_tf32(v - bb.x[i]);
  }
  wmma::mma_sync(fc, as, bb, fc);
  wmma::mma_sync(fc, ab, bs, fc);
  wmma::mma_sync(fc, ab, bb, fc);
  wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
#endif
}
"""


def test_wmma_half_and_3xtf32() -> None:
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    c = torch.full((16, 16), float("nan"))
    ah, bh = a.half(), b.half()
    bh_cols = bh.t().contiguous()  # NOTE: kept alive for the launch
    run(WMMA_SRC, "mm_half", 1, 32, [ptr(ah), ptr(bh_cols), ptr(c)])
    torch.testing.assert_close(c, ah.float() @ bh.float(), rtol=1e-5, atol=1e-5)
    a8, b8 = torch.randn(16, 8), torch.randn(8, 16)
    c = torch.full((16, 16), float("nan"))
    run(WMMA_SRC, "mm_3xtf32", 1, 32, [ptr(a8), ptr(b8), ptr(c)])
    torch.testing.assert_close(c, a8 @ b8, rtol=1e-5, atol=1e-5)  # 3xTF32 keeps fp32 accuracy


def test_wmma_on_a_misaligned_pointer_is_an_error() -> None:
    """The device needs 256-bit aligned wmma pointers (undefined behaviour otherwise)."""
    buf = torch.zeros(16 * 16 + 16, dtype=torch.float16)
    c = torch.zeros(16, 16)
    misaligned = ctypes.c_void_p(buf.data_ptr() + 16)  # NOTE: 16-byte aligned only
    with pytest.raises(PluginError, match="load_matrix_sync: pointer not 256-bit aligned"):
        run(WMMA_SRC, "mm_half", 1, 32, [misaligned, ptr(buf), ptr(c)])


def test_compile_errors_quote_the_kernel_file() -> None:
    with pytest.raises(PluginError, match=r"broken\.cu:2"):
        build(
            'extern "C" __global__ void k(float* x) {\n  x[0] = undefined_name;\n}\n',
            filename="broken.cu",
            entry_points=("k",),
        )


# ------------------------------------------------------------------------------ built-in plugins
def _both_orders(pdef: Any, inputs: list[Any], attrs: dict[str, Any], arch: int) -> torch.Tensor:
    (fwd,) = emulate_plugin(pdef, inputs, attrs, arch=arch, order="forward")
    (rev,) = emulate_plugin(pdef, inputs, attrs, arch=arch, order="reverse")
    same = torch.equal(
        fwd.flatten().view(torch.uint8), rev.flatten().view(torch.uint8)
    )  # NOTE: bits, NaN included
    assert same, "the result depends on the order of the threads: a missing barrier?"
    return fwd


DEFORM_CASES = {
    # name: (n, cin, h, w, cout, (kh, kw), groups, offset_groups, stride, padding, dilation, mask, bias)
    "v2_basic": (2, 8, 9, 11, 20, (3, 3), 1, 1, (1, 1), (1, 1), (1, 1), True, True),
    "v1_no_mask_no_bias": (1, 6, 7, 8, 5, (3, 3), 1, 1, (1, 1), (1, 1), (1, 1), False, False),
    "groups_offset_groups": (2, 8, 9, 11, 20, (3, 3), 2, 2, (1, 1), (1, 1), (1, 1), True, True),
    "stride_pad_dilation": (1, 4, 13, 12, 7, (3, 2), 1, 2, (2, 1), (2, 0), (2, 3), True, True),
    "depthwise": (2, 16, 10, 9, 16, (3, 3), 16, 1, (1, 1), (1, 1), (1, 1), True, True),
    "wide_cout_1x1": (1, 24, 5, 6, 72, (1, 1), 1, 3, (1, 1), (0, 0), (1, 1), False, True),
    "odd_cin": (1, 17, 6, 7, 33, (3, 3), 1, 1, (1, 1), (1, 1), (1, 1), True, True),
    # C_out / groups > 128: two output-channel tiles (m0 > 0) and weights padded past one tile
    "two_channel_tiles": (1, 8, 5, 6, 136, (3, 3), 1, 1, (1, 1), (1, 1), (1, 1), True, True),
    "two_channel_tiles_groups": (1, 12, 4, 5, 272, (1, 3), 2, 2, (1, 1), (0, 1), (1, 1), True, True),
}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", list(DEFORM_CASES))
def test_deform_conv2d_kernel(case: str, dtype: torch.dtype, arch: int) -> None:
    _check_deform_case(DEFORM, case, dtype, arch)


@pytest.mark.parametrize(
    "arch, dtype, kwargs, launches",
    [
        # launches: (odd_cin, two_channel_tiles_groups); 3 = weight prep, gemm, split-K sum
        pytest.param(900, torch.float32, dict(f32_simt=True), (3, 2), id="fp32-cuda-cores-on-sm90"),
        pytest.param(900, torch.float32, dict(splits=3), (3, 3), id="split3-fp32"),
        pytest.param(800, torch.float16, dict(splits=5), (3, 3), id="split5-fp16"),
        pytest.param(900, torch.float16, dict(splits=64), (3, 3), id="more-splits-than-chunks"),
        pytest.param(750, torch.float32, dict(splits=1), (2, 2), id="no-split"),
    ],
)
def test_deform_conv2d_variants_compute_the_same(
    arch: int, dtype: torch.dtype, kwargs: dict[str, Any], launches: tuple[int, int]
) -> None:
    """The launch-rule variants the benchmark times (forced split-K, fp32 on CUDA cores) are correct."""
    pdef = deform_variant(**kwargs)
    for case, count in zip(("odd_cin", "two_channel_tiles_groups"), launches, strict=True):  # ungrouped, grouped
        info = _deform_launch_info(pdef, case, dtype)
        kernels = [lc.kernel for lc in pdef.cuda.launches(info)]  # type: ignore[union-attr]
        assert len(kernels) == count and kernels[1].endswith("_gemm"), (case, kernels)
        _check_deform_case(pdef, case, dtype, arch)


def _deform_launch_info(pdef: Any, case: str, dtype: torch.dtype) -> Any:
    n, cin, h, w, cout, (kh, kw), groups, og, stride, padding, dilation, has_mask, has_bias = DEFORM_CASES[case]
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    attrs = pdef.resolve_attrs({"has_mask": has_mask, "has_bias": has_bias, "stride": stride, "padding": padding,
                                "dilation": dilation})
    shapes = [(n, cin, h, w), (n, 2 * og * kh * kw, ho, wo), (cout, cin // groups, kh, kw), (n, og * kh * kw, ho, wo),
              (cout,)]
    return pdef.launch_info(attrs, shapes, [dtype] * 5)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", ["v2_basic", "depthwise"])
def test_deform_conv2d_inf_reaches_only_the_samples_that_touch_it(case: str, dtype: torch.dtype, arch: int) -> None:
    """An inf at each plane's first element (as padding-free feature maps can hold) is outside most
    samples' footprints: those outputs must stay finite, as torchvision's do. Samples wholly outside
    the image (padding) and corners outside it read no pixel, so nothing leaks from element 0."""
    n, cin, h, w, cout, (kh, kw), groups, og, stride, padding, dilation, has_mask, has_bias = DEFORM_CASES[case]
    g = torch.Generator().manual_seed(7)
    x = torch.randn(n, cin, h, w, generator=g)
    x[:, :, 0, 0] = float("inf")
    off = torch.randn(n, 2 * og * kh * kw, h, w, generator=g) * 2
    wt = torch.randn(cout, cin // groups, kh, kw, generator=g).abs() / (cin // groups * kh * kw)  # NOTE: no inf - inf
    mask = torch.rand(n, og * kh * kw, h, w, generator=g) + 0.1 if has_mask else None
    geo = {"stride": stride, "padding": padding, "dilation": dilation}
    cast = [t.to(dtype) if t is not None else None for t in (x, off, wt, mask)]
    got = _both_orders(DEFORM, [*cast, None], {**geo, "has_mask": has_mask, "has_bias": False}, arch)
    tv = torchvision.ops.deform_conv2d(
        *[t.float() for t in cast[:3]], None, mask=cast[3].float() if has_mask else None, **geo  # type: ignore[union-attr]
    )
    finite = torch.isfinite(tv)
    assert 0 < int(finite.sum()) < tv.numel()  # NOTE: the case has outputs on both sides
    assert torch.equal(torch.isfinite(got), finite), "outputs finite in torchvision are not here (or the reverse)"
    assert rel_err(got[finite], tv[finite]) <= TOL[dtype]


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_deform_conv2d_nan_in_the_mask_reaches_the_output(dtype: torch.dtype, arch: int) -> None:
    """A NaN mask value (either sign: x86 makes negative NaNs) poisons its outputs, as in torchvision:
    the kernel's mark for a sample outside the image (w0 = -0.0) must not catch a NaN weight."""
    n, cin, h, w, cout, (kh, kw), groups, og, stride, padding, dilation, _, _ = DEFORM_CASES["v2_basic"]
    g = torch.Generator().manual_seed(8)
    x = torch.randn(n, cin, h, w, generator=g)
    off = torch.randn(n, 2 * og * kh * kw, h, w, generator=g) * 0.5
    wt = torch.randn(cout, cin // groups, kh, kw, generator=g)
    mask = torch.rand(n, og * kh * kw, h, w, generator=g)
    mask[0, 4, 2, 3] = float("nan")
    mask[1, 0, 5, 5] = -torch.tensor(float("nan"))
    assert torch.signbit(mask[1, 0, 5, 5])
    geo = {"stride": stride, "padding": padding, "dilation": dilation}
    cast = [t.to(dtype) for t in (x, off, wt, mask)]
    got = _both_orders(DEFORM, [*cast, None], {**geo, "has_mask": True, "has_bias": False}, arch)
    tv = torchvision.ops.deform_conv2d(*[t.float() for t in cast[:3]], None, mask=cast[3].float(), **geo)
    assert int(torch.isnan(tv).sum()) == 2 * cout
    assert torch.equal(torch.isnan(got), torch.isnan(tv))


def _check_deform_case(pdef: Any, case: str, dtype: torch.dtype, arch: int) -> None:
    n, cin, h, w, cout, (kh, kw), groups, og, stride, padding, dilation, has_mask, has_bias = DEFORM_CASES[
        case
    ]
    g = torch.Generator().manual_seed(zlib.crc32(case.encode()))
    x = torch.randn(n, cin, h, w, generator=g)
    ho = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    off = (
        torch.randn(n, 2 * og * kh * kw, ho, wo, generator=g) * 3
    )  # NOTE: many samples fall outside the image
    wt = torch.randn(cout, cin // groups, kh, kw, generator=g) / (cin // groups * kh * kw) ** 0.5
    mask = torch.rand(n, og * kh * kw, ho, wo, generator=g) if has_mask else None
    bias = torch.randn(cout, generator=g) if has_bias else None
    geo = {"stride": stride, "padding": padding, "dilation": dilation}
    cast = [t.to(dtype) if t is not None else None for t in (x, off, wt, mask, bias)]
    got = _both_orders(pdef, cast, {**geo, "has_mask": has_mask, "has_bias": has_bias}, arch)
    want = DEFORM.reference(*[t.float() if t is not None else None for t in cast], **geo)
    assert rel_err(got, want) <= TOL[dtype], f"relative error {rel_err(got, want):.3g}"
    tv = torchvision.ops.deform_conv2d(
        *[t.float() if t is not None else None for t in cast[:3]],
        cast[4].float() if has_bias else None,
        mask=cast[3].float() if has_mask else None,
        **geo,
    )
    assert rel_err(got, tv) <= TOL[dtype], f"vs torchvision: relative error {rel_err(got, tv):.3g}"


ROI_CASES = {
    # name: (n, c, h, w, output_size, spatial_scale, sampling_ratio, aligned, rois)
    "aligned_adaptive": (2, 5, 12, 14, (3, 4), 1.0, -1, True, 9),
    "unaligned_fixed": (2, 3, 16, 10, (2, 2), 0.5, 2, False, 7),
    "fpn_like": (1, 4, 200, 304, (7, 7), 0.25, 2, True, 300),  # NOTE: large coordinates (fp32 rounding)
    "tiny_and_degenerate_boxes": (1, 2, 6, 6, (5, 5), 1.0, -1, False, 6),
}


def _rois(n: int, h: int, w: int, scale: float, k: int, g: torch.Generator) -> torch.Tensor:
    img = torch.tensor([w, h]) / scale
    xy = torch.rand(k, 2, generator=g) * img * 1.1 - img * 0.05  # NOTE: some boxes cross the border
    wh = torch.rand(k, 2, generator=g) * img * 0.4
    wh[: k // 3] *= 0.01  # tiny boxes
    bidx = torch.randint(0, n, (k, 1), generator=g).float()
    return torch.cat([bidx, xy, xy + wh], 1)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", list(ROI_CASES))
def test_roi_align_kernel(case: str, dtype: torch.dtype, arch: int) -> None:
    n, c, h, w, out_size, scale, sr, aligned, k = ROI_CASES[case]
    g = torch.Generator().manual_seed(zlib.crc32(case.encode()))
    x = torch.randn(n, c, h, w, generator=g)
    rois = _rois(n, h, w, scale, k, g)
    attrs = {"output_size": out_size, "spatial_scale": scale, "sampling_ratio": sr, "aligned": aligned}
    got = _both_orders(ROI_ALIGN, [x.to(dtype), rois.to(dtype)], attrs, arch)
    want = ROI_ALIGN.reference(x.to(dtype).float(), rois.to(dtype).float(), **attrs)
    assert rel_err(got, want) <= TOL[dtype], f"relative error {rel_err(got, want):.3g}"
    tv = torchvision.ops.roi_align(x.to(dtype).float(), rois.to(dtype).float(), **attrs)
    assert rel_err(got, tv) <= TOL[dtype], f"vs torchvision: relative error {rel_err(got, tv):.3g}"
    if dtype == torch.float32:  # NOTE: same operations in the same order as torchvision's CPU kernel
        assert torch.equal(got, tv), f"not bit-identical to torchvision: {rel_err(got, tv):.3g}"


# ------------------------------------------------------- the cases the GPU checks use, on the CPU
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", SHARED_DEFORM_CASES)
def test_deform_conv2d_kernel_gpu_cases(case: dict[str, Any], dtype: torch.dtype, arch: int) -> None:
    ins, geo = deform_inputs(11, **case)
    cast = [t.to(dtype) if t is not None else None for t in ins]
    got = _both_orders(DEFORM, cast, {**geo, "has_mask": case["mask"], "has_bias": case["bias"]}, arch)
    want = DEFORM.reference(*[t.float() if t is not None else None for t in cast], **geo)
    assert rel_err(got, want) <= TOL[dtype], f"relative error {rel_err(got, want):.3g}"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("aligned, sampling_ratio", [(False, -1), (False, 2), (True, 0), (True, 3)])
def test_roi_align_kernel_gpu_cases(aligned: bool, sampling_ratio: int, dtype: torch.dtype) -> None:
    x, _, rois = roi_inputs(12)
    attrs = {
        "output_size": (5, 4),
        "spatial_scale": 0.75,
        "sampling_ratio": sampling_ratio,
        "aligned": aligned,
    }
    got = _both_orders(ROI_ALIGN, [x.to(dtype), rois.to(dtype)], attrs, 900)
    want = ROI_ALIGN.reference(x.to(dtype).float(), rois.to(dtype).float(), **attrs)
    assert rel_err(got, want) <= TOL[dtype], f"relative error {rel_err(got, want):.3g}"


def test_roi_align_with_no_rois_launches_nothing() -> None:
    x, _, rois = roi_inputs(13)
    (got,) = emulate_plugin(ROI_ALIGN, [x, rois[:0]], {"output_size": (2, 2)})
    assert got.shape == (0, 3, 2, 2)


# ----------------------------------------------------- roi_align: the channels-last path
NHWC_CASES = {
    # name: (n, c, h, w, output_size, spatial_scale, sampling_ratio, aligned, rois)
    "c40_7x7_sr2_aligned": (2, 40, 23, 31, (7, 7), 0.5, 2, True, 30),
    "c64_14x14_adaptive": (1, 64, 12, 15, (14, 14), 1.0, -1, False, 8),
    "c32_3x5_sr1": (3, 32, 9, 8, (3, 5), 0.25, 1, True, 12),
    "c98_tiles_with_tails": (1, 98, 10, 13, (7, 7), 0.5, 2, True, 40),  # NOTE: fp16: the half2 transpose
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
@pytest.mark.parametrize("case", list(NHWC_CASES))
def test_roi_align_channels_last_path_equals_the_direct_path(case: str, dtype: torch.dtype) -> None:
    from torch2trt_lite.plugins_cuda.roi_align import use_channels_last

    n, c, h, w, out_size, scale, sr, aligned, k = NHWC_CASES[case]
    g = torch.Generator().manual_seed(zlib.crc32(case.encode()))
    x = torch.randn(n, c, h, w, generator=g).to(dtype)
    rois = _rois(n, h, w, scale, k, g).to(dtype)
    attrs = {"output_size": out_size, "spatial_scale": scale, "sampling_ratio": sr, "aligned": aligned}
    info = ROI_ALIGN.launch_info(
        ROI_ALIGN.resolve_attrs(attrs), [tuple(x.shape), tuple(rois.shape)], [dtype, dtype]
    )
    assert use_channels_last(info), "the case should take the channels-last path"
    assert ROI_ALIGN.cuda is not None and ROI_ALIGN.cuda.workspace_bytes(info) == x.numel() * x.element_size()
    nhwc = _both_orders(ROI_ALIGN, [x, rois], attrs, 900)
    nchw = _both_orders(roi_align_variant("nchw"), [x, rois], attrs, 900)
    assert torch.equal(nhwc.flatten().view(torch.uint8), nchw.flatten().view(torch.uint8)), (
        f"paths differ by {(nhwc.float() - nchw.float()).abs().max().item():.3g}"
    )
    want = ROI_ALIGN.reference(x.float(), rois.float(), **attrs)
    assert rel_err(nhwc, want) <= TOL[dtype], f"relative error {rel_err(nhwc, want):.3g}"


def test_roi_align_half2_transpose_on_an_input_at_an_odd_half() -> None:
    """The fp16 channels-last transpose moves half2 words; an input view starting at an odd half
    (not 4-byte aligned) takes its element-wise loads and gives the same bits."""
    n, c, h, w, out_size, scale, sr, aligned, k = NHWC_CASES["c32_3x5_sr1"]
    g = torch.Generator().manual_seed(5)
    x = torch.randn(n, c, h, w, generator=g).half()
    odd = torch.empty(x.numel() + 1, dtype=torch.half)[1:].view_as(x)
    odd.copy_(x)
    assert odd.data_ptr() % 4 == 2
    rois = _rois(n, h, w, scale, k, g).half()
    attrs = {"output_size": out_size, "spatial_scale": scale, "sampling_ratio": sr, "aligned": aligned}
    info = ROI_ALIGN.launch_info(ROI_ALIGN.resolve_attrs(attrs), [tuple(x.shape), tuple(rois.shape)], [x.dtype] * 2)
    assert ROI_ALIGN.cuda is not None and ROI_ALIGN.cuda.launches(info)[0].kernel == "roi_align_nchw_to_nhwc_fp16x2"
    (want,) = emulate_plugin(ROI_ALIGN, [x, rois], attrs)
    (got,) = emulate_plugin(ROI_ALIGN, [odd, rois], attrs)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def test_roi_align_direct_path_for_few_boxes_or_few_channels() -> None:
    from torch2trt_lite.plugins_cuda.roi_align import use_channels_last

    attrs = ROI_ALIGN.resolve_attrs({"output_size": (7, 7), "sampling_ratio": 2})
    f32 = [torch.float32, torch.float32]
    assert not use_channels_last(
        ROI_ALIGN.launch_info(attrs, [(2, 256, 200, 304), (10, 5)], f32)
    )  # few boxes
    assert not use_channels_last(
        ROI_ALIGN.launch_info(attrs, [(2, 16, 20, 30), (1000, 5)], f32)
    )  # few channels
    assert use_channels_last(ROI_ALIGN.launch_info(attrs, [(2, 256, 200, 304), (1000, 5)], f32))
    big = ROI_ALIGN.resolve_attrs({"output_size": (28, 28), "sampling_ratio": 2})
    assert not use_channels_last(
        ROI_ALIGN.launch_info(big, [(2, 256, 20, 30), (1000, 5)], f32)
    )  # too many bins
    with pytest.raises(PluginError, match="channels-last kernel needs"):
        emulate_plugin(
            roi_align_variant("nhwc"),
            [torch.randn(1, 8, 5, 5), torch.tensor([[0, 0, 0, 4, 4.0]])],
            {"output_size": (2, 2)},
        )


MACRO_SRC = r"""
extern "C" __global__ void KERNEL_NAME(float* out) { out[threadIdx.x] = SCALE * threadIdx.x; }
"""


def test_nvrtc_macro_options_reach_the_host_compiler() -> None:
    from torch2trt_lite.plugins.host_emulator import host_options

    opts = ("--fmad=false", "-DSCALE=2.5f", "--define-macro=KERNEL_NAME=scaled", "-lineinfo", "-I", "/x")
    assert host_options(opts) == ["-DSCALE=2.5f", "-DKERNEL_NAME=scaled", "-I/x"]
    out = torch.full((8,), float("nan"))
    mod = build(MACRO_SRC, filename="macro.cu", entry_points=("scaled",), options=opts[:3])
    mod.launch(Launch("scaled", 1, 8, []), [ptr(out)])
    torch.testing.assert_close(out, torch.arange(8.0) * 2.5, rtol=0, atol=0)


OOB_SRC = r"""
extern "C" __global__ void off_by_one(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= n) out[i] = 1.f;  // NOTE: the bug: <= instead of <
}
"""


def test_a_write_past_the_end_of_an_output_is_an_error() -> None:
    from torch2trt_lite.plugins.api import I32, CudaKernel, LaunchInfo, Out

    def launch(info: LaunchInfo) -> Launch:
        n = math.prod(info.outputs[0])
        return Launch("off_by_one", -(-(n + 1) // 64), 64, (Out(0), I32(n)))

    buggy = dataclasses.replace(
        ROI_ALIGN, cuda=CudaKernel(source=OOB_SRC, entry_points=("off_by_one",), launch=launch)
    )
    x, rois = torch.randn(1, 2, 5, 5), torch.tensor([[0, 0, 0, 4, 4.0]])
    with pytest.raises(PluginError, match="kernel 'off_by_one' wrote outside output 0"):
        emulate_plugin(buggy, [x, rois], {"output_size": (2, 2)})
