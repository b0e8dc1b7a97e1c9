// Helpers for the runtime tests: thread worlds, test data and an independent
// reference for element conversions and rank-ordered reductions.
#ifndef FSDPRT_TEST_UTIL_H
#define FSDPRT_TEST_UTIL_H

#include "fsdprt.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace rt_test {

// Runs fn(rank, comm) on one thread per rank of a new threads world.
inline void run_world(const std::vector<int64_t> &shape,
                      const std::function<void(int64_t, fsdprt_comm_t *)> &fn,
                      const fsdprt_options_t *options = nullptr) {
  fsdprt_world_t *world = nullptr;
  ASSERT_EQ(fsdprt_threads_world_create(int32_t(shape.size()), shape.data(),
                                        options, &world),
            FSDPRT_OK);
  int64_t size = 1;
  for (int64_t s : shape)
    size *= s;
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < size; ++r) {
    fsdprt_comm_t *comm = nullptr;
    ASSERT_EQ(fsdprt_threads_comm(world, r, &comm), FSDPRT_OK);
    threads.emplace_back([&fn, r, comm] { fn(r, comm); });
  }
  for (auto &t : threads)
    t.join();
  fsdprt_world_destroy(world);
}

// Options whose collectives time out after `seconds`.
inline fsdprt_options_t short_timeout(double seconds) {
  fsdprt_options_t o;
  fsdprt_options_init(&o);
  o.timeout_s = seconds;
  return o;
}

struct RankResult {
  fsdprt_status_t status = FSDPRT_OK;
  std::string message;
};

// Every rank calls `body`; returns each rank's status and message, and the
// world's wall time in *elapsed.
inline std::vector<RankResult> run_failing(
    const std::vector<int64_t> &shape, const fsdprt_options_t &opts,
    const std::function<fsdprt_status_t(int64_t, fsdprt_comm_t *)> &body,
    double *elapsed) {
  int64_t w = 1;
  for (int64_t s : shape)
    w *= s;
  std::vector<RankResult> res(static_cast<size_t>(w));
  auto t0 = std::chrono::steady_clock::now();
  run_world(
      shape,
      [&](int64_t rank, fsdprt_comm_t *comm) {
        res[size_t(rank)].status = body(rank, comm);
        res[size_t(rank)].message = fsdprt_comm_last_error_message(comm);
      },
      &opts);
  *elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return res;
}

// Group of `rank` for `mask` on a row-major mesh, computed from coordinates
// (independently of the runtime): member ranks in group order.
inline std::vector<int64_t> group_members(const std::vector<int64_t> &shape,
                                          int64_t rank, int64_t mask,
                                          int64_t *group_rank) {
  const int n = int(shape.size());
  std::vector<int64_t> coords(static_cast<size_t>(n));
  for (int i = n - 1, r = int(rank); i >= 0; --i) {
    coords[size_t(i)] = r % shape[size_t(i)];
    r /= int(shape[size_t(i)]);
  }
  std::vector<int> axes;
  for (int i = 0; i < n; ++i)
    if (mask & (int64_t(1) << i))
      axes.push_back(i);
  // Odometer over the masked axes, last one fastest.
  std::vector<int64_t> members;
  std::vector<int64_t> c = coords;
  for (int a : axes)
    c[size_t(a)] = 0;
  for (;;) {
    int64_t r = 0;
    for (int i = 0; i < n; ++i)
      r = r * shape[size_t(i)] + c[size_t(i)];
    if (r == rank)
      *group_rank = int64_t(members.size());
    members.push_back(r);
    int j = int(axes.size()) - 1;
    while (j >= 0) {
      int a = axes[size_t(j)];
      if (++c[size_t(a)] < shape[size_t(a)])
        break;
      c[size_t(a)] = 0;
      --j;
    }
    if (j < 0)
      break;
  }
  return members;
}

// ---- 16-bit floats: decode by formula, encode by nearest table entry ----

inline double f16_value(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 0)
    v = std::ldexp(double(m), -24);
  else if (e == 31)
    v = m ? NAN : INFINITY;
  else
    v = std::ldexp(1.0 + m / 1024.0, e - 15);
  return s ? -v : v;
}

inline double bf16_value(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return double(f);
}

// Positive finite values of a 16-bit format, ascending with their codes.
struct Table16 {
  std::vector<std::pair<double, uint16_t>> pos;
  uint16_t inf_code;
  double max_finite;
};

inline Table16 make_table(double (*value)(uint16_t), uint16_t inf_code) {
  Table16 t;
  t.inf_code = inf_code;
  for (uint32_t h = 0; h < 0x8000u; ++h) {
    double v = value(uint16_t(h));
    if (std::isfinite(v))
      t.pos.emplace_back(v, uint16_t(h));
  }
  std::sort(t.pos.begin(), t.pos.end());
  t.max_finite = t.pos.back().first;
  return t;
}

// Round to nearest, ties to the even code, by searching the value table.
inline uint16_t round_to_16(const Table16 &t, double x, double overflow) {
  uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  double a = std::fabs(x);
  if (a >= overflow)
    return uint16_t(sign | t.inf_code);
  auto it = std::lower_bound(
      t.pos.begin(), t.pos.end(), std::make_pair(a, uint16_t(0)),
      [](const std::pair<double, uint16_t> &p,
         const std::pair<double, uint16_t> &q) { return p.first < q.first; });
  if (it == t.pos.end())
    return uint16_t(sign | t.pos.back().second);
  if (it->first == a || it == t.pos.begin())
    return uint16_t(sign | it->second);
  auto lo = it - 1;
  double dlo = a - lo->first, dhi = it->first - a;
  uint16_t code;
  if (dlo < dhi)
    code = lo->second;
  else if (dhi < dlo)
    code = it->second;
  else
    code = (lo->second & 1) ? it->second : lo->second;
  return uint16_t(sign | code);
}

inline const Table16 &f16_table() {
  static Table16 t = make_table(f16_value, 0x7c00);
  return t;
}
inline const Table16 &bf16_table() {
  static Table16 t = make_table(bf16_value, 0x7f80);
  return t;
}
// Halfway between the largest finite value and the next power step.
inline uint16_t to_f16(double x) {
  return round_to_16(f16_table(), x, 65520.0);
}
inline uint16_t to_bf16(double x) {
  return round_to_16(bf16_table(), x, std::ldexp(1.0, 128) * (1 - 0x1p-9));
}

// ---- test data and reference reductions -----------------------------------

inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Element i of the buffer of `rank` under `seed`, written as dtype.
inline void fill(void *buf, int32_t dtype, int64_t n, uint64_t seed) {
  for (int64_t i = 0; i < n; ++i) {
    uint64_t h = mix(seed * 1000003ull + uint64_t(i));
    // A value in [-8, 8) with a fine fractional part.
    double v = (double(int64_t(h % 1048576)) - 524288.0) / 65536.0;
    switch (dtype) {
    case FSDPRT_F32:
      static_cast<float *>(buf)[i] = float(v);
      break;
    case FSDPRT_F64:
      static_cast<double *>(buf)[i] = v + 1e-9 * double(h % 1000);
      break;
    case FSDPRT_F16:
      static_cast<uint16_t *>(buf)[i] = to_f16(v);
      break;
    case FSDPRT_BF16:
      static_cast<uint16_t *>(buf)[i] = to_bf16(v);
      break;
    case FSDPRT_I32:
      static_cast<int32_t *>(buf)[i] = int32_t(uint32_t(h >> 7));
      break;
    case FSDPRT_I64:
      static_cast<int64_t *>(buf)[i] = int64_t(h);
      break;
    case FSDPRT_U8:
      static_cast<uint8_t *>(buf)[i] = uint8_t(h >> 13);
      break;
    case FSDPRT_I8:
      static_cast<int8_t *>(buf)[i] = int8_t(h >> 21);
      break;
    }
  }
}

// Reference: out[i] = op over ins[0][i], ..., ins[k-1][i] in order.
inline void reference_reduce(void *out, const std::vector<const void *> &ins,
                             int32_t dtype, int32_t op, int64_t n) {
  const int k = int(ins.size());
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == FSDPRT_F32 || dtype == FSDPRT_F16 || dtype == FSDPRT_BF16) {
      auto get = [&](int j) -> float {
        if (dtype == FSDPRT_F32)
          return static_cast<const float *>(ins[size_t(j)])[i];
        uint16_t h = static_cast<const uint16_t *>(ins[size_t(j)])[i];
        return float(dtype == FSDPRT_F16 ? f16_value(h) : bf16_value(h));
      };
      float acc = get(0);
      for (int j = 1; j < k; ++j) {
        float v = get(j);
        if (op == FSDPRT_MAX)
          acc = (std::isnan(v) || v > acc) ? v : acc;
        else if (op == FSDPRT_MIN)
          acc = (std::isnan(v) || v < acc) ? v : acc;
        else
          acc = acc + v;
      }
      if (op == FSDPRT_AVG)
        acc = acc / float(k);
      if (dtype == FSDPRT_F32)
        static_cast<float *>(out)[i] = acc;
      else if (std::isnan(acc))
        static_cast<uint16_t *>(out)[i] = 0x7fff; // compared as NaN below
      else
        static_cast<uint16_t *>(out)[i] =
            dtype == FSDPRT_F16 ? to_f16(acc) : to_bf16(acc);
    } else if (dtype == FSDPRT_F64) {
      double acc = static_cast<const double *>(ins[0])[i];
      for (int j = 1; j < k; ++j) {
        double v = static_cast<const double *>(ins[size_t(j)])[i];
        if (op == FSDPRT_MAX)
          acc = (std::isnan(v) || v > acc) ? v : acc;
        else if (op == FSDPRT_MIN)
          acc = (std::isnan(v) || v < acc) ? v : acc;
        else
          acc = acc + v;
      }
      if (op == FSDPRT_AVG)
        acc = acc / double(k);
      static_cast<double *>(out)[i] = acc;
    } else {
      auto get = [&](int j) -> int64_t {
        const void *p = ins[size_t(j)];
        switch (dtype) {
        case FSDPRT_I32:
          return static_cast<const int32_t *>(p)[i];
        case FSDPRT_I64:
          return static_cast<const int64_t *>(p)[i];
        case FSDPRT_U8:
          return static_cast<const uint8_t *>(p)[i];
        default:
          return static_cast<const int8_t *>(p)[i];
        }
      };
      // Wrap-around sum in unsigned arithmetic.
      uint64_t sum = uint64_t(get(0));
      int64_t best = get(0);
      for (int j = 1; j < k; ++j) {
        int64_t v = get(j);
        sum += uint64_t(v);
        if (op == FSDPRT_MAX)
          best = std::max(best, v);
        if (op == FSDPRT_MIN)
          best = std::min(best, v);
      }
      int64_t r = op == FSDPRT_SUM   ? int64_t(sum)
                  : op == FSDPRT_AVG ? int64_t(sum) / k
                                     : best;
      switch (dtype) {
      case FSDPRT_I32:
        static_cast<int32_t *>(out)[i] = int32_t(uint32_t(uint64_t(r)));
        break;
      case FSDPRT_I64:
        static_cast<int64_t *>(out)[i] = r;
        break;
      case FSDPRT_U8:
        static_cast<uint8_t *>(out)[i] = uint8_t(uint64_t(r));
        break;
      default:
        static_cast<int8_t *>(out)[i] = int8_t(uint8_t(uint64_t(r)));
        break;
      }
    }
  }
}

// Bitwise comparison that treats any two NaNs of a float dtype as equal.
inline bool same_elements(const void *a, const void *b, int32_t dtype,
                          int64_t n, int64_t *first_bad) {
  size_t es = fsdprt_dtype_size(dtype);
  for (int64_t i = 0; i < n; ++i) {
    const char *pa = static_cast<const char *>(a) + size_t(i) * es;
    const char *pb = static_cast<const char *>(b) + size_t(i) * es;
    if (std::memcmp(pa, pb, es) == 0)
      continue;
    bool nan_a = false, nan_b = false;
    if (dtype == FSDPRT_F32) {
      float x, y;
      std::memcpy(&x, pa, 4);
      std::memcpy(&y, pb, 4);
      nan_a = std::isnan(x);
      nan_b = std::isnan(y);
    } else if (dtype == FSDPRT_F64) {
      double x, y;
      std::memcpy(&x, pa, 8);
      std::memcpy(&y, pb, 8);
      nan_a = std::isnan(x);
      nan_b = std::isnan(y);
    } else if (dtype == FSDPRT_F16 || dtype == FSDPRT_BF16) {
      uint16_t x, y;
      std::memcpy(&x, pa, 2);
      std::memcpy(&y, pb, 2);
      auto val = dtype == FSDPRT_F16 ? f16_value : bf16_value;
      nan_a = std::isnan(val(x));
      nan_b = std::isnan(val(y));
    }
    if (nan_a && nan_b)
      continue;
    *first_bad = i;
    return false;
  }
  return true;
}

// ---- member layouts (fsdprt_all_gather_members) ---------------------------

// The member-major buffer of k slots of sum(counts) elements of es bytes
// from the rank-major one: element t of member i in slot j moves from
// j * S + off_i + t to k * off_i + j * c_i + t. to_rank_major: the inverse.
inline std::vector<char> permute_members(const std::vector<int64_t> &counts,
                                         int64_t k, size_t es, const void *src,
                                         bool to_rank_major) {
  int64_t total = 0;
  for (int64_t c : counts)
    total += c;
  std::vector<char> out(size_t(k * total) * es);
  const char *in = static_cast<const char *>(src);
  int64_t off = 0;
  for (int64_t c : counts) {
    for (int64_t j = 0; j < k; ++j)
      for (int64_t t = 0; t < c; ++t) {
        size_t rm = size_t(j * total + off + t) * es;
        size_t mm = size_t(k * off + j * c + t) * es;
        if (to_rank_major)
          std::memcpy(out.data() + rm, in + mm, es);
        else
          std::memcpy(out.data() + mm, in + rm, es);
      }
    off += c;
  }
  return out;
}

// What group rank `gr` receives from a member-layout collective of `kind`
// (FSDPRT_KIND_ALL_GATHER or _REDUCE_SCATTER) whose group members sent
// `inputs` (in group order; reduce_scatter inputs member-major), built from
// the inputs alone: the gathered slots permuted, or each input permuted to
// rank-major and slot `gr` reduced in group order.
inline std::vector<char>
members_reference(const std::vector<int64_t> &counts, int32_t kind,
                  int32_t dtype, int32_t op, int64_t gr,
                  const std::vector<const void *> &inputs) {
  const size_t es = fsdprt_dtype_size(dtype);
  const int64_t k = int64_t(inputs.size());
  int64_t count = 0;
  for (int64_t c : counts)
    count += c;
  if (kind == FSDPRT_KIND_ALL_GATHER) {
    std::vector<char> rank_major(size_t(k * count) * es);
    for (int64_t j = 0; j < k; ++j)
      std::memcpy(rank_major.data() + size_t(j * count) * es, inputs[size_t(j)],
                  size_t(count) * es);
    return permute_members(counts, k, es, rank_major.data(), false);
  }
  std::vector<std::vector<char>> rank_major;
  std::vector<const void *> slots;
  for (const void *in : inputs)
    rank_major.push_back(permute_members(counts, k, es, in, true));
  for (auto &v : rank_major)
    slots.push_back(v.data() + size_t(gr * count) * es);
  std::vector<char> out(size_t(count) * es);
  reference_reduce(out.data(), slots, dtype, op, count);
  return out;
}

} // namespace rt_test

#endif // FSDPRT_TEST_UTIL_H
