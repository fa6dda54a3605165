// Deformable convolution v1/v2 (torchvision.ops.deform_conv2d), NCHW, fp32 and fp16.
//
// One fused "implicit GEMM" kernel: for each image n and weight group g,
//   out[n, g*Cout_g + m, p] = bias[.] + sum_k W[g*Cout_g + m, k] * col[k, p]
// where k = (ci_local, tap) walks the Cin_g x kh x kw reduction and col[k, p] is the bilinearly
// sampled, mask-scaled input value of the deformable im2col. The col tile is computed in shared
// memory on the fly (no workspace), so each sample is recomputed ceil(Cout_g / BM) times instead
// of Cout_g times as in a direct per-output kernel. Accumulation is fp32 for both dtypes.
//
// Entry points (extern "C", 256 threads per block, grid = (ceil(P / BN), ceil(Cout_g / BM), N * groups)):
//   deform_conv2d_fp32_m64 / deform_conv2d_fp16_m64   BM=64, BN=64   (Cout_g > 16)
//   deform_conv2d_fp32_m16 / deform_conv2d_fp16_m16   BM=16, BN=128  (Cout_g <= 16, e.g. depthwise)
// mask and bias may be null.
#include <cuda_fp16.h>

namespace t2t_deform {

__device__ __forceinline__ float to_f(float v) { return v; }
__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }

template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }

// torchvision's deform_conv2d bilinear sampling: zero outside (-1, H) x (-1, W), each corner
// outside the image contributes zero.
template <typename T>
__device__ __forceinline__ float sample(const T* __restrict__ plane, int H, int W, float y, float x) {
  if (y <= -1.f || y >= (float)H || x <= -1.f || x >= (float)W) return 0.f;
  const float yf = floorf(y), xf = floorf(x);
  const int y0 = (int)yf, x0 = (int)xf;
  const int y1 = y0 + 1, x1 = x0 + 1;
  const float ly = y - yf, lx = x - xf;
  const float hy = 1.f - ly, hx = 1.f - lx;
  const float v00 = (y0 >= 0 && x0 >= 0) ? to_f(plane[y0 * W + x0]) : 0.f;
  const float v01 = (y0 >= 0 && x1 <= W - 1) ? to_f(plane[y0 * W + x1]) : 0.f;
  const float v10 = (y1 <= H - 1 && x0 >= 0) ? to_f(plane[y1 * W + x0]) : 0.f;
  const float v11 = (y1 <= H - 1 && x1 <= W - 1) ? to_f(plane[y1 * W + x1]) : 0.f;
  return hy * hx * v00 + hy * lx * v01 + ly * hx * v10 + ly * lx * v11;
}

template <typename T, int BM, int BN, int BK, int TM, int TN>
__device__ __forceinline__ void deform_conv2d_impl(
    const T* __restrict__ input, const T* __restrict__ offset, const T* __restrict__ weight,
    const T* __restrict__ mask, const T* __restrict__ bias, T* __restrict__ out,
    int Cin, int H, int W, int Cout, int kh, int kw, int Ho, int Wo,
    int stride_h, int stride_w, int pad_h, int pad_w, int dil_h, int dil_w,
    int groups, int offset_groups) {
  constexpr int COLS = BN / TN;            // threads along the pixel axis
  constexpr int NT = (BM / TM) * COLS;     // threads per block
  __shared__ float As[BK][BM + 1];         // weight tile, k-major (+1: no bank conflicts on store)
  __shared__ float Bs[BK][BN];             // sampled column tile

  const int cin_g = Cin / groups;
  const int cout_g = Cout / groups;
  const int taps = kh * kw;
  const int kdim = cin_g * taps;
  const int P = Ho * Wo;
  const int c_per_og = Cin / offset_groups;
  const long long HW = (long long)H * W;

  const int n = blockIdx.z / groups;
  const int g = blockIdx.z - n * groups;
  const int m0 = blockIdx.y * BM;
  const int p0 = blockIdx.x * BN;
  const int tid = threadIdx.x;
  const int tx = tid % COLS;
  const int ty = tid / COLS;

  const T* __restrict__ in_n = input + (long long)n * Cin * HW;
  const T* __restrict__ off_n = offset + (long long)n * offset_groups * 2 * taps * P;
  const T* __restrict__ mask_n = mask ? mask + (long long)n * offset_groups * taps * P : nullptr;
  const T* __restrict__ w_g = weight + (long long)g * cout_g * kdim;

  float acc[TM][TN];
#pragma unroll
  for (int r = 0; r < TM; ++r)
#pragma unroll
    for (int c = 0; c < TN; ++c) acc[r][c] = 0.f;

  for (int k0 = 0; k0 < kdim; k0 += BK) {
    // Weight tile: consecutive threads read consecutive k of one weight row.
    for (int e = tid; e < BM * BK; e += NT) {
      const int m = e / BK;
      const int k = e - m * BK;
      const int gm = m0 + m;
      const int gk = k0 + k;
      As[k][m] = (gm < cout_g && gk < kdim) ? to_f(w_g[(long long)gm * kdim + gk]) : 0.f;
    }
    // Column tile: consecutive threads take consecutive output pixels (coalesced offset/mask reads).
    for (int e = tid; e < BK * BN; e += NT) {
      const int k = e / BN;
      const int p = e - k * BN;
      const int gk = k0 + k;
      const int gp = p0 + p;
      float v = 0.f;
      if (gk < kdim && gp < P) {
        const int ci_l = gk / taps;
        const int tap = gk - ci_l * taps;
        const int ci = g * cin_g + ci_l;
        const int og = ci / c_per_og;
        const int i = tap / kw;
        const int j = tap - i * kw;
        const int ho = gp / Wo;
        const int wo = gp - ho * Wo;
        const long long ch = (long long)og * taps + tap;
        const float dy = to_f(off_n[(2 * ch) * P + gp]);
        const float dx = to_f(off_n[(2 * ch + 1) * P + gp]);
        const float y = (float)(ho * stride_h - pad_h + i * dil_h) + dy;
        const float x = (float)(wo * stride_w - pad_w + j * dil_w) + dx;
        v = sample(in_n + ci * HW, H, W, y, x);
        if (mask_n) v *= to_f(mask_n[ch * P + gp]);
      }
      Bs[k][p] = v;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      float a[TM];
      float b[TN];
#pragma unroll
      for (int r = 0; r < TM; ++r) a[r] = As[k][ty * TM + r];
#pragma unroll
      for (int c = 0; c < TN; ++c) b[c] = Bs[k][tx + c * COLS];
#pragma unroll
      for (int r = 0; r < TM; ++r)
#pragma unroll
        for (int c = 0; c < TN; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
    __syncthreads();
  }

#pragma unroll
  for (int r = 0; r < TM; ++r) {
    const int gm = m0 + ty * TM + r;
    if (gm >= cout_g) continue;
    const int co = g * cout_g + gm;
    const float bv = bias ? to_f(bias[co]) : 0.f;
    T* __restrict__ out_row = out + ((long long)n * Cout + co) * P;
#pragma unroll
    for (int c = 0; c < TN; ++c) {
      const int gp = p0 + tx + c * COLS;
      if (gp < P) out_row[gp] = from_f<T>(acc[r][c] + bv);
    }
  }
}

}  // namespace t2t_deform

#define T2T_DEFORM_ENTRY(NAME, T, BM, BN, BK, TM, TN)                                                  \
  extern "C" __global__ void __launch_bounds__(256) NAME(                                              \
      const T* __restrict__ input, const T* __restrict__ offset, const T* __restrict__ weight,         \
      const T* __restrict__ mask, const T* __restrict__ bias, T* __restrict__ out, int Cin, int H,     \
      int W, int Cout, int kh, int kw, int Ho, int Wo, int stride_h, int stride_w, int pad_h,          \
      int pad_w, int dil_h, int dil_w, int groups, int offset_groups) {                                \
    t2t_deform::deform_conv2d_impl<T, BM, BN, BK, TM, TN>(                                             \
        input, offset, weight, mask, bias, out, Cin, H, W, Cout, kh, kw, Ho, Wo, stride_h, stride_w,   \
        pad_h, pad_w, dil_h, dil_w, groups, offset_groups);                                            \
  }

T2T_DEFORM_ENTRY(deform_conv2d_fp32_m64, float, 64, 64, 16, 4, 4)
T2T_DEFORM_ENTRY(deform_conv2d_fp16_m64, __half, 64, 64, 16, 4, 4)
T2T_DEFORM_ENTRY(deform_conv2d_fp32_m16, float, 16, 128, 16, 2, 4)
T2T_DEFORM_ENTRY(deform_conv2d_fp16_m16, __half, 16, 128, 16, 2, 4)
