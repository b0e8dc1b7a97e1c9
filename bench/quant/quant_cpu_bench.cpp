// Throughput of the CPU reference quantizers (single thread), in GB/s of
// input, next to a memcpy of the same input bytes measured in the same run.
//
//   fsdprt_quant_cpu_bench [--rows R] [--cols C] [--reps N]
//
// Prints one table; "vs memcpy" is the format's GB/s over memcpy's GB/s.

#include "fsdprt_quant.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Best-of-reps wall time of fn, in seconds (one warm-up run first).
double bestSeconds(int reps, const std::function<void()> &fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = Clock::now();
    fn();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    best = std::min(best, s);
  }
  return best;
}

void check(int status, const char *what) {
  if (status != FSDPRT_OK) {
    std::fprintf(stderr, "%s failed: %s\n", what, fsdprt_quant_last_error());
    std::exit(1);
  }
}

struct Row {
  std::string op, format, dtype;
  double inputBytes, seconds;
};

} // namespace

int main(int argc, char **argv) {
  size_t rows = 2048, cols = 8192;
  int reps = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows"))
      rows = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--cols"))
      cols = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[i + 1]);
  }
  if (rows % 32 || cols % 32) {
    std::fprintf(stderr, "rows and cols must be multiples of 32\n");
    return 1;
  }
  const size_t n = rows * cols;

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> xf(n);
  for (auto &v : xf)
    v = normal(rng);
  std::vector<uint16_t> xb(n);
  for (size_t i = 0; i < n; ++i)
    xb[i] = fsdprt_quant_float_to_bf16(xf[i]);

  std::vector<uint8_t> q(n), scales(n / 16);
  std::vector<float> blockScales(n / 128 + rows + 1);
  std::vector<float> yf(n);
  std::vector<uint8_t> memcpyDst(n * 4);
  std::vector<Row> table;

  for (int dtype : {FSDPRT_QUANT_BF16, FSDPRT_QUANT_F32}) {
    const void *x = dtype == FSDPRT_QUANT_F32
                        ? static_cast<const void *>(xf.data())
                        : static_cast<const void *>(xb.data());
    const double inBytes = double(n) * (dtype == FSDPRT_QUANT_F32 ? 4 : 2);
    const std::string dt = dtype == FSDPRT_QUANT_F32 ? "f32" : "bf16";
    float amax = 0;
    check(fsdprt_quant_amax(x, dtype, n, &amax), "amax");
    float scaleInv = 0;

    table.push_back({"memcpy", "-", dt, inBytes, bestSeconds(reps, [&] {
                       std::memcpy(memcpyDst.data(), x, size_t(inBytes));
                     })});
    table.push_back({"amax", "-", dt, inBytes, bestSeconds(reps, [&] {
                       check(fsdprt_quant_amax(x, dtype, n, &amax), "amax");
                     })});
    for (int kind : {FSDPRT_QUANT_E4M3, FSDPRT_QUANT_E5M2})
      table.push_back(
          {"quantize",
           kind == FSDPRT_QUANT_E4M3 ? "fp8_e4m3_tensor" : "fp8_e5m2_tensor",
           dt, inBytes, bestSeconds(reps, [&] {
             check(fsdprt_quant_fp8_tensor_quantize(x, dtype, n, amax, kind,
                                                    q.data(), &scaleInv),
                   "fp8");
           })});
    for (int columnwise : {0, 1})
      table.push_back(
          {"quantize", columnwise ? "mxfp8_colwise" : "mxfp8_rowwise", dt,
           inBytes, bestSeconds(reps, [&] {
             check(fsdprt_quant_mxfp8_quantize(x, dtype, rows, cols, columnwise,
                                               q.data(), scales.data()),
                   "mxfp8");
           })});
    table.push_back({"quantize", "nvfp4", dt, inBytes, bestSeconds(reps, [&] {
                       check(fsdprt_quant_nvfp4_quantize(x, dtype, rows, cols,
                                                         amax, q.data(),
                                                         scales.data()),
                             "nvfp4");
                     })});
    for (int br : {1, 128})
      table.push_back(
          {"quantize", br == 1 ? "fp8_block_1x128" : "fp8_block_128x128", dt,
           inBytes, bestSeconds(reps, [&] {
             check(fsdprt_quant_fp8_block_quantize(x, dtype, rows, cols, br, 1,
                                                   q.data(),
                                                   blockScales.data()),
                   "block");
           })});
  }

  // Dequantize to bf16 and f32; "input" is still the high-precision size the
  // tensor has, so the columns compare with the quantize rows.
  for (int dtype : {FSDPRT_QUANT_BF16, FSDPRT_QUANT_F32}) {
    const double outBytes = double(n) * (dtype == FSDPRT_QUANT_F32 ? 4 : 2);
    const std::string dt = dtype == FSDPRT_QUANT_F32 ? "f32" : "bf16";
    float amax = 0, scaleInv = 1.0f / 64;
    check(fsdprt_quant_amax(xf.data(), FSDPRT_QUANT_F32, n, &amax), "amax");
    table.push_back(
        {"dequantize", "fp8_e4m3_tensor", dt, outBytes, bestSeconds(reps, [&] {
           check(fsdprt_quant_fp8_tensor_dequantize(q.data(), n,
                                                    FSDPRT_QUANT_E4M3, scaleInv,
                                                    yf.data(), dtype),
                 "fp8 dq");
         })});
    check(fsdprt_quant_mxfp8_quantize(xf.data(), FSDPRT_QUANT_F32, rows, cols,
                                      0, q.data(), scales.data()),
          "mxfp8");
    table.push_back(
        {"dequantize", "mxfp8_rowwise", dt, outBytes, bestSeconds(reps, [&] {
           check(fsdprt_quant_mxfp8_dequantize(q.data(), scales.data(), rows,
                                               cols, 0, yf.data(), dtype),
                 "mxfp8 dq");
         })});
    check(fsdprt_quant_nvfp4_quantize(xf.data(), FSDPRT_QUANT_F32, rows, cols,
                                      amax, q.data(), scales.data()),
          "nvfp4");
    table.push_back(
        {"dequantize", "nvfp4", dt, outBytes, bestSeconds(reps, [&] {
           check(fsdprt_quant_nvfp4_dequantize(q.data(), scales.data(), rows,
                                               cols, amax, yf.data(), dtype),
                 "nvfp4 dq");
         })});
    check(fsdprt_quant_fp8_block_quantize(xf.data(), FSDPRT_QUANT_F32, rows,
                                          cols, 1, 1, q.data(),
                                          blockScales.data()),
          "block");
    table.push_back(
        {"dequantize", "fp8_block_1x128", dt, outBytes, bestSeconds(reps, [&] {
           check(fsdprt_quant_fp8_block_dequantize(q.data(), blockScales.data(),
                                                   rows, cols, 1, yf.data(),
                                                   dtype),
                 "block dq");
         })});
  }

  std::printf("CPU reference, one thread, tensor [%zu x %zu], best of %d\n",
              rows, cols, reps);
  std::printf("%-11s %-18s %-5s %9s %9s %10s %10s\n", "op", "format", "dtype",
              "MiB", "ms", "GB/s", "vs memcpy");
  double memcpyGbps[2] = {0, 0};
  for (const Row &r : table) {
    const double gbps = r.inputBytes / r.seconds / 1e9;
    const int slot = r.dtype == "f32" ? 1 : 0;
    if (r.op == "memcpy")
      memcpyGbps[slot] = gbps;
    std::printf("%-11s %-18s %-5s %9.1f %9.2f %10.3f %10.4f\n", r.op.c_str(),
                r.format.c_str(), r.dtype.c_str(), r.inputBytes / 1048576.0,
                r.seconds * 1e3, gbps,
                memcpyGbps[slot] > 0 ? gbps / memcpyGbps[slot] : 0.0);
  }
  return 0;
}
