#include "kernels.h"

#include "fsdprt.h"

#include <cmath>
#include <cstring>
#include <limits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace fsdprt {

float f16_to_f32(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24 is exact in fp32.
    float v = float(mant) * 5.9604644775390625e-8f;
    return bits_float(float_bits(v) | sign);
  }
  if (exp == 31)
    return bits_float(sign | 0x7f800000u | (mant << 13));
  return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t f32_to_f16(float f) {
  uint32_t x = float_bits(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) // NaN: keep it quiet and non-zero
    return uint16_t(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) // >= 65520 rounds to infinity
    return uint16_t(sign | 0x7c00u);
  uint32_t e = ax >> 23;
  if (e < 113) { // below 2^-14: subnormal half or zero
    if (e < 102)
      return uint16_t(sign);
    uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - e;
    uint32_t h = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1u);
    uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (h & 1u)))
      ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((e - 112u) << 10) | ((ax >> 13) & 0x3ffu);
  uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h; // a carry into the exponent is the correct rounding
  return uint16_t(sign | h);
}

namespace {

#if defined(__x86_64__)
// Streaming-store copy: the destination lines are written without being
// read first (no read-for-ownership), which matters when several ranks
// copy into memory that is not in any cache. Streaming stores are weakly
// ordered: callers fence once after a batch of them (store_fence), before
// the data is published to other threads.
__attribute__((target("avx2"))) void
stream_copy_avx2(char *dst, const char *src, size_t n) {
  size_t head = (64 - (reinterpret_cast<uintptr_t>(dst) & 63)) & 63;
  if (head > n)
    head = n;
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  n -= head;
  size_t blocks = n / 64;
  for (size_t i = 0; i < blocks; ++i) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src));
    __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i *>(src + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i *>(dst), a);
    _mm256_stream_si256(reinterpret_cast<__m256i *>(dst + 32), b);
    src += 64;
    dst += 64;
  }
  std::memcpy(dst, src, n - blocks * 64);
}

bool have_avx2() {
  static const bool ok = __builtin_cpu_supports("avx2");
  return ok;
}
#endif

void store_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// memcpy (skipping dst == src); true when streaming stores were used and a
// store_fence() is still due.
bool copy_unfenced(void *dst, const void *src, size_t n, bool streaming) {
  if (dst == src || n == 0)
    return false;
#if defined(__x86_64__)
  if (streaming && n >= 4096 && have_avx2()) {
    stream_copy_avx2(static_cast<char *>(dst), static_cast<const char *>(src),
                     n);
    return true;
  }
#endif
  std::memcpy(dst, src, n);
  return false;
}

constexpr int64_t kTile = 1024;

// Storage type T, accumulator A; Load converts T -> A, Store A -> T.
template <typename T, typename A> struct Plain {
  static A load(T v) { return A(v); }
  static T store(A v) { return T(v); }
};
struct Bf16 {
  static float load(uint16_t v) { return bf16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_bf16(v); }
};
struct F16 {
  static float load(uint16_t v) { return f16_to_f32(v); }
  static uint16_t store(float v) { return f32_to_f16(v); }
};
// Integers accumulate in 64 bits with wrap-around (done in unsigned
// arithmetic to stay defined); the store truncates like a C cast.
template <typename T> struct Int {
  static int64_t load(T v) { return int64_t(v); }
  static T store(int64_t v) { return T(v); }
};

template <typename A> inline A add(A a, A b) { return a + b; }
template <> inline int64_t add<int64_t>(int64_t a, int64_t b) {
  return int64_t(uint64_t(a) + uint64_t(b));
}

// NaN-propagating max / min (a NaN in any input gives NaN).
template <typename A> inline A vmax(A acc, A v) {
  return (v > acc || v != v) ? v : acc;
}
template <typename A> inline A vmin(A acc, A v) {
  return (v < acc || v != v) ? v : acc;
}

template <typename A> inline A divide(A sum, int k) { return sum / A(k); }

template <typename T, typename A, typename Conv>
void reduce_typed(void *const *dsts, int ndst, const void *const *srcs, int k,
                  int64_t n, int32_t op, bool streaming) {
  A acc[kTile];
  T tile[kTile];
  bool streamed = false;
  for (int64_t base = 0; base < n; base += kTile) {
    int64_t len = n - base < kTile ? n - base : kTile;
    const T *s0 = static_cast<const T *>(srcs[0]) + base;
    for (int64_t t = 0; t < len; ++t)
      acc[t] = Conv::load(s0[t]);
    for (int j = 1; j < k; ++j) {
      const T *s = static_cast<const T *>(srcs[j]) + base;
      switch (op) {
      case FSDPRT_SUM:
      case FSDPRT_AVG:
        for (int64_t t = 0; t < len; ++t)
          acc[t] = add<A>(acc[t], Conv::load(s[t]));
        break;
      case FSDPRT_MAX:
        for (int64_t t = 0; t < len; ++t)
          acc[t] = vmax<A>(acc[t], Conv::load(s[t]));
        break;
      default:
        for (int64_t t = 0; t < len; ++t)
          acc[t] = vmin<A>(acc[t], Conv::load(s[t]));
        break;
      }
    }
    if (op == FSDPRT_AVG)
      for (int64_t t = 0; t < len; ++t)
        acc[t] = divide<A>(acc[t], k);
    if (ndst == 1 && !streaming) {
      T *out = static_cast<T *>(dsts[0]) + base;
      for (int64_t t = 0; t < len; ++t)
        out[t] = Conv::store(acc[t]);
      continue;
    }
    for (int64_t t = 0; t < len; ++t)
      tile[t] = Conv::store(acc[t]);
    for (int d = 0; d < ndst; ++d)
      streamed |= copy_unfenced(static_cast<T *>(dsts[d]) + base, tile,
                                size_t(len) * sizeof(T), streaming);
  }
  if (streamed)
    store_fence();
}

} // namespace

void reduce_elems(void *const *dsts, int ndst, const void *const *srcs, int k,
                  int64_t n, int32_t dtype, int32_t op, bool streaming) {
  switch (dtype) {
  case FSDPRT_F32:
    return reduce_typed<float, float, Plain<float, float>>(dsts, ndst, srcs, k,
                                                           n, op, streaming);
  case FSDPRT_F64:
    return reduce_typed<double, double, Plain<double, double>>(
        dsts, ndst, srcs, k, n, op, streaming);
  case FSDPRT_F16:
    return reduce_typed<uint16_t, float, F16>(dsts, ndst, srcs, k, n, op,
                                              streaming);
  case FSDPRT_BF16:
    return reduce_typed<uint16_t, float, Bf16>(dsts, ndst, srcs, k, n, op,
                                               streaming);
  case FSDPRT_I32:
    return reduce_typed<int32_t, int64_t, Int<int32_t>>(dsts, ndst, srcs, k, n,
                                                        op, streaming);
  case FSDPRT_I64:
    return reduce_typed<int64_t, int64_t, Int<int64_t>>(dsts, ndst, srcs, k, n,
                                                        op, streaming);
  case FSDPRT_U8:
    return reduce_typed<uint8_t, int64_t, Int<uint8_t>>(dsts, ndst, srcs, k, n,
                                                        op, streaming);
  case FSDPRT_I8:
    return reduce_typed<int8_t, int64_t, Int<int8_t>>(dsts, ndst, srcs, k, n,
                                                      op, streaming);
  }
}

void copy_bytes(void *dst, const void *src, size_t n, bool streaming) {
  if (copy_unfenced(dst, src, n, streaming))
    store_fence();
}

void copy_bytes_multi(void *const *dsts, int ndst, const void *src, size_t n,
                      bool streaming) {
  // Blocks small enough to stay in L1 between destinations, so the source
  // is read from memory once.
  constexpr size_t kBlock = 8192;
  const char *from = static_cast<const char *>(src);
  bool streamed = false;
  for (size_t pos = 0; pos < n; pos += kBlock) {
    size_t len = n - pos < kBlock ? n - pos : kBlock;
    for (int d = 0; d < ndst; ++d)
      streamed |= copy_unfenced(static_cast<char *>(dsts[d]) + pos, from + pos,
                                len, streaming);
  }
  if (streamed)
    store_fence();
}

} // namespace fsdprt

extern "C" {

size_t fsdprt_dtype_size(int32_t dtype) {
  switch (dtype) {
  case FSDPRT_F32:
  case FSDPRT_I32:
    return 4;
  case FSDPRT_F64:
  case FSDPRT_I64:
    return 8;
  case FSDPRT_F16:
  case FSDPRT_BF16:
    return 2;
  case FSDPRT_U8:
  case FSDPRT_I8:
    return 1;
  }
  return 0;
}

const char *fsdprt_dtype_name(int32_t dtype) {
  static const char *const names[FSDPRT_NUM_DTYPES] = {
      "f32", "f64", "f16", "bf16", "i32", "i64", "u8", "i8"};
  return dtype >= 0 && dtype < FSDPRT_NUM_DTYPES ? names[dtype] : "?";
}

const char *fsdprt_reduce_op_name(int32_t op) {
  static const char *const names[FSDPRT_NUM_REDUCE_OPS] = {"sum", "avg", "max",
                                                           "min"};
  return op >= 0 && op < FSDPRT_NUM_REDUCE_OPS ? names[op] : "?";
}

int32_t fsdprt_abi_version(void) { return FSDPRT_ABI_VERSION; }

const char *fsdprt_status_string(fsdprt_status_t status) {
  return fsdprt_status_name(status);
}

} // extern "C"
