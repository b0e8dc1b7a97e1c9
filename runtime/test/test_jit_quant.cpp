// The local quantization steps of compiled code (fsdprt_jit_quant_amax,
// fsdprt_jit_quantize, fsdprt_jit_dequantize) around a plain byte all-gather
// give the bits of fsdprt_jit_quantized_all_gather, for every format, f32
// and bf16, on 4 ranks.
#include "fsdprt_quant.h"
#include "test_util.h"

#include <atomic>
#include <cstring>
#include <string>

using namespace rt_test;

namespace {

bool usesGroupAmax(int fmt) {
  return fmt == FSDPRT_QUANT_FP8_E4M3_TENSOR ||
         fmt == FSDPRT_QUANT_FP8_E5M2_TENSOR || fmt == FSDPRT_QUANT_NVFP4 ||
         fmt == FSDPRT_QUANT_NVFP4_2D;
}

// Rank-dependent values over many magnitudes, zeros and a -0.
float value(int64_t rank, int64_t i) {
  uint32_t h = uint32_t(i * 2654435761u) ^ uint32_t(rank * 40503u + 17u);
  h ^= h >> 13;
  h *= 0x5bd1e995u;
  h ^= h >> 15;
  float mantissa = float(h & 0xffff) / 65536.0f - 0.5f;
  int exponent = int((h >> 16) % 24) - 12 + int(i / 512);
  if (i % 97 == 0)
    return i % 2 ? -0.0f : 0.0f;
  return std::ldexp(mantissa, exponent);
}

uint16_t toBf16(float f) { // round to nearest even (finite inputs)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

TEST(JitQuant, SplitStepsMatchTheQuantizedAllGather) {
  const int64_t rows = 64, cols = 128, count = rows * cols, k = 4;
  for (int32_t dtype : {FSDPRT_F32, FSDPRT_BF16}) {
    for (int fmt = 0; fmt <= FSDPRT_QUANT_FP8_BLOCK_1X128_T; ++fmt) {
      SCOPED_TRACE(std::string(fsdprt_quant_format_name(fmt)) +
                   (dtype == FSDPRT_F32 ? " f32" : " bf16"));
      const int64_t shape[2] = {rows, cols};
      uint64_t wire = 0;
      ASSERT_EQ(fsdprt_quant_wire_bytes(fmt, shape, 2, &wire), FSDPRT_OK);
      const size_t es = dtype == FSDPRT_F32 ? 4 : 2;
      std::atomic<int> differing{0}, errors{0};
      run_world({k}, [&](int64_t rank, fsdprt_comm_t *comm) {
        fsdprt_set_thread_comm(comm);
        std::vector<char> send(size_t(count) * es);
        for (int64_t i = 0; i < count; ++i) {
          float v = value(rank, i);
          if (dtype == FSDPRT_F32) {
            std::memcpy(send.data() + i * 4, &v, 4);
          } else {
            uint16_t b = toBf16(v);
            std::memcpy(send.data() + i * 2, &b, 2);
          }
        }
        std::vector<char> fused(send.size() * k), split(send.size() * k);
        fsdprt_jit_quantized_all_gather(send.data(), fused.data(), count, dtype,
                                        fmt, rows, cols, 1);
        float local = 0, group = 0;
        if (usesGroupAmax(fmt)) {
          fsdprt_jit_quant_amax(send.data(), &local, count, dtype);
          fsdprt_jit_all_reduce(&local, &group, 1, FSDPRT_F32, FSDPRT_MAX, 1);
        }
        std::vector<uint8_t> packet(wire), all(wire * k);
        fsdprt_jit_quantize(send.data(), usesGroupAmax(fmt) ? &group : nullptr,
                            packet.data(), count, dtype, fmt, rows, cols);
        fsdprt_jit_all_gather(packet.data(), all.data(), int64_t(wire),
                              FSDPRT_U8, 1);
        fsdprt_jit_dequantize(all.data(), split.data(), k, dtype, fmt, rows,
                              cols);
        if (fsdprt_comm_error(comm) != FSDPRT_OK) {
          ADD_FAILURE() << fsdprt_comm_error_message(comm);
          errors++;
        }
        if (std::memcmp(fused.data(), split.data(), fused.size()) != 0)
          differing++;
        fsdprt_set_thread_comm(nullptr);
      });
      EXPECT_EQ(errors.load(), 0);
      EXPECT_EQ(differing.load(), 0);
    }
  }
}

TEST(JitQuant, BadArgumentsAreRecordedOnTheComm) {
  run_world({2}, [&](int64_t rank, fsdprt_comm_t *comm) {
    fsdprt_set_thread_comm(comm);
    float x[32] = {}, amax = 0;
    uint8_t packet[64];
    if (rank == 0) {
      // mxfp8_rowwise cannot block 31 columns.
      fsdprt_jit_quantize(x, &amax, packet, 31, FSDPRT_F32,
                          FSDPRT_QUANT_MXFP8_ROWWISE, 1, 31);
      EXPECT_EQ(fsdprt_comm_error(comm), FSDPRT_ERR_INVALID_ARGUMENT);
      EXPECT_NE(std::string(fsdprt_comm_error_message(comm)).find("quantize"),
                std::string::npos)
          << fsdprt_comm_error_message(comm);
    } else {
      // The amax of an f16 buffer: only f32 and bf16 quantize.
      fsdprt_jit_quant_amax(x, &amax, 32, FSDPRT_F16);
      EXPECT_NE(fsdprt_comm_error(comm), FSDPRT_OK);
    }
    fsdprt_set_thread_comm(nullptr);
  });
}

} // namespace
