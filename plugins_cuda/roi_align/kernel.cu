// RoIAlign (torchvision.ops.roi_align), NCHW input, fp32 and fp16, fp32 accumulation.
//
// One thread per output element (k, c, ph, pw) in a grid-stride loop; the linear index runs
// fastest over pw, so a warp samples neighbouring bins of one channel plane and writes a
// contiguous run of the output. Each thread averages a grid of bilinear samples in its bin.
//
// Entry points (extern "C", 256 threads per block, 1-D grid):
//   roi_align_fp32, roi_align_fp16
// rois: [K, 5] rows of (batch_index, x1, y1, x2, y2) in input coordinates (before spatial_scale).
#include <cuda_fp16.h>

namespace t2t_roi_align {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

// torchvision's RoIAlign bilinear sampling: zero outside [-1, H] x [-1, W], clamped at the border.
template <typename T>
__device__ __forceinline__ float sample(const T* __restrict__ plane, int H, int W, float y, float x) {
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
  const float v00 = to_f(plane[y0 * W + x0]);
  const float v01 = to_f(plane[y0 * W + x1]);
  const float v10 = to_f(plane[y1 * W + x0]);
  const float v11 = to_f(plane[y1 * W + x1]);
  return hy * hx * v00 + hy * lx * v01 + ly * hx * v10 + ly * lx * v11;
}

template <typename T>
__device__ __forceinline__ void roi_align_impl(
    const T* __restrict__ input, const T* __restrict__ rois, T* __restrict__ out,
    int K, int C, int H, int W, int PH, int PW, float spatial_scale, int sampling_ratio, int aligned) {
  const long long total = (long long)K * C * PH * PW;
  const long long step = (long long)blockDim.x * gridDim.x;
  const float half_px = aligned ? 0.5f : 0.f;
  for (long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += step) {
    const int pw = (int)(idx % PW);
    const int ph = (int)((idx / PW) % PH);
    const int c = (int)((idx / ((long long)PW * PH)) % C);
    const int k = (int)(idx / ((long long)PW * PH * C));

    const T* __restrict__ roi = rois + (long long)k * 5;
    const int b = (int)to_f(roi[0]);
    const float x1 = to_f(roi[1]) * spatial_scale - half_px;
    const float y1 = to_f(roi[2]) * spatial_scale - half_px;
    const float x2 = to_f(roi[3]) * spatial_scale - half_px;
    const float y2 = to_f(roi[4]) * spatial_scale - half_px;
    float rw = x2 - x1;
    float rh = y2 - y1;
    if (!aligned) {
      rw = fmaxf(rw, 1.f);
      rh = fmaxf(rh, 1.f);
    }
    const float bin_h = rh / (float)PH;
    const float bin_w = rw / (float)PW;
    const int gh = sampling_ratio > 0 ? sampling_ratio : (int)ceilf(rh / (float)PH);
    const int gw = sampling_ratio > 0 ? sampling_ratio : (int)ceilf(rw / (float)PW);
    const float count = fmaxf((float)(gh * gw), 1.f);

    const T* __restrict__ plane = input + ((long long)b * C + c) * H * W;
    float acc = 0.f;
    for (int iy = 0; iy < gh; ++iy) {
      const float y = y1 + (float)ph * bin_h + ((float)iy + 0.5f) * bin_h / (float)gh;
      for (int ix = 0; ix < gw; ++ix) {
        const float x = x1 + (float)pw * bin_w + ((float)ix + 0.5f) * bin_w / (float)gw;
        acc += sample(plane, H, W, y, x);
      }
    }
    out[idx] = from_f<T>(acc / count);
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

T2T_ROI_ALIGN_ENTRY(roi_align_fp32, float)
T2T_ROI_ALIGN_ENTRY(roi_align_fp16, __half)
