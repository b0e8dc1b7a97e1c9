// RUN: not fsdp-opt %s --fsdp-quantize-gathers="format=fp8_e3m4" 2>&1 | FileCheck %s --check-prefix=FORMAT
// RUN: not fsdp-opt %s --fsdp-quantize-gathers="dtypes=f16" 2>&1 | FileCheck %s --check-prefix=DTYPE
// RUN: not fsdp-opt %s --fsdp-quantize-gathers="phases=sideways" 2>&1 | FileCheck %s --check-prefix=PHASE
// RUN: not fsdp-opt %s --fsdp-quantize-gathers="min-elements=-1" 2>&1 | FileCheck %s --check-prefix=MIN
// RUN: not fsdp-opt %s --fsdp-pipeline="quantize=int8" 2>&1 | FileCheck %s --check-prefix=FORMAT

// FORMAT: '{{fp8_e3m4|int8}}' is not one of {{(none, )?}}fp8_e4m3_tensor, fp8_e5m2_tensor, mxfp8_rowwise, mxfp8_colwise, nvfp4, fp8_block_1x128, fp8_block_128x128, nvfp4_2d, fp8_block_1x128_t
// DTYPE: fsdp-quantize-gathers: dtypes lists 'f16'; only f32 and bf16 quantize
// PHASE: fsdp-quantize-gathers: phases lists 'sideways'; expected forward or backward
// MIN: fsdp-quantize-gathers: min-elements must be >= 0, got -1

fsdp.mesh @mesh [shard = 4]
func.func @step(%w: tensor<8xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>}) {
  return
}
