// The fused attention kernels of attention_kernels.cu, as the GPU runtime's
// entry points (gpu_attention.cpp) enqueue them. Compiled by nvcc for a GPU
// and by the host compiler for the emulation of CUDA (runtime/test/quant/
// cuda_emulation).
#ifndef FSDPRT_CUDA_ATTENTION_KERNELS_H
#define FSDPRT_CUDA_ATTENTION_KERNELS_H

#include <cuda_runtime.h>

#include <cstdint>

namespace fsdprt {
namespace gpu {
namespace attention {

// One attention call. Q, O, dO, dQ are contiguous [batch, heads, tq, d];
// K, V, dK, dV contiguous [batch, heads, tk, d]; all of one dtype (f32 or
// bf16 bits); the optional additive mask has that dtype too and element
// (b, h, i, j) at mask[b * ms[0] + h * ms[1] + i * ms[2] + j * ms[3]]
// (stride 0 broadcasts). lse and delta are f32 [batch, heads, tq].
struct Args {
  bool bf16 = false;
  const void *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  int64_t mask_stride[4] = {0, 0, 0, 0};
  const void *o = nullptr, *dout = nullptr; // backward inputs
  void *out = nullptr;                      // forward output
  void *dq = nullptr, *dk = nullptr, *dv = nullptr;
  float *lse = nullptr;   // forward output, backward input
  float *delta = nullptr; // backward scratch: rowsum(dO * O)
  int64_t batch = 0, heads = 0, tq = 0, tk = 0, d = 0;
  float scale = 1.0f;
  bool causal = false;
};

// Head dimensions with a kernel (16, 32, 64, 96, 128).
bool head_dim_supported(int64_t d);
// The largest grid the calls below launch must fit CUDA's grid; "" when it
// does, else why not.
const char *bad_size(const Args &a);
// Enqueue on `stream`; the first launch error, cudaSuccess otherwise.
cudaError_t forward(const Args &a, cudaStream_t stream);
cudaError_t backward(const Args &a, cudaStream_t stream);

// The tensor-core kernels (attention_mma_kernels.cu: mma.sync on bf16
// operands, f32 accumulation) take bf16 calls of head dimension 64 or 128;
// forward and backward call them. mma_backward expects a.delta to hold
// rowsum(dO * O) already.
bool mma_supported(const Args &a);
cudaError_t mma_forward(const Args &a, cudaStream_t stream);
cudaError_t mma_backward(const Args &a, cudaStream_t stream);

} // namespace attention
} // namespace gpu
} // namespace fsdprt

#endif // FSDPRT_CUDA_ATTENTION_KERNELS_H
