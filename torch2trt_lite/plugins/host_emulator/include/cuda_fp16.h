// Host stand-in for <cuda_fp16.h> under the CUDA emulator: __half is GCC's _Float16 (IEEE binary16,
// conversions round to nearest even as on the GPU); arithmetic helpers compute in float and round
// once, like the device's half instructions.
#pragma once

typedef _Float16 __half;
struct alignas(4) __half2 {
  __half x, y;
};

inline float __half2float(__half h) { return (float)h; }
inline __half __float2half(float f) { return (__half)f; }
inline __half __float2half_rn(float f) { return (__half)f; }
inline __half2 __floats2half2_rn(float a, float b) { return {(__half)a, (__half)b}; }
inline __half2 __float2half2_rn(float a) { return {(__half)a, (__half)a}; }
inline __half2 __halves2half2(__half a, __half b) { return {a, b}; }
inline float __low2float(__half2 h) { return (float)h.x; }
inline float __high2float(__half2 h) { return (float)h.y; }
inline __half __low2half(__half2 h) { return h.x; }
inline __half __high2half(__half2 h) { return h.y; }
inline float2 __half22float2(__half2 h) { return {(float)h.x, (float)h.y}; }
inline __half __hadd(__half a, __half b) { return (__half)((float)a + (float)b); }
inline __half __hsub(__half a, __half b) { return (__half)((float)a - (float)b); }
inline __half __hmul(__half a, __half b) { return (__half)((float)a * (float)b); }
inline __half __hfma(__half a, __half b, __half c) { return (__half)fmaf((float)a, (float)b, (float)c); }
inline __half __hmax(__half a, __half b) { return (float)a < (float)b ? b : a; }
inline __half __hmin(__half a, __half b) { return (float)b < (float)a ? b : a; }
inline __half __ushort_as_half(unsigned short u) {
  __half h;
  std::memcpy(&h, &u, 2);
  return h;
}
inline unsigned short __half_as_ushort(__half h) {
  unsigned short u;
  std::memcpy(&u, &h, 2);
  return u;
}
