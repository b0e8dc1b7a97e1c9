/* When a GPU gemm splits its K dimension, and into how many slices: the one
 * policy that the runtime (runtime/cuda/gpu_blas.cpp) follows and the cost
 * model (fsdp-gpu-cost-report, lib/GPU/CostModelCalls.cpp) costs, so that
 * the model costs exactly the calls the runtime makes (docs/GPU.md,
 * "Split-K gemms").
 *
 * A gemm whose 128 x 128 output tiles fill less than 80% of the last wave
 * of the device's multiprocessors leaves SMs idle for a whole wave; cuBLAS's
 * default heuristics do not promise to split K. Split, the gemm is one
 * strided-batched gemm over S equal slices of K (per batch item: batch > 1
 * takes one call per slice) writing S f32 partials, plus, when S does not
 * divide K into slices of a multiple of 8, one more gemm over the rest; a
 * reduction kernel then sums the partials in slice order and applies alpha,
 * beta and the output's dtype. The slices multiply the tiles, so the waves
 * fill better; the partials cost their bytes.
 *
 * S (2 to 8) minimizes, in units of one tile's step of K on one SM,
 *   waves(tiles x S) x slice_k + waves(tiles) x rest_k
 *     + partials x tiles x FSDPRT_GPU_SPLIT_K_PARTIAL_COST
 * (batch > 1: S x waves(tiles) x slice_k, the slices' calls one after the
 * other, which fill no better: such a gemm is in effect never split), and
 * is taken when that is below 90% of the unsplit waves(tiles) x k.
 * The partial cost is a 128 x 128 f32 partial written and read at 4.3 TB/s
 * (30.5 ns) over a tile's step of K at 790 TFLOP/s on 132 SMs (5.5 ns):
 * about 6 (an H200's figures; the first device run calibrates them). */
#ifndef FSDPRT_GPU_SPLIT_K_H
#define FSDPRT_GPU_SPLIT_K_H

#include <stdint.h>

#define FSDPRT_GPU_SPLIT_K_TILE 128
/* Below this K nothing is split. */
#define FSDPRT_GPU_SPLIT_K_MIN_K 2048
#define FSDPRT_GPU_SPLIT_K_MAX_SLICES 8
/* Slices are a multiple of 8 elements of K (16-byte aligned bf16 rows), and
 * at least FSDPRT_GPU_SPLIT_K_MIN_K / 4 (the policy's, not a forced
 * split's). */
#define FSDPRT_GPU_SPLIT_K_ALIGN 8
#define FSDPRT_GPU_SPLIT_K_PARTIAL_COST 6
/* The last wave filled to at least 80%: no split. */
#define FSDPRT_GPU_SPLIT_K_FILL_PERCENT 80

typedef struct fsdprt_gpu_split_k {
  int64_t slices;   /* S equal slices; 1: not split */
  int64_t slice_k;  /* K of each slice */
  int64_t rest_k;   /* K left after the S slices (0: none), one more gemm */
  int64_t partials; /* f32 partials: S, + 1 with a rest */
  int64_t gemms;    /* cuBLAS calls: 1 (batch 1) or S (batch > 1), + 1
                       with a rest */
} fsdprt_gpu_split_k_t;

static inline int64_t fsdprt_gpu_split_k_waves_(int64_t tiles, int64_t sms) {
  return (tiles + sms - 1) / sms;
}

/* K split into `slices` equal slices of a multiple of 8 (the rest, if
 * any, one more gemm); 1 slice, or a K too short for them: not split. */
static inline fsdprt_gpu_split_k_t
fsdprt_gpu_split_k_slices(int64_t k, int64_t batch, int64_t slices) {
  fsdprt_gpu_split_k_t p = {1, k, 0, 0, 1};
  const int64_t slice = slices > 1 ? k / slices / FSDPRT_GPU_SPLIT_K_ALIGN *
                                         FSDPRT_GPU_SPLIT_K_ALIGN
                                   : 0;
  if (slice < FSDPRT_GPU_SPLIT_K_ALIGN)
    return p;
  p.slices = slices;
  p.slice_k = slice;
  p.rest_k = k - slices * slice;
  p.partials = slices + (p.rest_k > 0 ? 1 : 0);
  p.gemms = (batch > 1 ? slices : 1) + (p.rest_k > 0 ? 1 : 0);
  return p;
}

/* The policy's split of a row-major gemm C[batch][m, n] = A[m, k] B[k, n]
 * on a device with `sms` multiprocessors. */
static inline fsdprt_gpu_split_k_t fsdprt_gpu_split_k_plan(int64_t m, int64_t n,
                                                           int64_t k,
                                                           int64_t batch,
                                                           int64_t sms) {
  fsdprt_gpu_split_k_t best = fsdprt_gpu_split_k_slices(k, batch, 1);
  const int64_t t = FSDPRT_GPU_SPLIT_K_TILE;
  int64_t tiles, waves, base, best_cost, s;
  if (m <= 0 || n <= 0 || batch <= 0 || sms <= 0 ||
      k < FSDPRT_GPU_SPLIT_K_MIN_K)
    return best;
  tiles = ((m + t - 1) / t) * ((n + t - 1) / t) * batch;
  waves = fsdprt_gpu_split_k_waves_(tiles, sms);
  if (tiles * 100 >= waves * sms * FSDPRT_GPU_SPLIT_K_FILL_PERCENT)
    return best;
  base = waves * k;
  best_cost = base;
  for (s = 2; s <= FSDPRT_GPU_SPLIT_K_MAX_SLICES; ++s) {
    const fsdprt_gpu_split_k_t p = fsdprt_gpu_split_k_slices(k, batch, s);
    int64_t cost;
    if (p.slices != s || p.slice_k * 4 < FSDPRT_GPU_SPLIT_K_MIN_K)
      break;
    cost = (batch > 1 ? s * waves : fsdprt_gpu_split_k_waves_(tiles * s, sms)) *
               p.slice_k +
           waves * p.rest_k +
           p.partials * tiles * FSDPRT_GPU_SPLIT_K_PARTIAL_COST;
    if (cost * 10 < base * 9 && cost < best_cost) {
      best_cost = cost;
      best = p;
    }
  }
  return best;
}

#endif /* FSDPRT_GPU_SPLIT_K_H */
