// CUDA kernels against the CPU reference, bit for bit (label: gpu).
// Without a GPU every test is skipped and the binary exits with 77, which
// ctest reports as "skipped".

#include "fsdprt_quant.h"

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

#define CUDA_OK(expr)                                                          \
  do {                                                                         \
    cudaError_t err_ = (expr);                                                 \
    ASSERT_EQ(err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(err_); \
  } while (0)

#define Q_OK(expr)                                                             \
  do {                                                                         \
    fsdprt_status_t st_ = (expr);                                              \
    ASSERT_EQ(st_, FSDPRT_OK) << #expr << ": " << fsdprt_quant_last_error();   \
  } while (0)

#ifdef FSDPRT_QUANT_KERNEL_EMULATION
// The host emulation runs warp-cooperative kernels with one host thread per
// CUDA thread, which is slow; value-only variants (special values, exact
// scales) do not change the indexing it checks, so it runs fewer of them.
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

bool haveGpu() { return fsdprt_quant_cuda_available() != 0; }

#define REQUIRE_GPU()                                                          \
  do {                                                                         \
    if (!haveGpu())                                                            \
      GTEST_SKIP() << "no GPU";                                                \
  } while (0)

// Device buffer with a byte offset from a 256-byte aligned allocation, so
// tests can hit the kernels' unaligned (scalar) paths.
class DeviceBuffer {
public:
  DeviceBuffer(size_t bytes, size_t offset = 0) : offset_(offset) {
    if (cudaMalloc(&base_, bytes + offset + 16) != cudaSuccess)
      base_ = nullptr;
    else
      cudaMemset(base_, 0xCD, bytes + offset + 16);
  }
  ~DeviceBuffer() {
    if (base_)
      cudaFree(base_);
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  template <typename T = void> T *get() const {
    return reinterpret_cast<T *>(static_cast<char *>(base_) + offset_);
  }

private:
  void *base_ = nullptr;
  size_t offset_;
};

template <typename T> std::vector<T> download(const void *dev, size_t count) {
  std::vector<T> host(count);
  if (count)
    cudaMemcpy(host.data(), dev, count * sizeof(T), cudaMemcpyDeviceToHost);
  return host;
}

void upload(void *dev, const void *host, size_t bytes) {
  if (bytes)
    cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);
}

float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Random values over a wide range, with the special values sprinkled in.
std::vector<float> testValues(size_t n, float scale, uint32_t seed,
                              bool specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> logMag(-10.0f, 10.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = ((rng() & 1) ? -1.0f : 1.0f) * scale * std::exp2(logMag(rng));
  if (specials) {
    const float inf = std::numeric_limits<float>::infinity();
    const float s[] = {0.0f,
                       -0.0f,
                       std::numeric_limits<float>::quiet_NaN(),
                       -std::numeric_limits<float>::quiet_NaN(),
                       inf,
                       -inf,
                       bitsToFloat(1),
                       -bitsToFloat(0x007FFFFF),
                       448.0f,
                       -449.0f,
                       1e38f,
                       std::numeric_limits<float>::max()};
    for (size_t i = 0; i < n; i += 37)
      v[i] = s[(i / 37) % (sizeof(s) / sizeof(s[0]))];
  }
  return v;
}

// Input bytes for a dtype: fp32 as is, bf16 rounded.
std::vector<uint8_t> inputBytes(const std::vector<float> &v, int dtype) {
  std::vector<uint8_t> out;
  if (dtype == FSDPRT_QUANT_F32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  } else {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      const uint16_t b = fsdprt_quant_float_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

size_t dsize(int dtype) { return dtype == FSDPRT_QUANT_F32 ? 4 : 2; }

// Byte-exact comparison, reporting the first differences.
void expectSameBytes(const std::vector<uint8_t> &ref,
                     const std::vector<uint8_t> &got, const std::string &what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  size_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    if (ref[i] != got[i]) {
      if (bad < 5)
        ADD_FAILURE() << what << ": byte " << i << " ref 0x" << std::hex
                      << int(ref[i]) << " gpu 0x" << int(got[i]) << std::dec;
      ++bad;
    }
  EXPECT_EQ(bad, 0u) << what << ": mismatching bytes";
}

// Dequantized outputs: bit-exact except NaN payloads (GPU arithmetic
// returns the canonical NaN), which only need to be NaN on both sides.
void expectSameValues(const std::vector<uint8_t> &ref,
                      const std::vector<uint8_t> &got, int dtype,
                      const std::string &what) {
  ASSERT_EQ(ref.size(), got.size()) << what;
  const size_t es = dsize(dtype);
  size_t bad = 0;
  for (size_t i = 0; i < ref.size() / es; ++i) {
    float a, b;
    if (dtype == FSDPRT_QUANT_F32) {
      std::memcpy(&a, &ref[4 * i], 4);
      std::memcpy(&b, &got[4 * i], 4);
    } else {
      uint16_t ua, ub;
      std::memcpy(&ua, &ref[2 * i], 2);
      std::memcpy(&ub, &got[2 * i], 2);
      a = fsdprt_quant_bf16_to_float(ua);
      b = fsdprt_quant_bf16_to_float(ub);
    }
    const bool same = (std::isnan(a) && std::isnan(b)) ||
                      std::memcmp(&ref[es * i], &got[es * i], es) == 0;
    if (!same) {
      if (bad < 5)
        ADD_FAILURE() << what << ": element " << i << " ref " << a << " gpu "
                      << b;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": mismatching elements";
}

struct Case {
  size_t rows, cols;
  size_t offset; // byte offset of every device buffer (0 = aligned)
};

std::string label(const char *fmt, int dtype, const Case &c, bool specials) {
  char buf[192];
  std::snprintf(buf, sizeof(buf), "%s %s [%zu x %zu] offset %zu%s", fmt,
                dtype == FSDPRT_QUANT_F32 ? "f32" : "bf16", c.rows, c.cols,
                c.offset, specials ? " with special values" : "");
  return buf;
}

TEST(GpuQuant, Amax) {
  REQUIRE_GPU();
  for (int dtype : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16})
    for (size_t n : {1ul, 15ul, 16ul, 4101ul, 1ul << 20})
      for (size_t off : {0ul, 2ul}) {
        const auto v = testValues(n, 3.0f, 1, n > 100);
        const auto in = inputBytes(v, dtype);
        float ref = 0;
        Q_OK(fsdprt_quant_amax(in.data(), dtype, n, &ref));
        DeviceBuffer x(in.size(), off), amax(4);
        upload(x.get(), in.data(), in.size());
        Q_OK(fsdprt_quant_cuda_amax(x.get(), dtype, n, amax.get<float>(),
                                    nullptr));
        CUDA_OK(cudaDeviceSynchronize());
        EXPECT_EQ(download<float>(amax.get(), 1)[0], ref)
            << "n " << n << " dtype " << dtype;
      }
}

TEST(GpuQuant, Fp8Tensor) {
  REQUIRE_GPU();
  const size_t sizes[] = {1, 17, 4096 + 5, 1 << 20};
  for (bool specials : {false, true})
    for (int kind : {FSDPRT_QUANT_E4M3, FSDPRT_QUANT_E5M2})
      for (int dtype : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16})
        for (size_t n : sizes)
          for (size_t off : {0ul, 1ul})
            for (float scale : {1e-3f, 1.0f, 1e20f}) {
              const Case c{1, n, off};
              const std::string what = label("fp8_tensor", dtype, c, specials);
              const auto v = testValues(n, scale, 2, specials);
              const auto in = inputBytes(v, dtype);
              float amax = 0;
              Q_OK(fsdprt_quant_amax(in.data(), dtype, n, &amax));
              std::vector<uint8_t> q(n);
              float scaleInv = 0;
              Q_OK(fsdprt_quant_fp8_tensor_quantize(in.data(), dtype, n, amax,
                                                    kind, q.data(), &scaleInv));
              DeviceBuffer dx(in.size(), off * dsize(dtype)), dq(n, off),
                  dAmax(4), dScaleInv(4), dy(n * 4, off * 4);
              upload(dx.get(), in.data(), in.size());
              upload(dAmax.get(), &amax, 4);
              Q_OK(fsdprt_quant_cuda_fp8_tensor_quantize(
                  dx.get(), dtype, n, dAmax.get<float>(), kind,
                  dq.get<uint8_t>(), dScaleInv.get<float>(), nullptr));
              CUDA_OK(cudaDeviceSynchronize());
              expectSameBytes(q, download<uint8_t>(dq.get(), n), what);
              EXPECT_EQ(download<float>(dScaleInv.get(), 1)[0], scaleInv)
                  << what;
              // Dequantize the reference bytes on both sides.
              for (int outType : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16}) {
                std::vector<uint8_t> y(n * dsize(outType));
                Q_OK(fsdprt_quant_fp8_tensor_dequantize(
                    q.data(), n, kind, scaleInv, y.data(), outType));
                Q_OK(fsdprt_quant_cuda_fp8_tensor_dequantize(
                    dq.get<uint8_t>(), n, kind, dScaleInv.get<float>(),
                    dy.get(), outType, nullptr));
                CUDA_OK(cudaDeviceSynchronize());
                expectSameValues(y, download<uint8_t>(dy.get(), y.size()),
                                 outType, what + " dequant");
              }
            }
}

TEST(GpuQuant, Mxfp8) {
  REQUIRE_GPU();
  const Case rowCases[] = {{1, 32, 0}, {3, 64, 0}, {257, 96, 0}, {5, 64, 1}};
  const Case colCases[] = {
      {32, 1, 0}, {32, 17, 0}, {64, 48, 0}, {96, 200, 0}, {64, 48, 1}};
  for (bool specials : {false, true})
    for (int columnwise : {0, 1})
      for (int dtype : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16})
        for (const Case &c :
             columnwise
                 ? std::vector<Case>(std::begin(colCases), std::end(colCases))
                 : std::vector<Case>(std::begin(rowCases),
                                     std::end(rowCases))) {
          const std::string what =
              label(columnwise ? "mxfp8_col" : "mxfp8_row", dtype, c, specials);
          const size_t n = c.rows * c.cols;
          const auto v = testValues(n, 1.0f, 3, specials);
          const auto in = inputBytes(v, dtype);
          std::vector<uint8_t> q(n), s(n / 32);
          Q_OK(fsdprt_quant_mxfp8_quantize(in.data(), dtype, c.rows, c.cols,
                                           columnwise, q.data(), s.data()));
          DeviceBuffer dx(in.size(), c.offset * dsize(dtype)), dq(n, c.offset),
              ds(n / 32, c.offset), dy(n * 4, c.offset * 4);
          upload(dx.get(), in.data(), in.size());
          Q_OK(fsdprt_quant_cuda_mxfp8_quantize(dx.get(), dtype, c.rows, c.cols,
                                                columnwise, dq.get<uint8_t>(),
                                                ds.get<uint8_t>(), nullptr));
          CUDA_OK(cudaDeviceSynchronize());
          expectSameBytes(q, download<uint8_t>(dq.get(), n), what + " data");
          expectSameBytes(s, download<uint8_t>(ds.get(), n / 32),
                          what + " scales");
          for (int outType : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16}) {
            std::vector<uint8_t> y(n * dsize(outType));
            Q_OK(fsdprt_quant_mxfp8_dequantize(q.data(), s.data(), c.rows,
                                               c.cols, columnwise, y.data(),
                                               outType));
            Q_OK(fsdprt_quant_cuda_mxfp8_dequantize(
                dq.get<uint8_t>(), ds.get<uint8_t>(), c.rows, c.cols,
                columnwise, dy.get(), outType, nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            expectSameValues(y, download<uint8_t>(dy.get(), y.size()), outType,
                             what + " dequant");
          }
        }
}

TEST(GpuQuant, Nvfp4) {
  REQUIRE_GPU();
  const Case cases[] = {{1, 16, 0},    {3, 48, 0},  {5, 16, 0},
                        {128, 256, 0}, {3, 48, 1},  {37, 80, 0},
                        {33, 48, 1},   {16, 16, 0}, {50, 1040, 0}};
  for (bool twoD : {false, true})
    for (bool specials : {false, true})
      for (int dtype : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16})
        for (const Case &c : cases)
          for (float scale : {1e-30f, 1.0f, 1e30f}) {
            if (kEmulated && (!specials || scale != 1.0f))
              continue;
            const std::string what =
                label(twoD ? "nvfp4_2d" : "nvfp4", dtype, c, specials);
            const size_t n = c.rows * c.cols;
            const auto v = testValues(n, scale, 4, specials);
            const auto in = inputBytes(v, dtype);
            float amax = 0;
            Q_OK(fsdprt_quant_amax(in.data(), dtype, n, &amax));
            std::vector<uint8_t> q(n / 2), s(n / 16);
            Q_OK((twoD ? fsdprt_quant_nvfp4_2d_quantize
                       : fsdprt_quant_nvfp4_quantize)(
                in.data(), dtype, c.rows, c.cols, amax, q.data(), s.data()));
            DeviceBuffer dx(in.size(), c.offset * dsize(dtype)),
                dq(n / 2, c.offset), ds(n / 16, c.offset), dAmax(4),
                dy(n * 4, c.offset * 4);
            upload(dx.get(), in.data(), in.size());
            upload(dAmax.get(), &amax, 4);
            Q_OK((twoD ? fsdprt_quant_cuda_nvfp4_2d_quantize
                       : fsdprt_quant_cuda_nvfp4_quantize)(
                dx.get(), dtype, c.rows, c.cols, dAmax.get<float>(),
                dq.get<uint8_t>(), ds.get<uint8_t>(), nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            expectSameBytes(q, download<uint8_t>(dq.get(), n / 2),
                            what + " data");
            expectSameBytes(s, download<uint8_t>(ds.get(), n / 16),
                            what + " scales");
            for (int outType : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16}) {
              std::vector<uint8_t> y(n * dsize(outType));
              Q_OK(fsdprt_quant_nvfp4_dequantize(
                  q.data(), s.data(), c.rows, c.cols, amax, y.data(), outType));
              Q_OK(fsdprt_quant_cuda_nvfp4_dequantize(
                  dq.get<uint8_t>(), ds.get<uint8_t>(), c.rows, c.cols,
                  dAmax.get<float>(), dy.get(), outType, nullptr));
              CUDA_OK(cudaDeviceSynchronize());
              expectSameValues(y, download<uint8_t>(dy.get(), y.size()),
                               outType, what + " dequant");
            }
          }
}

TEST(GpuQuant, Fp8Blockwise) {
  REQUIRE_GPU();
  const Case cases[] = {{1, 1, 0},     {3, 130, 0},   {4, 256, 0},
                        {129, 300, 0}, {256, 256, 0}, {129, 16, 0},
                        {130, 300, 1}, {2, 48, 1}};
  // variant 0: 1x128, 1: 1x128 with transposed scales, 2: 128x128.
  for (bool specials : {false, true})
    for (int variant : {0, 1, 2})
      for (int pow2 : {1, 0})
        for (int dtype : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16})
          for (const Case &c : cases) {
            if (kEmulated && (!specials || !pow2))
              continue;
            const int blockRows = variant == 2 ? 128 : 1;
            const bool t = variant == 1;
            const std::string what = label(variant == 0   ? "block1x128"
                                           : variant == 1 ? "block1x128_t"
                                                          : "block128x128",
                                           dtype, c, specials) +
                                     (pow2 ? " pow2" : "");
            const size_t n = c.rows * c.cols;
            const size_t ns =
                ((c.rows + blockRows - 1) / blockRows) * ((c.cols + 127) / 128);
            const auto v = testValues(n, 2.0f, 5, specials);
            const auto in = inputBytes(v, dtype);
            std::vector<uint8_t> q(n);
            std::vector<float> s(ns);
            if (t)
              Q_OK(fsdprt_quant_fp8_block_1x128_t_quantize(
                  in.data(), dtype, c.rows, c.cols, pow2, q.data(), s.data()));
            else
              Q_OK(fsdprt_quant_fp8_block_quantize(in.data(), dtype, c.rows,
                                                   c.cols, blockRows, pow2,
                                                   q.data(), s.data()));
            DeviceBuffer dx(in.size(), c.offset * dsize(dtype)),
                dq(n, c.offset), ds(ns * 4), dy(n * 4, c.offset * 4);
            upload(dx.get(), in.data(), in.size());
            if (t)
              Q_OK(fsdprt_quant_cuda_fp8_block_1x128_t_quantize(
                  dx.get(), dtype, c.rows, c.cols, pow2, dq.get<uint8_t>(),
                  ds.get<float>(), nullptr));
            else
              Q_OK(fsdprt_quant_cuda_fp8_block_quantize(
                  dx.get(), dtype, c.rows, c.cols, blockRows, pow2,
                  dq.get<uint8_t>(), ds.get<float>(), nullptr));
            CUDA_OK(cudaDeviceSynchronize());
            expectSameBytes(q, download<uint8_t>(dq.get(), n), what + " data");
            std::vector<uint8_t> sBytes(ns * 4);
            std::memcpy(sBytes.data(), s.data(), sBytes.size());
            expectSameBytes(sBytes, download<uint8_t>(ds.get(), ns * 4),
                            what + " scale_inv");
            for (int outType : {FSDPRT_QUANT_F32, FSDPRT_QUANT_BF16}) {
              std::vector<uint8_t> y(n * dsize(outType));
              if (t) {
                Q_OK(fsdprt_quant_fp8_block_1x128_t_dequantize(
                    q.data(), s.data(), c.rows, c.cols, y.data(), outType));
                Q_OK(fsdprt_quant_cuda_fp8_block_1x128_t_dequantize(
                    dq.get<uint8_t>(), ds.get<float>(), c.rows, c.cols,
                    dy.get(), outType, nullptr));
              } else {
                Q_OK(fsdprt_quant_fp8_block_dequantize(
                    q.data(), s.data(), c.rows, c.cols, blockRows, y.data(),
                    outType));
                Q_OK(fsdprt_quant_cuda_fp8_block_dequantize(
                    dq.get<uint8_t>(), ds.get<float>(), c.rows, c.cols,
                    blockRows, dy.get(), outType, nullptr));
              }
              CUDA_OK(cudaDeviceSynchronize());
              expectSameValues(y, download<uint8_t>(dy.get(), y.size()),
                               outType, what + " dequant");
            }
          }
}

TEST(GpuQuant, SwapFirstDims) {
  REQUIRE_GPU();
  std::mt19937 rng(29);
  struct S {
    size_t d0, d1, inner, offset;
  };
  const S cases[] = {{4, 3, 16, 0}, {8, 5, 64, 0}, {3, 7, 8, 0},
                     {2, 9, 4, 0},  {5, 2, 6, 0},  {4, 4, 3, 0},
                     {8, 5, 64, 4}, {1, 1, 1, 0},  {16, 1000, 32, 0},
                     {7, 3, 1, 1}};
  for (const S &c : cases) {
    const size_t n = c.d0 * c.d1 * c.inner;
    std::vector<uint8_t> in(n), ref(n);
    for (auto &b : in)
      b = static_cast<uint8_t>(rng());
    Q_OK(fsdprt_quant_swap_first_dims(in.data(), ref.data(), c.d0, c.d1,
                                      c.inner));
    DeviceBuffer din(n, c.offset), dout(n, c.offset);
    upload(din.get(), in.data(), n);
    Q_OK(fsdprt_quant_cuda_swap_first_dims(din.get(), dout.get(), c.d0, c.d1,
                                           c.inner, nullptr));
    CUDA_OK(cudaDeviceSynchronize());
    expectSameBytes(ref, download<uint8_t>(dout.get(), n),
                    "swap " + std::to_string(c.d0) + "x" +
                        std::to_string(c.d1) + "x" + std::to_string(c.inner));
  }
}

// The any-format entry points share one validating front door: the CPU and
// the CUDA ones reject the same inputs with the same status and message
// (after the entry point's name), before any buffer is touched, GPU or not.
TEST(GpuQuant, TheFrontDoorRejectsLikeTheReference) {
  struct Case {
    const char *what;
    int format, dtype;
    size_t rows, cols;
    bool nullScales, nullData;
    fsdprt_status_t want;
  };
  const Case cases[] = {
      {"unknown format", 42, FSDPRT_QUANT_F32, 4, 64, false, false,
       FSDPRT_ERR_INVALID_ARGUMENT},
      {"unknown dtype", FSDPRT_QUANT_MXFP8_ROWWISE, 7, 4, 64, false, false,
       FSDPRT_ERR_INVALID_ARGUMENT},
      {"cols not a multiple of 32", FSDPRT_QUANT_MXFP8_ROWWISE,
       FSDPRT_QUANT_F32, 4, 48, false, false, FSDPRT_ERR_SHAPE},
      {"cols not a multiple of 16", FSDPRT_QUANT_NVFP4, FSDPRT_QUANT_BF16, 2,
       24, false, false, FSDPRT_ERR_SHAPE},
      {"null scales", FSDPRT_QUANT_FP8_BLOCK_128X128, FSDPRT_QUANT_F32, 4, 64,
       true, false, FSDPRT_ERR_INVALID_ARGUMENT},
      {"null data", FSDPRT_QUANT_FP8_E4M3_TENSOR, FSDPRT_QUANT_F32, 4, 64,
       false, true, FSDPRT_ERR_INVALID_ARGUMENT},
  };
  // Never read: every case fails its checks first.
  alignas(16) static uint8_t buf[1 << 12];
  auto *f = reinterpret_cast<float *>(buf);
  auto afterName = [](const std::string &m) {
    const size_t colon = m.find(": ");
    return colon == std::string::npos ? m : m.substr(colon + 2);
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.what);
    void *scales = c.nullScales ? nullptr : buf;
    uint8_t *data = c.nullData ? nullptr : buf;
    float tensor = 0;
    const fsdprt_status_t cpu = fsdprt_quant_quantize(
        c.format, buf, c.dtype, c.rows, c.cols, 1.0f, data, scales, &tensor);
    const std::string cpuMsg = fsdprt_quant_last_error();
    const fsdprt_status_t dev = fsdprt_quant_cuda_quantize(
        c.format, buf, c.dtype, c.rows, c.cols, f, data, scales, f, nullptr);
    const std::string devMsg = fsdprt_quant_last_error();
    EXPECT_EQ(cpu, c.want) << cpuMsg;
    EXPECT_EQ(dev, c.want) << devMsg;
    EXPECT_EQ(afterName(cpuMsg), afterName(devMsg));
    const fsdprt_status_t cpuBack = fsdprt_quant_dequantize(
        c.format, data, scales, 1.0f, c.rows, c.cols, buf, c.dtype);
    const std::string cpuBackMsg = fsdprt_quant_last_error();
    const fsdprt_status_t devBack = fsdprt_quant_cuda_dequantize(
        c.format, data, scales, f, c.rows, c.cols, buf, c.dtype, nullptr);
    EXPECT_EQ(cpuBack, c.want) << cpuBackMsg;
    EXPECT_EQ(devBack, c.want) << fsdprt_quant_last_error();
    EXPECT_EQ(afterName(cpuBackMsg), afterName(fsdprt_quant_last_error()));
  }
}

TEST(GpuQuant, ShapeErrorsMatchTheReference) {
  REQUIRE_GPU();
  DeviceBuffer x(4096), q(4096), s(4096);
  EXPECT_EQ(fsdprt_quant_cuda_mxfp8_quantize(x.get(), FSDPRT_QUANT_F32, 4, 48,
                                             0, q.get<uint8_t>(),
                                             s.get<uint8_t>(), nullptr),
            FSDPRT_ERR_SHAPE);
  EXPECT_EQ(fsdprt_quant_cuda_nvfp4_quantize(x.get(), FSDPRT_QUANT_F32, 4, 24,
                                             s.get<float>(), q.get<uint8_t>(),
                                             s.get<uint8_t>(), nullptr),
            FSDPRT_ERR_SHAPE);
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int rc = RUN_ALL_TESTS();
  if (rc == 0 && !haveGpu()) {
    std::printf("no GPU visible: GPU tests skipped\n");
    return 77;
  }
  return rc;
}
