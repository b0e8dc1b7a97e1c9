// A mutation of a test input (issue 21): an argument attribute named
// `fsdp.`, nothing after the prefix, beside fsdp.layout; the body has two
// blocks. --convert-fsdp-to-runtime once wrote it into fsdp.signatures as an
// empty key that fsdp-opt could not parse back.

fsdp.mesh @mesh [shard = 2]

func.func @blocks(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.= "a"},
                  %x: tensor<f32>) -> (tensor<f32> {fsdp.loss}) {
  cf.br ^bb1
^bb1:
  scf.execute_region {
  scf.yield
  }
  return %x : tensor<f32>
}
