// Deformable convolution v1/v2 (torchvision.ops.deform_conv2d), NCHW, fp32 and fp16.
//
// out[n, g*Cout_g + m, p] = bias[.] + sum_k W[g*Cout_g + m, k] * col[k, p]: an "implicit GEMM"
// whose B operand col[k, p] (the deformable im2col: bilinearly sampled, mask-scaled input) is
// computed tile by tile in shared memory and never stored in global memory.
//
// Kernels (extern "C", 256 threads per block):
//
// * deform_conv2d_{fp32,fp16}_wprep: weight [Cout, Cin_g, kh, kw] -> workspace Wt[g][tap][ci][m]
//   with m padded to a multiple of 128 (zeros), so a weight tile is 16-byte vector loads of
//   contiguous rows. Grid-stride, one thread per (g, ci, m), kh*kw coalesced stores each.
// * deform_conv2d_{fp32,fp16}_gemm: the main kernel. Block tile 128 (output channels) x 128
//   (output pixels), 8 warps, grid (ceil(P / 128), ceil(Cout_g / 128) * S, N * groups).
//   The reduction is ordered tap-major (k = tap * Cin_g + ci) and cut into chunks of BK channels
//   of one tap that never cross an offset-group boundary (BK = 32 for fp16, 16 for fp32). For a
//   chunk, every thread samples one output pixel for BK/2 channels: the pixel's 4 bilinear corner
//   indices and weights (mask folded in, zero for a corner outside the image, all zero for a
//   sample outside (-1, H) x (-1, W)) are computed once per (tap, offset group) and kept in 8
//   registers, so a sample costs 4 gathered loads and 4 FMAs (a corner outside the image reads an
//   in-image corner of the same sample with weight 0, and a sample wholly outside is zeroed by a
//   select, so no branch and no value from outside a sample's footprint). Shared memory is double-buffered (As[2][BK][128+pad] k-major,
//   Bs[2][BK][128+pad]; pads of 16 bytes against bank conflicts), one __syncthreads per chunk:
//   a chunk is first loaded into registers (weight vectors, the 4 raw corners of each sample),
//   then blended and stored into the buffer the warps are not multiplying. fp32 ("pipelined")
//   stores after multiplying the current chunk, so its gathers are in flight during the MMAs
//   (~240 registers, 1 block of 8 warps per SM); fp16 stores before (its 64 raw corners would
//   not fit), at <= 128 registers for 2 blocks per SM, which overlap each other's gathers.
//   ~34 KiB static shared memory per block; the epilogue reuses it as a per-warp 16x16 scratch.
//   Main loop per arch / dtype (same launch geometry and shared layout for all branches):
//     fp16, sm_70+: wmma m16n16k16 (half x half, fp32 accumulators); each warp a 64x32 tile
//       (4x2 fragments). col and W are rounded to half once (the inputs already are half).
//     fp32, sm_80+: 3xTF32 with wmma m16n16k8: a = big + small (big = tf32(a), small =
//       tf32(a - big)), acc += small*big + big*small + big*big in fp32 (the dropped small*small
//       term is ~2^-22 relative), giving fp32-level accuracy (<= 1e-5) at tensor-core rate.
//     fp32, sm_75: CUDA cores, 8x8 fp32 outputs per thread from float4 shared reads.
//   Split-K: when there are few output tiles (small images, e.g. C5 layers) the chunk list is
//   split S ways (grid.y); each split writes fp32 partial sums to the workspace and
// * deform_conv2d_{fp32,fp16}_splitk_sum adds the S partials and the bias in a fixed order
//   (deterministic, no atomics). With S = 1 the gemm kernel writes the output (and bias) itself.
// * deform_conv2d_{fp32,fp16}_m16: C_out / groups <= 16 (depthwise, thin groups): the direct
//   fused kernel, BM=16 x BN=128, fp32 CUDA-core FMAs, k ordered (ci, tap), no workspace.
// mask and bias may be null.
#include <cuda_fp16.h>
#include <mma.h>

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


// ------------------------------------------------------------------ tiled implicit GEMM (gemm)
constexpr int GBM = 128;     // output channels per block
constexpr int GBN = 128;     // output pixels per block
constexpr int GTHREADS = 256;

template <typename T> struct Cfg;
template <> struct Cfg<float> {
  static constexpr int BK = 16;
  static constexpr int PAD = 4;
};
template <> struct Cfg<__half> {
  static constexpr int BK = 32;
  static constexpr int PAD = 8;
};

// Bilinear sample geometry of one (pixel, tap, offset group): corner indices and weights with the
// mask folded in. Branch-free in the gather loop, yet no value outside a sample's footprint reaches
// it (an inf/NaN elsewhere in the plane cannot leak in):
// * a corner outside the image gets weight 0 and the index of an in-image corner of the same
//   sample (clamped row/column), so its term is 0 * (a value the sample reads anyway);
// * a sample wholly outside the image gets index 0 and w0 = -0.0 (bit pattern 0x80000000, so a
//   NaN mask is never taken for it), a mark the store turns into an
//   exact 0 (a sample inside has hy * hx > 0, so its w0 is -0.0 only for a mask of -0.0).
struct Geo {
  int i0, i1, i2, i3;
  float w0, w1, w2, w3;
};

template <typename T>
__device__ __forceinline__ Geo geometry(const T* __restrict__ off_n, const T* __restrict__ mask_n, long long ch,
                                        int P, int gp, bool pvalid, int H, int W, float ybase, float xbase) {
  Geo r;
  r.i0 = r.i1 = r.i2 = r.i3 = 0;
  r.w0 = r.w1 = r.w2 = r.w3 = 0.f;
  if (!pvalid) return r;
  const float y = ybase + to_f(off_n[(2 * ch) * P + gp]);
  const float x = xbase + to_f(off_n[(2 * ch + 1) * P + gp]);
  r.w0 = -0.f;
  if (y <= -1.f || y >= (float)H || x <= -1.f || x >= (float)W) return r;
  const float m = mask_n ? to_f(mask_n[ch * P + gp]) : 1.f;
  const float yf = floorf(y), xf = floorf(x);
  const int y0 = (int)yf, x0 = (int)xf;
  const float ly = y - yf, lx = x - xf;
  const float hy = 1.f - ly, hx = 1.f - lx;
  const bool vy0 = y0 >= 0, vy1 = y0 + 1 <= H - 1, vx0 = x0 >= 0, vx1 = x0 + 1 <= W - 1;
  const int r0 = max(y0, 0) * W, r1 = min(y0 + 1, H - 1) * W;  // NOTE: in-image rows of the footprint
  const int c0 = max(x0, 0), c1 = min(x0 + 1, W - 1);
  r.i0 = r0 + c0;
  r.i1 = r0 + c1;
  r.i2 = r1 + c0;
  r.i3 = r1 + c1;
  r.w0 = (vy0 && vx0) ? hy * hx * m : 0.f;
  r.w1 = (vy0 && vx1) ? hy * lx * m : 0.f;
  r.w2 = (vy1 && vx0) ? ly * hx * m : 0.f;
  r.w3 = (vy1 && vx1) ? ly * lx * m : 0.f;
  return r;
}

// Channels in the chunk that starts at group-local channel ci: at most BK, within the group and
// within one offset group.
__device__ __forceinline__ int chunk_len(int ci, int cin_g, int g, int c_per_og, int bk) {
  const int c = g * cin_g + ci;
  const int og_end = (c / c_per_og + 1) * c_per_og - g * cin_g;
  return min(min(bk, cin_g - ci), og_end - ci);
}

template <typename T> struct Vec16;  // 16-byte vector of T
template <> struct Vec16<float> { using type = float4; };
template <> struct Vec16<__half> { using type = int4; };

// Writes one output value: the output (with bias) when there is no split, else a partial sum.
template <typename T>
struct Sink {
  T* __restrict__ out;
  float* __restrict__ part;
  const T* __restrict__ bias;
  long long out_base;  // (n * Cout + g * cout_g) * P, also the partial's base within its split
  int cout_g, P, g;
  __device__ __forceinline__ void put(int gm, int gp, float v) const {
    if (gm >= cout_g || gp >= P) return;
    const long long idx = out_base + (long long)gm * P + gp;
    if (part) {
      part[idx] = v;
    } else {
      const float bv = bias ? to_f(bias[g * cout_g + gm]) : 0.f;
      out[idx] = from_f<T>(v + bv);
    }
  }
};

using namespace nvcuda;

// A warp's 4 x 2 wmma accumulator tiles (64 x 32 outputs) to the sink, through the warp's own
// 16 x 16 float scratch in shared memory (the fragment layout is opaque).
template <typename Acc, typename T>
__device__ __forceinline__ void store_tiles(Acc (&acc)[4][2], float* __restrict__ scratch, int tid, int m0, int p0,
                                           const Sink<T>& sink) {
  const int warp = tid / 32, lane = tid % 32;
  const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
  float* __restrict__ s = scratch + warp * 256;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(s, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      const int r = lane / 2, c0 = (lane % 2) * 8;
#pragma unroll
      for (int c = 0; c < 8; ++c) sink.put(m0 + wm + i * 16 + r, p0 + wn + j * 16 + c0 + c, s[r * 16 + c0 + c]);
      __syncwarp();
    }
}

// A warp's 4 x 2 wmma accumulator tiles (64 x 32 outputs): zeroed by init, written out by store.
template <typename Acc>
struct WarpTiles {
  Acc acc[4][2];
  __device__ __forceinline__ void init() {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  }
  template <typename T>
  __device__ __forceinline__ void store(float* __restrict__ scratch, int tid, int m0, int p0, const Sink<T>& sink) {
    store_tiles(acc, scratch, tid, m0, p0, sink);
  }
};

// fp16: wmma m16n16k16, half operands, fp32 accumulators.
struct MmaHalf : WarpTiles<wmma::fragment<wmma::accumulator, 16, 16, 16, float>> {
  static constexpr bool PIPELINED = false;  // 64 raw corners per thread would cost 2 blocks/SM
  static constexpr int BK = Cfg<__half>::BK;
  static constexpr int LDA = GBM + Cfg<__half>::PAD;
  static constexpr int LDB = GBN + Cfg<__half>::PAD;
  __device__ __forceinline__ void compute(const __half (*As)[LDA], const __half (*Bs)[LDB], int tid) {
    const int warp = tid / 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(b[j], &Bs[kk][wn + j * 16], LDB);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::col_major> a;
        wmma::load_matrix_sync(a, &As[kk][wm + i * 16], LDA);
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], a, b[j], acc[i][j]);
      }
    }
  }
};

#if __CUDA_ARCH__ >= 800
// fp32 on sm_80+: 3xTF32 with wmma m16n16k8.
struct MmaTf32x3 : WarpTiles<wmma::fragment<wmma::accumulator, 16, 16, 8, float>> {
  static constexpr bool PIPELINED = true;
  static constexpr int BK = Cfg<float>::BK;
  static constexpr int LDA = GBM + Cfg<float>::PAD;
  static constexpr int LDB = GBN + Cfg<float>::PAD;
  template <typename Frag>
  __device__ __forceinline__ static void split(Frag& big, Frag& small) {
#pragma unroll
    for (int t = 0; t < big.num_elements; ++t) {
      const float v = big.x[t];
      const float hi = wmma::__float_to_tf32(v);
      big.x[t] = hi;
      small.x[t] = wmma::__float_to_tf32(v - hi);
    }
  }
  __device__ __forceinline__ void compute(const float (*As)[LDA], const float (*Bs)[LDB], int tid) {
    const int warp = tid / 32;
    const int wm = (warp / 4) * 64, wn = (warp % 4) * 32;
#pragma unroll
    for (int kk = 0; kk < BK; kk += 8) {
      wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> bb[2], bs[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        wmma::load_matrix_sync(bb[j], &Bs[kk][wn + j * 16], LDB);
        split(bb[j], bs[j]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major> ab, as;
        wmma::load_matrix_sync(ab, &As[kk][wm + i * 16], LDA);
        split(ab, as);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          wmma::mma_sync(acc[i][j], as, bb[j], acc[i][j]);
          wmma::mma_sync(acc[i][j], ab, bs[j], acc[i][j]);
          wmma::mma_sync(acc[i][j], ab, bb[j], acc[i][j]);
        }
      }
    }
  }
};
#endif

// fp32 on sm_75 (no TF32 tensor cores): CUDA-core FMAs, 8x8 outputs per thread at rows
// {ty*4 + r, 64 + ty*4 + r} and columns {tx*4 + c, 64 + tx*4 + c} (float4 shared reads, no bank
// conflicts: a warp reads 2 distinct A vectors and 16 contiguous B vectors).
struct SimtF32 {
  static constexpr bool PIPELINED = true;
  static constexpr int BK = Cfg<float>::BK;
  static constexpr int LDA = GBM + Cfg<float>::PAD;
  static constexpr int LDB = GBN + Cfg<float>::PAD;
  float acc[8][8];
  __device__ __forceinline__ void init() {
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c) acc[r][c] = 0.f;
  }
  __device__ __forceinline__ void compute(const float (*As)[LDA], const float (*Bs)[LDB], int tid) {
    const int ty = tid / 16, tx = tid % 16;
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[k][64 + ty * 4]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][64 + tx * 4]);
      const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int r = 0; r < 8; ++r)
#pragma unroll
        for (int c = 0; c < 8; ++c) acc[r][c] = fmaf(a[r], b[c], acc[r][c]);
    }
  }
  template <typename T>
  __device__ __forceinline__ void store(float* __restrict__ scratch, int tid, int m0, int p0, const Sink<T>& sink) {
    (void)scratch;
    const int ty = tid / 16, tx = tid % 16;
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
      for (int c = 0; c < 8; ++c)
        sink.put(m0 + (r / 4) * 64 + ty * 4 + r % 4, p0 + (c / 4) * 64 + tx * 4 + c % 4, acc[r][c]);
  }
};

template <typename T, class Mma>
__device__ __forceinline__ void gemm_impl(
    const T* __restrict__ input, const T* __restrict__ offset, const T* __restrict__ wt,
    const T* __restrict__ mask, const T* __restrict__ bias, T* __restrict__ out, float* __restrict__ part,
    int Cin, int H, int W, int Cout, int kh, int kw, int Ho, int Wo,
    int stride_h, int stride_w, int pad_h, int pad_w, int dil_h, int dil_w,
    int groups, int offset_groups, int nsplit) {
  constexpr int BK = Mma::BK, LDA = Mma::LDA, LDB = Mma::LDB;
  constexpr int VEC = 16 / (int)sizeof(T);         // elements per 16-byte vector
  constexpr int AVECS = BK * GBM / VEC;            // 16-byte vectors per weight tile (512)
  constexpr int ROWS_PER_THREAD = BK * GBN / GTHREADS;
  using V = typename Vec16<T>::type;
  struct alignas(128) Tiles {
    T a[2][BK][LDA];
    T b[2][BK][LDB];
  };
  __shared__ Tiles sm;
  auto& As = sm.a;
  auto& Bs = sm.b;

  const int cin_g = Cin / groups;
  const int cout_g = Cout / groups;
  const int taps = kh * kw;
  const int P = Ho * Wo;
  const int c_per_og = Cin / offset_groups;
  const int mtiles = (cout_g + GBM - 1) / GBM;
  const int cout_gp = mtiles * GBM;
  const long long HW = (long long)H * W;

  const int n = blockIdx.z / groups;
  const int g = blockIdx.z - n * groups;
  const int split = blockIdx.y / mtiles;
  const int m0 = (blockIdx.y - split * mtiles) * GBM;
  const int p0 = blockIdx.x * GBN;
  const int tid = threadIdx.x;

  // Chunks per tap for this group (the same walk the loop below takes), then this split's range.
  int nct = 0;
  for (int ci = 0; ci < cin_g; ci += chunk_len(ci, cin_g, g, c_per_og, BK)) ++nct;
  const int total = taps * nct;
  const int per = (total + nsplit - 1) / nsplit;
  const int qb = min(split * per, total);
  const int qe = min(qb + per, total);

  const T* __restrict__ in_g = input + ((long long)n * Cin + (long long)g * cin_g) * HW;
  const T* __restrict__ off_n = offset + (long long)n * offset_groups * 2 * taps * P;
  const T* __restrict__ mask_n = mask ? mask + (long long)n * offset_groups * taps * P : nullptr;
  const T* __restrict__ wt_g = wt + (long long)g * taps * cin_g * cout_gp + m0;

  // The output pixel this thread samples, and its first chunk row.
  const int sp = tid % GBN;
  const int sr = tid / GBN;
  const int gp_s = p0 + sp;
  const bool pvalid = gp_s < P;
  const int ho = pvalid ? gp_s / Wo : 0;
  const int wo = pvalid ? gp_s - ho * Wo : 0;
  const int ybase = ho * stride_h - pad_h;
  const int xbase = wo * stride_w - pad_w;

  // Chunk state: tap, first group-local channel, channel count.
  int tap = 0, ci = 0, len = 0;
  if (qb < qe) {
    tap = qb / nct;
    const int c = qb - tap * nct;
    for (int t = 0; t < c; ++t) ci += chunk_len(ci, cin_g, g, c_per_og, BK);
    len = chunk_len(ci, cin_g, g, c_per_og, BK);
  }
  Geo geo = geometry<T>(off_n, mask_n, 0, P, gp_s, false, H, W, 0.f, 0.f);
  long long geo_ch = -1;

  // A chunk is staged in registers (load: weight vectors and the 4 raw corners of each sample)
  // and then written to shared memory (store: bilinear blend, rounding to the tile type).
  V areg[AVECS / GTHREADS];
  T raw[ROWS_PER_THREAD][4];
  auto load = [&]() {
    // Weight tile: BK rows (channels) of 128 contiguous output channels, 16-byte vectors.
    const T* __restrict__ wsrc = wt_g + ((long long)tap * cin_g + ci) * cout_gp;
#pragma unroll
    for (int e0 = 0; e0 < AVECS; e0 += GTHREADS) {
      const int e = e0 + tid;
      const int row = e / (GBM / VEC);
      const int col = (e - row * (GBM / VEC)) * VEC;
      if (row < len) {
        areg[e0 / GTHREADS] = *reinterpret_cast<const V*>(wsrc + (long long)row * cout_gp + col);
      } else {
        areg[e0 / GTHREADS] = V{0, 0, 0, 0};
      }
    }
    // Column tile: this thread's pixel, rows sr, sr + 2, ... (geometry reused across channels).
    const int og = (g * cin_g + ci) / c_per_og;
    const long long ch = (long long)og * taps + tap;
    if (ch != geo_ch) {
      const int i = tap / kw, j = tap - (tap / kw) * kw;
      geo = geometry<T>(off_n, mask_n, ch, P, gp_s, pvalid, H, W, (float)(ybase + i * dil_h),
                        (float)(xbase + j * dil_w));
      geo_ch = ch;
    }
    const T* __restrict__ plane = in_g + (long long)ci * HW;
#pragma unroll
    for (int t = 0; t < ROWS_PER_THREAD; ++t) {
      const int r = sr + t * (GTHREADS / GBN);
      const T* __restrict__ pl = plane + (long long)min(r, len - 1) * HW;  // NOTE: rows >= len are zeroed
      raw[t][0] = pl[geo.i0];
      raw[t][1] = pl[geo.i1];
      raw[t][2] = pl[geo.i2];
      raw[t][3] = pl[geo.i3];
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int e0 = 0; e0 < AVECS; e0 += GTHREADS) {
      const int e = e0 + tid;
      const int row = e / (GBM / VEC);
      const int col = (e - row * (GBM / VEC)) * VEC;
      *reinterpret_cast<V*>(&As[buf][row][col]) = areg[e0 / GTHREADS];
    }
#pragma unroll
    for (int t = 0; t < ROWS_PER_THREAD; ++t) {
      const int r = sr + t * (GTHREADS / GBN);
      float v = geo.w0 * to_f(raw[t][0]) + geo.w1 * to_f(raw[t][1]) + geo.w2 * to_f(raw[t][2]) +
                geo.w3 * to_f(raw[t][3]);
      Bs[buf][r][sp] = from_f<T>(r < len && __float_as_uint(geo.w0) != 0x80000000u ? v : 0.f);  // NOTE: exactly -0.0
    }
  };

  Mma mma;
  mma.init();
  if (qb < qe) {
    load();
    store(0);
  }
  __syncthreads();
  for (int q = qb; q < qe; ++q) {
    const int buf = (q - qb) & 1;
    const bool next = q + 1 < qe;
    if (next) {
      ci += len;
      if (ci >= cin_g) {
        ci = 0;
        ++tap;
      }
      len = chunk_len(ci, cin_g, g, c_per_og, BK);
      load();
      if (!Mma::PIPELINED) store(buf ^ 1);
    }
    mma.compute(As[buf], Bs[buf], tid);
    if (Mma::PIPELINED && next) store(buf ^ 1);  // NOTE: the gathers above were in flight during compute
    __syncthreads();
  }

  Sink<T> sink;
  sink.out = out;
  sink.bias = bias;
  sink.cout_g = cout_g;
  sink.P = P;
  sink.g = g;
  sink.out_base = ((long long)n * Cout + (long long)g * cout_g) * P;
  sink.part = nullptr;
  if (nsplit > 1) {
    const long long nimg = gridDim.z / groups;
    sink.part = part + (long long)split * nimg * Cout * P;
  }
  // The epilogue's per-warp 16x16 fp32 scratch reuses the weight tiles (8 KiB <= sizeof As).
  mma.store(reinterpret_cast<float*>(&As[0][0][0]), tid, m0, p0, sink);
}

// Weight relayout: w [Cout][Cin_g][taps] -> wt [groups][taps][Cin_g][cout_gp] (zero padded).
template <typename T>
__device__ __forceinline__ void wprep_impl(const T* __restrict__ w, T* __restrict__ wt, int Cout, int cin_g,
                                           int taps, int groups) {
  const int cout_g = Cout / groups;
  const int cout_gp = (cout_g + GBM - 1) / GBM * GBM;
  const long long total = (long long)groups * cin_g * cout_gp;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
    const int m = (int)(e % cout_gp);
    const long long rest = e / cout_gp;
    const int ci = (int)(rest % cin_g);
    const int g = (int)(rest / cin_g);
    const T* __restrict__ src = w + ((long long)(g * cout_g + m) * cin_g + ci) * taps;
    T* __restrict__ dst = wt + ((long long)g * taps * cin_g + ci) * cout_gp + m;
    for (int t = 0; t < taps; ++t) dst[(long long)t * cin_g * cout_gp] = m < cout_g ? src[t] : from_f<T>(0.f);
  }
}

// out = bias + sum over splits of the fp32 partials (fixed order).
template <typename T>
__device__ __forceinline__ void splitk_sum_impl(const float* __restrict__ part, const T* __restrict__ bias,
                                                T* __restrict__ out, int N, int Cout, int P, int nsplit) {
  const long long total = (long long)N * Cout * P;
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < total; e += step) {
    const int co = (int)((e / P) % Cout);
    float v = part[e];
    for (int s = 1; s < nsplit; ++s) v += part[(long long)s * total + e];
    if (bias) v += to_f(bias[co]);
    out[e] = from_f<T>(v);
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

T2T_DEFORM_ENTRY(deform_conv2d_fp32_m16, float, 16, 128, 16, 2, 4)
T2T_DEFORM_ENTRY(deform_conv2d_fp16_m16, __half, 16, 128, 16, 2, 4)

// -DT2T_DEFORM_F32_SIMT selects the CUDA-core fp32 path on sm_80+ too (benchmarks compare the two)
#if __CUDA_ARCH__ >= 800 && !defined(T2T_DEFORM_F32_SIMT)
#define T2T_DEFORM_F32_MMA t2t_deform::MmaTf32x3
#else
#define T2T_DEFORM_F32_MMA t2t_deform::SimtF32
#endif

#define T2T_DEFORM_GEMM(NAME, T, MMA, MINB)                                                                \
  extern "C" __global__ void __launch_bounds__(256, MINB) NAME(                                           \
      const T* __restrict__ input, const T* __restrict__ offset, const T* __restrict__ wt,             \
      const T* __restrict__ mask, const T* __restrict__ bias, T* __restrict__ out,                     \
      float* __restrict__ part, int Cin, int H, int W, int Cout, int kh, int kw, int Ho, int Wo,       \
      int stride_h, int stride_w, int pad_h, int pad_w, int dil_h, int dil_w, int groups,              \
      int offset_groups, int nsplit) {                                                                 \
    t2t_deform::gemm_impl<T, MMA>(input, offset, wt, mask, bias, out, part, Cin, H, W, Cout, kh, kw,   \
                                  Ho, Wo, stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups,      \
                                  offset_groups, nsplit);                                              \
  }

T2T_DEFORM_GEMM(deform_conv2d_fp32_gemm, float, T2T_DEFORM_F32_MMA, 1)
T2T_DEFORM_GEMM(deform_conv2d_fp16_gemm, __half, t2t_deform::MmaHalf, 2)

#define T2T_DEFORM_AUX(SUFFIX, T)                                                                      \
  extern "C" __global__ void __launch_bounds__(256) deform_conv2d_##SUFFIX##_wprep(                    \
      const T* __restrict__ w, T* __restrict__ wt, int Cout, int cin_g, int taps, int groups) {        \
    t2t_deform::wprep_impl<T>(w, wt, Cout, cin_g, taps, groups);                                       \
  }                                                                                                    \
  extern "C" __global__ void __launch_bounds__(256) deform_conv2d_##SUFFIX##_splitk_sum(               \
      const float* __restrict__ part, const T* __restrict__ bias, T* __restrict__ out, int N,          \
      int Cout, int P, int nsplit) {                                                                   \
    t2t_deform::splitk_sum_impl<T>(part, bias, out, N, Cout, P, nsplit);                               \
  }

T2T_DEFORM_AUX(fp32, float)
T2T_DEFORM_AUX(fp16, __half)
