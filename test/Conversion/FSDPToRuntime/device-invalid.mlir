// RUN: fsdp-opt %s -split-input-file --convert-fsdp-to-runtime="device=true" -verify-diagnostics

// The GPU step's collectives run on nccl, which gathers rank after rank: a
// member layout is rejected where it is written.
fsdp.mesh @mesh [shard = 4]
func.func @members_on_the_gpu(%a: memref<48xf32>, %b: memref<192xf32>) {
  // expected-error @+1 {{'fsdp.buffer.all_gather' op has a member layout (`members`), which only the host backends (threads, mpi) run; the GPU step's collectives must be rank-major (fsdp-bucket-collectives member-layout=false)}}
  fsdp.buffer.all_gather %a into %b over @mesh ["shard"] members [16, 32] : memref<48xf32>, memref<192xf32>
  return
}

// -----

fsdp.mesh @mesh [shard = 4]
func.func @reduce_scatter_members_on_the_gpu(%a: memref<48xf32>, %b: memref<192xf32>) {
  // expected-error @+1 {{'fsdp.buffer.reduce_scatter_start' op has a member layout}}
  %r = fsdp.buffer.reduce_scatter_start %b into %a over @mesh ["shard"] sum members [16, 32] : memref<192xf32>, memref<48xf32>
  fsdp.buffer.wait %r
  return
}
