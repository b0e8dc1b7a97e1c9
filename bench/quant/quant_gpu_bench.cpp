// GPU bandwidth of the quantization kernels on 256 MiB of bf16 input
// ([16384 x 8192] by default), next to a device-to-device memcpy of the same
// bytes measured in the same run.
//
//   fsdprt_quant_gpu_bench [--rows R] [--cols C] [--iters N] [--peak-gbps P]
//
// GB/s counts the bytes each kernel must read and write (input + quantized
// data + scales); "% peak" divides by --peak-gbps (4800, the H200's HBM3e).

#include "fsdprt_quant.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

void cudaCheck(cudaError_t err, const char *what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(1);
  }
}

void quantCheck(int status, const char *what) {
  if (status != FSDPRT_OK) {
    std::fprintf(stderr, "%s: %s\n", what, fsdprt_quant_last_error());
    std::exit(1);
  }
}

// Median kernel time in seconds over `iters` timed launches (after warm-up).
double medianSeconds(int iters, const std::function<void()> &launch) {
  for (int i = 0; i < 3; ++i)
    launch();
  cudaCheck(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(start);
    launch();
    cudaEventRecord(stop);
    cudaCheck(cudaEventSynchronize(stop), "timed launch");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms * 1e-3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  size_t rows = 16384, cols = 8192;
  int iters = 20;
  double peakGbps = 4800.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows"))
      rows = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--cols"))
      cols = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--iters"))
      iters = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--peak-gbps"))
      peakGbps = std::atof(argv[i + 1]);
  }
  if (!fsdprt_quant_cuda_available()) {
    std::printf("no GPU visible (or fsdprt_quant built without CUDA)\n");
    return 77;
  }
  if (rows % 128 || cols % 128) {
    std::fprintf(stderr, "rows and cols must be multiples of 128\n");
    return 1;
  }
  const size_t n = rows * cols;
  const double in = double(n) * 2; // bf16

  std::vector<uint16_t> host(n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto &v : host)
    v = fsdprt_quant_float_to_bf16(normal(rng));

  void *x, *y, *q, *scales, *copy;
  float *amax, *scaleInv;
  cudaCheck(cudaMalloc(&x, n * 2), "malloc x");
  cudaCheck(cudaMalloc(&y, n * 2), "malloc y");
  cudaCheck(cudaMalloc(&copy, n * 2), "malloc copy");
  cudaCheck(cudaMalloc(&q, n), "malloc q");
  cudaCheck(cudaMalloc(&scales, (n / 128 + rows) * 4 + n / 16), "malloc s");
  cudaCheck(cudaMalloc(&amax, 4), "malloc amax");
  cudaCheck(cudaMalloc(&scaleInv, 4), "malloc scale_inv");
  cudaCheck(cudaMemcpy(x, host.data(), n * 2, cudaMemcpyHostToDevice), "h2d");
  quantCheck(fsdprt_quant_cuda_amax(x, FSDPRT_QUANT_BF16, n, amax, nullptr),
             "amax");
  auto *q8 = static_cast<uint8_t *>(q);
  auto *s8 = static_cast<uint8_t *>(scales);
  auto *sf = static_cast<float *>(scales);
  const int bf = FSDPRT_QUANT_BF16;

  struct Row {
    std::string name;
    double bytesMoved;
    double seconds;
  };
  std::vector<Row> rowsOut;
  auto run = [&](const std::string &name, double moved,
                 const std::function<void()> &fn) {
    rowsOut.push_back({name, moved, medianSeconds(iters, fn)});
  };

  run("memcpy d2d (baseline)", 2 * in, [&] {
    cudaCheck(cudaMemcpyAsync(copy, x, n * 2, cudaMemcpyDeviceToDevice),
              "memcpy");
  });
  run("amax", in, [&] {
    quantCheck(fsdprt_quant_cuda_amax(x, bf, n, amax, nullptr), "amax");
  });
  run("fp8_e4m3_tensor quantize", in + n, [&] {
    quantCheck(fsdprt_quant_cuda_fp8_tensor_quantize(
                   x, bf, n, amax, FSDPRT_QUANT_E4M3, q8, scaleInv, nullptr),
               "fp8");
  });
  run("fp8_e4m3_tensor dequantize", n + in, [&] {
    quantCheck(fsdprt_quant_cuda_fp8_tensor_dequantize(
                   q8, n, FSDPRT_QUANT_E4M3, scaleInv, y, bf, nullptr),
               "fp8 dq");
  });
  run("mxfp8_rowwise quantize", in + n + n / 32.0, [&] {
    quantCheck(
        fsdprt_quant_cuda_mxfp8_quantize(x, bf, rows, cols, 0, q8, s8, nullptr),
        "mxfp8 row");
  });
  run("mxfp8_rowwise dequantize", n + n / 32.0 + in, [&] {
    quantCheck(fsdprt_quant_cuda_mxfp8_dequantize(q8, s8, rows, cols, 0, y, bf,
                                                  nullptr),
               "mxfp8 row dq");
  });
  run("mxfp8_colwise quantize", in + n + n / 32.0, [&] {
    quantCheck(
        fsdprt_quant_cuda_mxfp8_quantize(x, bf, rows, cols, 1, q8, s8, nullptr),
        "mxfp8 col");
  });
  run("mxfp8_colwise dequantize", n + n / 32.0 + in, [&] {
    quantCheck(fsdprt_quant_cuda_mxfp8_dequantize(q8, s8, rows, cols, 1, y, bf,
                                                  nullptr),
               "mxfp8 col dq");
  });
  run("nvfp4 quantize", in + n / 2.0 + n / 16.0, [&] {
    quantCheck(fsdprt_quant_cuda_nvfp4_quantize(x, bf, rows, cols, amax, q8, s8,
                                                nullptr),
               "nvfp4");
  });
  run("nvfp4 dequantize", n / 2.0 + n / 16.0 + in, [&] {
    quantCheck(fsdprt_quant_cuda_nvfp4_dequantize(q8, s8, rows, cols, amax, y,
                                                  bf, nullptr),
               "nvfp4 dq");
  });
  run("fp8_block_1x128 quantize", in + n + n / 32.0, [&] {
    quantCheck(fsdprt_quant_cuda_fp8_block_quantize(x, bf, rows, cols, 1, 1, q8,
                                                    sf, nullptr),
               "block 1x128");
  });
  run("fp8_block_1x128 dequantize", n + n / 32.0 + in, [&] {
    quantCheck(fsdprt_quant_cuda_fp8_block_dequantize(q8, sf, rows, cols, 1, y,
                                                      bf, nullptr),
               "block 1x128 dq");
  });
  run("fp8_block_128x128 quantize", in + n, [&] {
    quantCheck(fsdprt_quant_cuda_fp8_block_quantize(x, bf, rows, cols, 128, 1,
                                                    q8, sf, nullptr),
               "block 128x128");
  });
  run("swap_first_dims (bf16, 8 x rest)", 2 * in, [&] {
    quantCheck(fsdprt_quant_cuda_swap_first_dims(x, copy, 8, rows / 8, cols * 2,
                                                 nullptr),
               "swap");
  });

  std::printf("GPU kernels, bf16 input [%zu x %zu] = %.0f MiB, median of %d\n",
              rows, cols, in / 1048576.0, iters);
  std::printf("%-34s %9s %12s %12s %8s\n", "kernel", "ms", "input GB/s",
              "moved GB/s", "% peak");
  for (const Row &r : rowsOut) {
    const double moved = r.bytesMoved / r.seconds / 1e9;
    std::printf("%-34s %9.3f %12.1f %12.1f %7.1f%%\n", r.name.c_str(),
                r.seconds * 1e3, in / r.seconds / 1e9, moved,
                100.0 * moved / peakGbps);
  }
  cudaFree(x);
  cudaFree(y);
  cudaFree(copy);
  cudaFree(q);
  cudaFree(scales);
  cudaFree(amax);
  cudaFree(scaleInv);
  return 0;
}
