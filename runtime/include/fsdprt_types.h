/*
 * fsdprt_types.h - the values the runtime and the compiler share.
 *
 * Element types, reduction operators and quantization formats, defined once.
 * Compiled code passes them to the runtime as plain integers, so they are
 * part of the ABI: fsdprt.h and fsdprt_quant.h use them, and the compiler
 * ties its own enums to them with static_asserts (ReduceKind in
 * lib/Conversion/FSDPToRuntime, QuantFormat, the dialect's one list of
 * formats, in include/fsdp/Dialect/FSDP/IR/QuantFormat.h). Plain C, no
 * dependencies.
 */
#ifndef FSDPRT_TYPES_H
#define FSDPRT_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* The status every function of the runtime's C APIs (fsdprt.h,
   fsdprt_gpu.h, fsdprt_quant.h) returns; docs/RUNTIME.md "Errors". */
typedef enum fsdprt_status {
  FSDPRT_OK = 0,
  FSDPRT_ERR_INVALID_ARGUMENT = 1, /* bad pointer, count, dtype, mask, ... */
  FSDPRT_ERR_DESYNC = 2,           /* ranks of a group called different ops */
  FSDPRT_ERR_TIMEOUT = 3,          /* a rank of the group never arrived */
  FSDPRT_ERR_BACKEND = 4,          /* MPI / CUDA / NCCL reported an error */
  FSDPRT_ERR_ABORTED = 5,          /* the world was aborted by another error */
  FSDPRT_ERR_UNSUPPORTED = 6,      /* not built, or no GPU for a kernel */
  FSDPRT_ERR_OUT_OF_MEMORY = 7,
  FSDPRT_ERR_NO_COMM = 8, /* jit entry point called without a thread comm */
  FSDPRT_ERR_INTERNAL = 9,
  FSDPRT_ERR_NO_DEVICE = 10, /* no GPU, too few, or a driver too old (gpu) */
  FSDPRT_ERR_SHAPE = 11 /* a dimension a quantization format cannot block */
} fsdprt_status_t;

#define FSDPRT_NUM_STATUS 12

/* The name of a status ("ok", "invalid argument", ...; "unknown status"
   outside the enum): what fsdprt_status_string and
   fsdprt_quant_status_string return. */
static inline const char *fsdprt_status_name(fsdprt_status_t status) {
  static const char *const names[FSDPRT_NUM_STATUS] = {
      "ok",
      "invalid argument",
      "desync",
      "timeout",
      "backend error",
      "aborted",
      "unsupported",
      "out of memory",
      "no communicator",
      "internal error",
      "no usable GPU",
      "shape not divisible by the block"};
  return (int)status >= 0 && (int)status < FSDPRT_NUM_STATUS
             ? names[(int)status]
             : "unknown status";
}

/* Element types. 8-bit float formats travel as FSDPRT_U8. */
typedef enum fsdprt_dtype {
  FSDPRT_F32 = 0,
  FSDPRT_F64 = 1,
  FSDPRT_F16 = 2,
  FSDPRT_BF16 = 3,
  FSDPRT_I32 = 4,
  FSDPRT_I64 = 5,
  FSDPRT_U8 = 6,
  FSDPRT_I8 = 7
} fsdprt_dtype_t;

#define FSDPRT_NUM_DTYPES 8

/* Reduction operators (the order of the compiler's ReduceKind). */
typedef enum fsdprt_reduce_op {
  FSDPRT_SUM = 0,
  FSDPRT_AVG = 1, /* sum in group-rank order, then divide by group size */
  FSDPRT_MAX = 2,
  FSDPRT_MIN = 3
} fsdprt_reduce_op_t;

#define FSDPRT_NUM_REDUCE_OPS 4

/* Formats of the quantized all-gather (docs/QUANTIZATION.md). */
typedef enum fsdprt_quant_format {
  /* FP8 per-tensor current scaling: data [rows, cols] u8 + fp32 scale_inv. */
  FSDPRT_QUANT_FP8_E4M3_TENSOR = 0,
  FSDPRT_QUANT_FP8_E5M2_TENSOR = 1,
  /* MXFP8 (E4M3 data, E8M0 scales), blocks of 32 along cols:
     data [rows, cols] u8 + scales [rows, cols/32] u8. cols % 32 == 0. */
  FSDPRT_QUANT_MXFP8_ROWWISE = 2,
  /* MXFP8, blocks of 32 rows: data [rows, cols] u8 (same element order as
     the input) + scales [rows/32, cols] u8. rows % 32 == 0. */
  FSDPRT_QUANT_MXFP8_COLWISE = 3,
  /* NVFP4 (TransformerEngine's operation order): E2M1 data, two per byte
     (even element in the low nibble): data [rows, cols/2] u8 + E4M3 block
     scales [rows, cols/16] u8 + the fp32 global amax. Blocks of 1x16.
     cols % 16 == 0. */
  FSDPRT_QUANT_NVFP4 = 4,
  /* FP8 (E4M3) blockwise, 1x128 blocks along cols: data [rows, cols] u8 +
     fp32 scale_inv [rows, ceil(cols/128)]. A trailing partial block is a
     block of its own (its amax covers only the elements present). */
  FSDPRT_QUANT_FP8_BLOCK_1X128 = 5,
  /* FP8 (E4M3) blockwise, 128x128 tiles: data [rows, cols] u8 + fp32
     scale_inv [ceil(rows/128), ceil(cols/128)]. Partial edge tiles as above. */
  FSDPRT_QUANT_FP8_BLOCK_128X128 = 6,
  /* NVFP4 with 16x16 blocks (TE's default for weights, nvfp4_2d): the
     layout of FSDPRT_QUANT_NVFP4, each of the 16 rows of a tile repeating
     the tile's scale (TE's rowwise scale tensor). A trailing partial tile
     covers the rows present. cols % 16 == 0. */
  FSDPRT_QUANT_NVFP4_2D = 7,
  /* FSDPRT_QUANT_FP8_BLOCK_1X128 with TE's scale layout: fp32 scale_inv
     [ceil(cols/128), rows] (block j of row r at j * rows + r). Gathered
     row shards give [k, ceil(cols/128), local_rows]; swap_first_dims(k,
     ceil(cols/128)) makes them the full tensor's [ceil(cols/128), rows]. */
  FSDPRT_QUANT_FP8_BLOCK_1X128_T = 8
} fsdprt_quant_format;

#define FSDPRT_QUANT_NUM_FORMATS 9

#ifdef __cplusplus
}
#endif

#endif /* FSDPRT_TYPES_H */
