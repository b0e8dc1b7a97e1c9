// CPU element kernels: 16-bit float conversions and rank-ordered
// reductions used by the threads and mpi backends.
#ifndef FSDPRT_SRC_KERNELS_H
#define FSDPRT_SRC_KERNELS_H

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace fsdprt {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_f32(uint16_t h) { return bits_float(uint32_t(h) << 16); }

// Round to nearest even; NaN stays a quiet NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

float f16_to_f32(uint16_t h);
// Round to nearest even with subnormals; overflow gives infinity.
uint16_t f32_to_f16(float f);

// For t < n: every dsts[i][t] = op over srcs[0][t], ..., srcs[k-1][t],
// combined in that order (bf16/f16 accumulate in fp32 and round once, avg
// divides the sum by k). Destinations may alias sources element for
// element (in place): each tile is read completely before it is written.
// `streaming`: write the results with non-temporal stores (large outputs).
void reduce_elems(void *const *dsts, int ndst, const void *const *srcs, int k,
                  int64_t n, int32_t dtype, int32_t op, bool streaming = false);

// memcpy; skips dst == src. `streaming`: the data will not be read from
// this core's cache soon, so large blocks use non-temporal stores.
void copy_bytes(void *dst, const void *src, size_t n, bool streaming = false);
// Copies src to every destination, reading the source from memory once.
// Destinations equal to src are skipped.
void copy_bytes_multi(void *const *dsts, int ndst, const void *src, size_t n,
                      bool streaming = false);

} // namespace fsdprt

#endif // FSDPRT_SRC_KERNELS_H
