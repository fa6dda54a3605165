// Host stand-in for <mma.h> (nvcuda::wmma) under the CUDA emulator.
//
// The device spreads a fragment over the 32 lanes of a warp in an unspecified layout; here every
// lane holds the whole tile (row-major in x[]), so code that only uses the documented API
// (load/store/fill/mma and uniform element-wise loops over x[0..num_elements)) behaves the same.
// Each lane computes the full product; products of half or tf32 values are exact in float and
// are summed in k order in float. A tf32 operand keeps only its top 10 mantissa bits, as the
// tensor core does with fp32 inputs that were not rounded by __float_to_tf32.
#pragma once

#include <cstring>
#include <type_traits>

#include "cuda_fp16.h"

namespace nvcuda {
namespace wmma {

struct row_major {};
struct col_major {};
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
namespace precision {
struct tf32 {};
}  // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert((M == 16 && N == 16 && (K == 16 || K == 8)) || (M == 32 && N == 8 && K == 16) ||
                    (M == 8 && N == 32 && K == 16),
                "unsupported wmma shape");
  static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
  static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
  using storage_element_type = typename std::conditional<std::is_same<T, precision::tf32>::value, float, T>::type;
  using element_type = storage_element_type;
  static constexpr int num_elements = rows * cols;
  storage_element_type x[rows * cols];
};

inline float __float_to_tf32(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) != 0x7f800000u) {  // finite: round to nearest, ties away from zero
    u += 0x1000u;
    u &= 0xffffe000u;
  }
  std::memcpy(&f, &u, 4);
  return f;
}

namespace detail {
inline float as_float(float v) { return v; }
inline float as_float(__half v) { return (float)v; }
inline float tf32_truncate(float f) {
  unsigned int u;
  std::memcpy(&u, &f, 4);
  u &= 0xffffe000u;
  std::memcpy(&f, &u, 4);
  return f;
}
template <typename Frag>
inline bool is_col(Frag*) {
  return false;
}
template <typename Use, int M, int N, int K, typename T>
inline bool is_col(fragment<Use, M, N, K, T, col_major>*) {
  return true;
}
}  // namespace detail

// The device requires 256-bit aligned matrix pointers and a leading dimension that is a multiple
// of 16 bytes; anything else is undefined behaviour there, so it is an error here.
template <typename E>
inline void check_matrix_pointer(const E* p, unsigned ldm, const char* what) {
  if (reinterpret_cast<unsigned long long>(p) % 32 != 0) {
    t2t_emu::report_error(what[0] == 'l' ? "wmma::load_matrix_sync: pointer not 256-bit aligned"
                                         : "wmma::store_matrix_sync: pointer not 256-bit aligned");
  } else if ((ldm * sizeof(E)) % 16 != 0) {
    t2t_emu::report_error(what[0] == 'l' ? "wmma::load_matrix_sync: ldm is not a multiple of 16 bytes"
                                         : "wmma::store_matrix_sync: ldm is not a multiple of 16 bytes");
  }
}

template <typename Use, int M, int N, int K, typename T, typename L, typename E>
inline void load_matrix_sync(fragment<Use, M, N, K, T, L>& f, const E* p, unsigned ldm) {
  static_assert(!std::is_same<Use, accumulator>::value, "accumulator loads need a layout_t");
  using F = fragment<Use, M, N, K, T, L>;
  check_matrix_pointer(p, ldm, "load");
  const bool col = std::is_same<L, col_major>::value;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c) f.x[r * F::cols + c] = col ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K, typename T, typename E>
inline void load_matrix_sync(fragment<accumulator, M, N, K, T, void>& f, const E* p, unsigned ldm, layout_t l) {
  check_matrix_pointer(p, ldm, "load");
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) f.x[r * N + c] = l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K, typename T, typename E>
inline void store_matrix_sync(E* p, const fragment<accumulator, M, N, K, T, void>& f, unsigned ldm, layout_t l) {
  check_matrix_pointer(p, ldm, "store");
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c) (l == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[r * N + c];
}

template <typename Use, int M, int N, int K, typename T, typename L, typename V>
inline void fill_fragment(fragment<Use, M, N, K, T, L>& f, const V& v) {
  for (int i = 0; i < fragment<Use, M, N, K, T, L>::num_elements; ++i) f.x[i] = v;
}

template <int M, int N, int K, typename TA, typename LA, typename LB, typename TC>
inline void mma_sync(fragment<accumulator, M, N, K, TC, void>& d, const fragment<matrix_a, M, N, K, TA, LA>& a,
                     const fragment<matrix_b, M, N, K, TA, LB>& b, const fragment<accumulator, M, N, K, TC, void>& c) {
  constexpr bool tf32 = std::is_same<TA, precision::tf32>::value;
  float af[M * K], bf[K * N];  // NOTE: convert once (half -> float is a library call on the host)
  for (int i = 0; i < M * K; ++i) af[i] = tf32 ? detail::tf32_truncate(detail::as_float(a.x[i])) : detail::as_float(a.x[i]);
  for (int i = 0; i < K * N; ++i) bf[i] = tf32 ? detail::tf32_truncate(detail::as_float(b.x[i])) : detail::as_float(b.x[i]);
  TC out[M * N];
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      float acc = detail::as_float(c.x[i * N + j]);
      for (int k = 0; k < K; ++k) acc += af[i * K + k] * bf[k * N + j];
      out[i * N + j] = (TC)acc;
    }
  for (int i = 0; i < M * N; ++i) d.x[i] = out[i];
}

}  // namespace wmma
}  // namespace nvcuda
