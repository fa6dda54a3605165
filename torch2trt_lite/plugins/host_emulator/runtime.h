// Host emulation of the CUDA device language, force-included (g++ -include) before a kernel file.
//
// Each CUDA thread of a block is a fiber (ucontext) on one OS thread; fibers run one at a time
// until they reach __syncthreads / a warp collective, so a block is executed deterministically in
// the order the launcher picks (forward or reverse thread order: a missing barrier shows as a
// difference). __shared__ variables are static thread_local, i.e. one copy per OS worker, shared by
// the fibers of the block it runs. Blocks run one after another on each worker.
//
// Not emulated (a kernel using them does not compile here): inline PTX, cp.async, ldmatrix,
// dynamic shared memory (extern __shared__), textures, cooperative groups, constant memory.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#define T2T_CUDA_EMU 1

#ifndef __CUDA_ARCH__
#error "compile with -D__CUDA_ARCH__=<750|800|...>"
#endif

#define __global__ T2T_EMU_GLOBAL
#ifndef T2T_EMU_SCAN  // the scan pass keeps the marker to find the kernels
#define T2T_EMU_GLOBAL
#endif
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __shared__ static thread_local
#define __align__(n) __attribute__((aligned(n)))
#define __syncthreads() t2t_emu::sync_block()
#define __syncwarp(...) t2t_emu::sync_warp()

// CUDA's vector types (the ones kernels here use).
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
struct alignas(8) int2 {
  int x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }

struct uint3 {
  unsigned int x, y, z;
};
struct dim3 {
  unsigned int x = 1, y = 1, z = 1;
};
constexpr int warpSize = 32;

extern thread_local uint3 threadIdx;
extern thread_local uint3 blockIdx;
extern thread_local dim3 blockDim;
extern thread_local dim3 gridDim;

namespace t2t_emu {
void sync_block();
void sync_warp();
// Warp exchange: every lane publishes a 64-bit value, then reads lane `src`'s value.
unsigned long long warp_exchange(unsigned long long mine, int src);
int lane_id();
// Records a device-side error (the first one wins); the launch then fails with this message.
void report_error(const char* msg);
}  // namespace t2t_emu

// ---------------------------------------------------------------------------------- math builtins
using std::signbit;  // CUDA's math API has it in the global namespace
inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __expf(float x) { return expf(x); }
inline float __logf(float x) { return logf(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int __float2int_rz(float x) { return (int)x; }
inline int __float2int_rd(float x) { return (int)floorf(x); }
inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
inline unsigned int __float_as_uint(float x) {
  unsigned int u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(unsigned int u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
inline int __float_as_int(float x) { return (int)__float_as_uint(x); }
inline float __int_as_float(int i) { return __uint_as_float((unsigned int)i); }

#define T2T_EMU_MINMAX(T)                          \
  inline T min(T a, T b) { return a < b ? a : b; } \
  inline T max(T a, T b) { return a < b ? b : a; }
T2T_EMU_MINMAX(int)
T2T_EMU_MINMAX(unsigned int)
T2T_EMU_MINMAX(long long)
T2T_EMU_MINMAX(unsigned long long)
inline float min(float a, float b) { return fminf(a, b); }
inline float max(float a, float b) { return fmaxf(a, b); }
#undef T2T_EMU_MINMAX

template <typename T>
inline T __ldg(const T* p) {
  return *p;
}

// Atomics: blocks may run on several OS threads at once.
template <typename T>
inline T atomicAdd(T* p, T v) {
  return __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
}
inline float atomicAdd(float* p, float v) {
  float old, want;
  __atomic_load(p, &old, __ATOMIC_RELAXED);
  do {
    want = old + v;
  } while (!__atomic_compare_exchange(p, &old, &want, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
  return old;
}
template <typename T>
inline T atomicMax(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (old < v && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}
template <typename T>
inline T atomicMin(T* p, T v) {
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (v < old && !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
  }
  return old;
}

// --------------------------------------------------------------------------------- warp shuffles
template <typename T>
inline T t2t_emu_shfl(T var, int src) {
  static_assert(sizeof(T) <= 8, "shuffle of a value wider than 64 bits");
  unsigned long long bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  unsigned long long got = t2t_emu::warp_exchange(bits, src);
  T out;
  std::memcpy(&out, &got, sizeof(T));
  return out;
}
template <typename T>
inline T __shfl_sync(unsigned, T var, int src, int width = 32) {
  const int lane = t2t_emu::lane_id();
  return t2t_emu_shfl(var, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <typename T>
inline T __shfl_xor_sync(unsigned, T var, int mask, int width = 32) {
  const int lane = t2t_emu::lane_id();
  const int src = lane ^ mask;
  return t2t_emu_shfl(var, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}
template <typename T>
inline T __shfl_down_sync(unsigned, T var, unsigned delta, int width = 32) {
  const int lane = t2t_emu::lane_id();
  return t2t_emu_shfl(var, (lane & (width - 1)) + (int)delta < width ? lane + (int)delta : lane);
}
template <typename T>
inline T __shfl_up_sync(unsigned, T var, unsigned delta, int width = 32) {
  const int lane = t2t_emu::lane_id();
  const int src = lane - (int)delta;
  return t2t_emu_shfl(var, (lane & (width - 1)) >= (int)delta ? src : lane);
}
