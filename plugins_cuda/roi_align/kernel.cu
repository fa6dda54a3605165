// RoIAlign (torchvision.ops.roi_align), NCHW input, fp32 and fp16, fp32 accumulation.
//
// Two ways to the same numbers (every sample and bin average is computed by the same functions in
// the same order, so both paths give bit-identical fp32 results):
//
// 1. Direct (roi_align_fp32 / roi_align_fp16): one thread per output element (k, c, ph, pw) in a
//    grid-stride loop, linear index fastest over pw. With NCHW input the bilinear taps of a warp
//    are gathers spread over the ROI's rows of one channel plane: many cache lines per load.
// 2. Channels-last (when many taps per input pixel make it pay, see the launch rule):
//    roi_align_nchw_to_nhwc_* transposes the input into the workspace (tiled, coalesced both
//    ways; fp16 with even C and H*W as half2: roi_align_nchw_to_nhwc_fp16x2), then roi_align_nhwc_* runs one block per (roi, 32 channels): the lanes of a warp take
//    32 consecutive channels of the same sample point, so each tap is one coalesced 128-byte (fp32)
//    load; warps take bins. The block's [32 channels x bins] results go through shared memory so
//    the output chunk out[k, c0:c0+32, :, :], contiguous in NCHW, is written coalesced.
//
// rois: [K, 5] rows of (batch_index, x1, y1, x2, y2) in input coordinates (before spatial_scale).
#include <cuda_fp16.h>

namespace t2t_roi_align {

constexpr int kNhwcChannels = 32;  // channels per block of the channels-last kernel (one per lane)
constexpr int kNhwcWarps = 8;
constexpr int kNhwcMaxBins = 196;  // pooled_h * pooled_w up to 14 x 14 (shared-memory tile)

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

// One box's geometry in input coordinates.
struct Roi {
  int batch;
  float x1, y1, bin_h, bin_w, count;
  int gh, gw;
};

template <typename T>
__device__ __forceinline__ Roi roi_geometry(const T* __restrict__ rois, int k, int PH, int PW, float spatial_scale,
                                            int sampling_ratio, int aligned) {
  const T* __restrict__ roi = rois + (long long)k * 5;
  const float half_px = aligned ? 0.5f : 0.f;
  Roi r;
  r.batch = (int)to_f(roi[0]);
  r.x1 = to_f(roi[1]) * spatial_scale - half_px;
  r.y1 = to_f(roi[2]) * spatial_scale - half_px;
  const float x2 = to_f(roi[3]) * spatial_scale - half_px;
  const float y2 = to_f(roi[4]) * spatial_scale - half_px;
  float rw = x2 - r.x1;
  float rh = y2 - r.y1;
  if (!aligned) {
    rw = fmaxf(rw, 1.f);
    rh = fmaxf(rh, 1.f);
  }
  r.bin_h = rh / (float)PH;
  r.bin_w = rw / (float)PW;
  r.gh = sampling_ratio > 0 ? sampling_ratio : (int)ceilf(rh / (float)PH);
  r.gw = sampling_ratio > 0 ? sampling_ratio : (int)ceilf(rw / (float)PW);
  r.count = fmaxf((float)(r.gh * r.gw), 1.f);
  return r;
}

// torchvision's RoIAlign bilinear sampling: zero outside [-1, H] x [-1, W], clamped at the border.
// Element (y, x) of the plane is base[y * sy + x * sx].
template <typename T>
__device__ __forceinline__ float sample(const T* __restrict__ base, int H, int W, long long sy, long long sx, float y,
                                        float x) {
  if (y < -1.f || y > (float)H || x < -1.f || x > (float)W) return 0.f;
  if (y <= 0.f) y = 0.f;
  if (x <= 0.f) x = 0.f;
  int y0 = (int)y, x0 = (int)x, y1, x1;
  if (y0 >= H - 1) {
    y1 = y0 = H - 1;
    y = (float)y0;
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= W - 1) {
    x1 = x0 = W - 1;
    x = (float)x0;
  } else {
    x1 = x0 + 1;
  }
  const float ly = y - (float)y0, lx = x - (float)x0;
  const float hy = 1.f - ly, hx = 1.f - lx;
  const float v00 = to_f(base[y0 * sy + x0 * sx]);
  const float v01 = to_f(base[y0 * sy + x1 * sx]);
  const float v10 = to_f(base[y1 * sy + x0 * sx]);
  const float v11 = to_f(base[y1 * sy + x1 * sx]);
  return hy * hx * v00 + hy * lx * v01 + ly * hx * v10 + ly * lx * v11;
}

// The average of bin (ph, pw) of box r over its sampling grid.
template <typename T>
__device__ __forceinline__ float bin_average(const T* __restrict__ base, int H, int W, long long sy, long long sx,
                                             const Roi& r, int ph, int pw) {
  float acc = 0.f;
  // NOTE: not unrolled: run-time trip counts, and unrolling made ptxas spill 8 bytes on sm_90
#pragma unroll 1
  for (int iy = 0; iy < r.gh; ++iy) {
    const float y = r.y1 + (float)ph * r.bin_h + ((float)iy + 0.5f) * r.bin_h / (float)r.gh;
#pragma unroll 1
    for (int ix = 0; ix < r.gw; ++ix) {
      const float x = r.x1 + (float)pw * r.bin_w + ((float)ix + 0.5f) * r.bin_w / (float)r.gw;
      acc += sample(base, H, W, sy, sx, y, x);
    }
  }
  return acc / r.count;
}

template <typename T>
__device__ __forceinline__ void roi_align_impl(const T* __restrict__ input, const T* __restrict__ rois,
                                               T* __restrict__ out, int K, int C, int H, int W, int PH, int PW,
                                               float spatial_scale, int sampling_ratio, int aligned) {
  const long long total = (long long)K * C * PH * PW;
  const long long step = (long long)blockDim.x * gridDim.x;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += step) {
    const int pw = (int)(idx % PW);
    const int ph = (int)((idx / PW) % PH);
    const int c = (int)((idx / ((long long)PW * PH)) % C);
    const int k = (int)(idx / ((long long)PW * PH * C));
    const Roi r = roi_geometry(rois, k, PH, PW, spatial_scale, sampling_ratio, aligned);
    const T* __restrict__ plane = input + ((long long)r.batch * C + c) * H * W;
    out[idx] = from_f<T>(bin_average(plane, H, W, (long long)W, 1LL, r, ph, pw));
  }
}

// [N, C, H*W] -> [N, H*W, C] through a 32 x 33 shared tile; block (32, 8), grid (ceil(HW/32), ceil(C/32), N).
template <typename T>
__device__ __forceinline__ void nchw_to_nhwc_impl(const T* __restrict__ in, T* __restrict__ out, int C, int HW) {
  __shared__ T tile[32][33];
  const long long n = blockIdx.z;
  const int hw0 = blockIdx.x * 32, c0 = blockIdx.y * 32;
  const T* __restrict__ src = in + n * C * HW;
  T* __restrict__ dst = out + n * C * HW;
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int c = c0 + j, hw = hw0 + threadIdx.x;
    if (c < C && hw < HW) tile[j][threadIdx.x] = src[(long long)c * HW + hw];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < 32; j += 8) {
    const int hw = hw0 + j, c = c0 + threadIdx.x;
    if (c < C && hw < HW) dst[(long long)hw * C + c] = tile[threadIdx.x][j];
  }
}

// fp16 with even C and H*W: 64 x 64 tiles moved as half2 both ways, so a warp reads and writes whole
// 128-byte rows (the element tile above moves 64-byte rows of halves) and a thread has 32 bytes in
// flight. Each thread loads two channels' half2 at the same pixel pair and swaps them in registers
// (a 2 x 2 transpose), so the shared tile holds channel pairs: tile[c / 2][hw]. Block (32, 8), grid
// (ceil(HW/64), ceil(C/64), N).
__device__ __forceinline__ void nchw_to_nhwc_h2_impl(const __half* __restrict__ in, __half* __restrict__ out, int C,
                                                     int HW) {
  __shared__ __half2 tile[32][65];  // [channel pair][pixel], +1: conflict-free column reads
  const long long n = blockIdx.z;
  const int hw0 = blockIdx.x * 64, c0 = blockIdx.y * 64;
  const int tx = threadIdx.x, ty = threadIdx.y;
  const __half* __restrict__ src = in + n * C * HW;
  __half* __restrict__ dst = out + n * C * HW;
  const __half2 zero = __floats2half2_rn(0.f, 0.f);
  const bool vec = (reinterpret_cast<unsigned long long>(in) & 3) == 0;  // NOTE: uniform over the grid
  for (int cp = ty; cp < 32; cp += 8) {
    const int c = c0 + 2 * cp, hw = hw0 + 2 * tx;  // NOTE: C, HW even: c + 1 < C and hw + 1 < HW follow
    __half2 a = zero, b = zero;
    if (c < C && hw < HW) {
      const __half* pa = src + (long long)c * HW + hw;
      if (vec) {
        a = *reinterpret_cast<const __half2*>(pa);
        b = *reinterpret_cast<const __half2*>(pa + HW);
      } else {  // NOTE: an input that starts at an odd half (a view); TensorRT's tensors never do
        a = __halves2half2(pa[0], pa[1]);
        b = __halves2half2(pa[HW], pa[HW + 1]);
      }
    }
    tile[cp][2 * tx] = __halves2half2(__low2half(a), __low2half(b));
    tile[cp][2 * tx + 1] = __halves2half2(__high2half(a), __high2half(b));
  }
  __syncthreads();
  for (int j = ty; j < 64; j += 8) {
    const int hw = hw0 + j, c = c0 + 2 * tx;
    if (hw < HW && c < C) *reinterpret_cast<__half2*>(dst + (long long)hw * C + c) = tile[tx][j];
  }
}

// Channels-last RoIAlign: block (kNhwcWarps * 32) per (roi k = blockIdx.x, channels c0 = 32 * blockIdx.y).
template <typename T>
__device__ __forceinline__ void roi_align_nhwc_impl(const T* __restrict__ nhwc, const T* __restrict__ rois,
                                                    T* __restrict__ out, int C, int H, int W, int PH, int PW,
                                                    float spatial_scale, int sampling_ratio, int aligned) {
  __shared__ float tile[kNhwcChannels][kNhwcMaxBins + 1];  // +1: lanes write different banks
  const int k = blockIdx.x;
  const int c0 = blockIdx.y * kNhwcChannels;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int bins = PH * PW;
  const int c = c0 + lane;
  const Roi r = roi_geometry(rois, k, PH, PW, spatial_scale, sampling_ratio, aligned);
  if (c < C) {
    const T* __restrict__ base = nhwc + (long long)r.batch * H * W * C + c;
    for (int bin = warp; bin < bins; bin += kNhwcWarps) {
      const int ph = bin / PW;
      tile[lane][bin] = bin_average(base, H, W, (long long)W * C, (long long)C, r, ph, bin - ph * PW);
    }
  }
  __syncthreads();
  const int nc = min(kNhwcChannels, C - c0);
  T* __restrict__ dst = out + ((long long)k * C + c0) * bins;
  for (int i = threadIdx.x; i < nc * bins; i += kNhwcWarps * 32) {
    const int cl = i / bins;
    dst[i] = from_f<T>(tile[cl][i - cl * bins]);
  }
}

}  // namespace t2t_roi_align

#define T2T_ROI_ALIGN_ENTRY(NAME, T)                                                                   \
  extern "C" __global__ void __launch_bounds__(256) NAME(                                              \
      const T* __restrict__ input, const T* __restrict__ rois, T* __restrict__ out, int K, int C,      \
      int H, int W, int PH, int PW, float spatial_scale, int sampling_ratio, int aligned) {            \
    t2t_roi_align::roi_align_impl<T>(input, rois, out, K, C, H, W, PH, PW, spatial_scale,               \
                                     sampling_ratio, aligned);                                         \
  }

#define T2T_ROI_ALIGN_NHWC_ENTRIES(SUFFIX, T)                                                          \
  extern "C" __global__ void __launch_bounds__(256)                                                    \
      roi_align_nchw_to_nhwc_##SUFFIX(const T* __restrict__ in, T* __restrict__ out, int C, int HW) {  \
    t2t_roi_align::nchw_to_nhwc_impl<T>(in, out, C, HW);                                               \
  }                                                                                                    \
  extern "C" __global__ void __launch_bounds__(256) roi_align_nhwc_##SUFFIX(                           \
      const T* __restrict__ nhwc, const T* __restrict__ rois, T* __restrict__ out, int C, int H,       \
      int W, int PH, int PW, float spatial_scale, int sampling_ratio, int aligned) {                   \
    t2t_roi_align::roi_align_nhwc_impl<T>(nhwc, rois, out, C, H, W, PH, PW, spatial_scale,             \
                                          sampling_ratio, aligned);                                    \
  }

T2T_ROI_ALIGN_ENTRY(roi_align_fp32, float)
T2T_ROI_ALIGN_ENTRY(roi_align_fp16, __half)
T2T_ROI_ALIGN_NHWC_ENTRIES(fp32, float)
T2T_ROI_ALIGN_NHWC_ENTRIES(fp16, __half)

extern "C" __global__ void __launch_bounds__(256)
    roi_align_nchw_to_nhwc_fp16x2(const __half* __restrict__ in, __half* __restrict__ out, int C, int HW) {
  t2t_roi_align::nchw_to_nhwc_h2_impl(in, out, C, HW);
}
