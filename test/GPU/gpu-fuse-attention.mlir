// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-fuse-attention | FileCheck %s

// The generator's causal attention (fsdp_mlir.dev.gen transformer --attention),
// forward and backward: one forward call (O and the row log-sum-exp) and
// one backward call that takes the log-sum-exp in place of P; nothing of
// shape [2, 8, 8] is left.
// CHECK-LABEL: func.func @gen_causal(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<2x8x16xf32>, %[[K:[^:]+]]: tensor<2x8x16xf32>, %[[V:[^:]+]]: tensor<2x8x16xf32>, %[[DO:[^:]+]]: tensor<2x8x16xf32>
// CHECK-NOT: tensor<2x8x8xf32>
// CHECK: %[[F:.+]]:2 = call @[[FWD:__fsdp_attention_fwd_[0-9]+]](%[[Q]], %[[K]], %[[V]]) : (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x1x8xf32>)
// CHECK: %[[B:.+]]:3 = call @[[BWD:__fsdp_attention_bwd_[0-9]+]](%[[Q]], %[[K]], %[[V]], %[[F]]#0, %[[DO]], %[[F]]#1)
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#0, %[[B]]#0, %[[B]]#1, %[[B]]#2
// CHECK: func.func private @[[FWD]]({{.*}}) -> (tensor<2x8x16xf32>, tensor<2x1x8xf32>) attributes {fsdp.segment}
// CHECK: bufferization.to_buffer %{{.*}} read_only : tensor<2x8x16xf32> to memref<2x8x16xf32>
// CHECK: %[[ZERO:.+]] = llvm.mlir.zero : !llvm.ptr
// CHECK: memref.alloc() : memref<2x8x16xf32>
// CHECK: memref.alloc() : memref<2x1x8xf32>
// CHECK-DAG: %[[SCALE:.+]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[CAUSAL:.+]] = arith.constant 1 : i32
// CHECK: call @fsdprt_gpu_attention_fwd_f32({{.*}}, %[[ZERO]], %{{.*}}, %[[SCALE]], %[[CAUSAL]])
// CHECK: bufferization.to_tensor %{{.*}} restrict writable : memref<2x8x16xf32> to tensor<2x8x16xf32>
// CHECK: func.func private @[[BWD]]({{.*}}) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) attributes {fsdp.segment}
// CHECK: call @fsdprt_gpu_attention_bwd_f32(
func.func @gen_causal(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %dout: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 2.500000e-01 : f32
  %bscale = arith.constant 2.500000e-01 : f32
  %e_scores = tensor.empty() : tensor<2x8x8xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_scores : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_max = tensor.empty() : tensor<2x8xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<2x8x8xf32>) outs(%f_max : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %acc, %mx : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %e_exp = tensor.empty() : tensor<2x8x8xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_exp : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %zero, %ex : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x8xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x8xf32>) -> tensor<2x8xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<2x8x8xf32>) outs(%f_sum : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_p = tensor.empty() : tensor<2x8x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_p : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_attn = tensor.empty() : tensor<2x8x16xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_attn : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dprobs = tensor.empty() : tensor<2x8x8xf32>
  %f_dprobs = linalg.fill ins(%zero : f32) outs(%e_dprobs : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dprobs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dout, %v : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_dprobs : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dv = tensor.empty() : tensor<2x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %dout : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dv : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_rd = tensor.empty() : tensor<2x8xf32>
  %f_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowdot = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_rd : tensor<2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_ds = tensor.empty() : tensor<2x8x8xf32>
  %dscores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %dprobs, %rowdot : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_ds : tensor<2x8x8xf32>) {
  ^bb0(%p: f32, %dp: f32, %rd: f32, %o: f32):
    %df = arith.subf %dp, %rd : f32
    %m = arith.mulf %p, %df : f32
    %r = arith.mulf %m, %bscale : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_dq = tensor.empty() : tensor<2x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %k : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dq : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dk = tensor.empty() : tensor<2x8x16xf32>
  %f_dk = linalg.fill ins(%zero : f32) outs(%e_dk : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %q : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dk : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  return %attn, %dq, %dk, %dv : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Without the causal test in the maximum and the exponential: causal = 0.
// CHECK-LABEL: func.func @gen_full(
// CHECK: call @[[FWD:__fsdp_attention_fwd_[0-9]+]](
// CHECK: call @[[BWD:__fsdp_attention_bwd_[0-9]+]](
// CHECK: func.func private @[[FWD]](
// CHECK: %[[NC:.+]] = arith.constant 0 : i32
// CHECK: call @fsdprt_gpu_attention_fwd_f32({{.*}}, %[[NC]])
// CHECK: func.func private @[[BWD]](
func.func @gen_full(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %dout: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 2.500000e-01 : f32
  %bscale = arith.constant 2.500000e-01 : f32
  %e_scores = tensor.empty() : tensor<2x8x8xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_scores : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_max = tensor.empty() : tensor<2x8xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<2x8x8xf32>) outs(%f_max : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    linalg.yield %mx : f32
  } -> tensor<2x8xf32>
  %e_exp = tensor.empty() : tensor<2x8x8xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_exp : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    linalg.yield %ex : f32
  } -> tensor<2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x8xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x8xf32>) -> tensor<2x8xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<2x8x8xf32>) outs(%f_sum : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_p = tensor.empty() : tensor<2x8x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_p : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_attn = tensor.empty() : tensor<2x8x16xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_attn : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dprobs = tensor.empty() : tensor<2x8x8xf32>
  %f_dprobs = linalg.fill ins(%zero : f32) outs(%e_dprobs : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dprobs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dout, %v : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_dprobs : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dv = tensor.empty() : tensor<2x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %dout : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dv : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_rd = tensor.empty() : tensor<2x8xf32>
  %f_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowdot = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_rd : tensor<2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_ds = tensor.empty() : tensor<2x8x8xf32>
  %dscores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %dprobs, %rowdot : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_ds : tensor<2x8x8xf32>) {
  ^bb0(%p: f32, %dp: f32, %rd: f32, %o: f32):
    %df = arith.subf %dp, %rd : f32
    %m = arith.mulf %p, %df : f32
    %r = arith.mulf %m, %bscale : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_dq = tensor.empty() : tensor<2x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %k : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dq : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dk = tensor.empty() : tensor<2x8x16xf32>
  %f_dk = linalg.fill ins(%zero : f32) outs(%e_dk : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %q : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dk : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  return %attn, %dq, %dk, %dv : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// A forward alone (no backward reads P): the forward call only.
// CHECK-LABEL: func.func @gen_forward(
// CHECK: %[[F:.+]]:2 = call @__fsdp_attention_fwd_{{[0-9]+}}(%arg0, %arg1, %arg2) : {{.*}} -> (tensor<3x5x64xf32>, tensor<3x1x5xf32>)
// CHECK-NOT: linalg.generic
// CHECK: return %[[F]]#0
func.func @gen_forward(%q: tensor<3x5x64xf32>, %k: tensor<3x5x64xf32>, %v: tensor<3x5x64xf32>) -> (tensor<3x5x64xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 2.500000e-01 : f32
  %bscale = arith.constant 2.500000e-01 : f32
  %e_scores = tensor.empty() : tensor<3x5x5xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<3x5x5xf32>) -> tensor<3x5x5xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<3x5x64xf32>, tensor<3x5x64xf32>) outs(%f_scores : tensor<3x5x5xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<3x5x5xf32>
  %e_max = tensor.empty() : tensor<3x5xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<3x5xf32>) -> tensor<3x5xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<3x5x5xf32>) outs(%f_max : tensor<3x5xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %acc, %mx : f32
    linalg.yield %r : f32
  } -> tensor<3x5xf32>
  %e_exp = tensor.empty() : tensor<3x5x5xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<3x5x5xf32>, tensor<3x5xf32>) outs(%e_exp : tensor<3x5x5xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %zero, %ex : f32
    linalg.yield %r : f32
  } -> tensor<3x5x5xf32>
  %e_sum = tensor.empty() : tensor<3x5xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<3x5xf32>) -> tensor<3x5xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<3x5x5xf32>) outs(%f_sum : tensor<3x5xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<3x5xf32>
  %e_p = tensor.empty() : tensor<3x5x5xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<3x5x5xf32>, tensor<3x5xf32>) outs(%e_p : tensor<3x5x5xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<3x5x5xf32>
  %e_attn = tensor.empty() : tensor<3x5x64xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<3x5x64xf32>) -> tensor<3x5x64xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<3x5x5xf32>, tensor<3x5x64xf32>) outs(%f_attn : tensor<3x5x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<3x5x64xf32>
  return %attn : tensor<3x5x64xf32>
}

// -----

// Near-miss: a negative scale (exp((s - max) * scale) is then not
// softmax(s * scale)): unfused.
// CHECK-LABEL: func.func @gen_negative_scale(
// CHECK-NOT: call @__fsdp_attention
// CHECK: math.exp
func.func @gen_negative_scale(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %dout: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant -2.500000e-01 : f32
  %bscale = arith.constant -2.500000e-01 : f32
  %e_scores = tensor.empty() : tensor<2x8x8xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_scores : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_max = tensor.empty() : tensor<2x8xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<2x8x8xf32>) outs(%f_max : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %acc, %mx : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %e_exp = tensor.empty() : tensor<2x8x8xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_exp : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %zero, %ex : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x8xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x8xf32>) -> tensor<2x8xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<2x8x8xf32>) outs(%f_sum : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_p = tensor.empty() : tensor<2x8x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_p : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_attn = tensor.empty() : tensor<2x8x16xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_attn : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dprobs = tensor.empty() : tensor<2x8x8xf32>
  %f_dprobs = linalg.fill ins(%zero : f32) outs(%e_dprobs : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dprobs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dout, %v : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_dprobs : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dv = tensor.empty() : tensor<2x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %dout : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dv : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_rd = tensor.empty() : tensor<2x8xf32>
  %f_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowdot = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_rd : tensor<2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_ds = tensor.empty() : tensor<2x8x8xf32>
  %dscores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %dprobs, %rowdot : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_ds : tensor<2x8x8xf32>) {
  ^bb0(%p: f32, %dp: f32, %rd: f32, %o: f32):
    %df = arith.subf %dp, %rd : f32
    %m = arith.mulf %p, %df : f32
    %r = arith.mulf %m, %bscale : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_dq = tensor.empty() : tensor<2x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %k : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dq : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dk = tensor.empty() : tensor<2x8x16xf32>
  %f_dk = linalg.fill ins(%zero : f32) outs(%e_dk : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %q : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dk : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  return %attn, %dq, %dk, %dv : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Near-miss: head dim 8 has no kernel: unfused.
// CHECK-LABEL: func.func @gen_head_dim_8(
// CHECK-NOT: call @__fsdp_attention
// CHECK: math.exp
func.func @gen_head_dim_8(%q: tensor<2x8x8xf32>, %k: tensor<2x8x8xf32>, %v: tensor<2x8x8xf32>, %dout: tensor<2x8x8xf32>) -> (tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 2.500000e-01 : f32
  %bscale = arith.constant 2.500000e-01 : f32
  %e_scores = tensor.empty() : tensor<2x8x8xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_scores : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_max = tensor.empty() : tensor<2x8xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<2x8x8xf32>) outs(%f_max : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %acc, %mx : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %e_exp = tensor.empty() : tensor<2x8x8xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_exp : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %zero, %ex : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x8xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x8xf32>) -> tensor<2x8xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<2x8x8xf32>) outs(%f_sum : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_p = tensor.empty() : tensor<2x8x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_p : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_attn = tensor.empty() : tensor<2x8x8xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_attn : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dprobs = tensor.empty() : tensor<2x8x8xf32>
  %f_dprobs = linalg.fill ins(%zero : f32) outs(%e_dprobs : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dprobs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dout, %v : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_dprobs : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dv = tensor.empty() : tensor<2x8x8xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %dout : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_dv : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_rd = tensor.empty() : tensor<2x8xf32>
  %f_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowdot = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_rd : tensor<2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_ds = tensor.empty() : tensor<2x8x8xf32>
  %dscores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %dprobs, %rowdot : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_ds : tensor<2x8x8xf32>) {
  ^bb0(%p: f32, %dp: f32, %rd: f32, %o: f32):
    %df = arith.subf %dp, %rd : f32
    %m = arith.mulf %p, %df : f32
    %r = arith.mulf %m, %bscale : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_dq = tensor.empty() : tensor<2x8x8xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %k : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_dq : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dk = tensor.empty() : tensor<2x8x8xf32>
  %f_dk = linalg.fill ins(%zero : f32) outs(%e_dk : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %q : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_dk : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  return %attn, %dq, %dk, %dv : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8x8xf32>
}

// -----

// Near-miss: P is also a result (another user than the chain): unfused.
// CHECK-LABEL: func.func @gen_p_escapes(
// CHECK-NOT: call @__fsdp_attention
// CHECK: math.exp
func.func @gen_p_escapes(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %dout: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 2.500000e-01 : f32
  %bscale = arith.constant 2.500000e-01 : f32
  %e_scores = tensor.empty() : tensor<2x8x8xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_scores : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_max = tensor.empty() : tensor<2x8xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<2x8x8xf32>) outs(%f_max : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %acc, %mx : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %e_exp = tensor.empty() : tensor<2x8x8xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_exp : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %zero, %ex : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x8xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x8xf32>) -> tensor<2x8xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<2x8x8xf32>) outs(%f_sum : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_p = tensor.empty() : tensor<2x8x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_p : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_attn = tensor.empty() : tensor<2x8x16xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_attn : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dprobs = tensor.empty() : tensor<2x8x8xf32>
  %f_dprobs = linalg.fill ins(%zero : f32) outs(%e_dprobs : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dprobs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dout, %v : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_dprobs : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dv = tensor.empty() : tensor<2x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %dout : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dv : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_rd = tensor.empty() : tensor<2x8xf32>
  %f_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowdot = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_rd : tensor<2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_ds = tensor.empty() : tensor<2x8x8xf32>
  %dscores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %dprobs, %rowdot : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_ds : tensor<2x8x8xf32>) {
  ^bb0(%p: f32, %dp: f32, %rd: f32, %o: f32):
    %df = arith.subf %dp, %rd : f32
    %m = arith.mulf %p, %df : f32
    %r = arith.mulf %m, %bscale : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_dq = tensor.empty() : tensor<2x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %k : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dq : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dk = tensor.empty() : tensor<2x8x16xf32>
  %f_dk = linalg.fill ins(%zero : f32) outs(%e_dk : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %q : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dk : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  return %attn, %dq, %dk, %dv, %probs : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x8xf32>
}

// -----

// Near-miss: the maximum skips j > i but the exponential does not mask: unfused.
// CHECK-LABEL: func.func @gen_mask_mismatch(
// CHECK-NOT: call @__fsdp_attention
// CHECK: math.exp
func.func @gen_mask_mismatch(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %dout: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 2.500000e-01 : f32
  %bscale = arith.constant 2.500000e-01 : f32
  %e_scores = tensor.empty() : tensor<2x8x8xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_scores : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_max = tensor.empty() : tensor<2x8xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<2x8x8xf32>) outs(%f_max : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %acc, %mx : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %e_exp = tensor.empty() : tensor<2x8x8xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_exp : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    linalg.yield %ex : f32
  } -> tensor<2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x8xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x8xf32>) -> tensor<2x8xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<2x8x8xf32>) outs(%f_sum : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_p = tensor.empty() : tensor<2x8x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_p : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_attn = tensor.empty() : tensor<2x8x16xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_attn : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dprobs = tensor.empty() : tensor<2x8x8xf32>
  %f_dprobs = linalg.fill ins(%zero : f32) outs(%e_dprobs : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dprobs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dout, %v : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_dprobs : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dv = tensor.empty() : tensor<2x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %dout : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dv : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_rd = tensor.empty() : tensor<2x8xf32>
  %f_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowdot = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_rd : tensor<2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_ds = tensor.empty() : tensor<2x8x8xf32>
  %dscores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %dprobs, %rowdot : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_ds : tensor<2x8x8xf32>) {
  ^bb0(%p: f32, %dp: f32, %rd: f32, %o: f32):
    %df = arith.subf %dp, %rd : f32
    %m = arith.mulf %p, %df : f32
    %r = arith.mulf %m, %bscale : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_dq = tensor.empty() : tensor<2x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %k : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dq : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dk = tensor.empty() : tensor<2x8x16xf32>
  %f_dk = linalg.fill ins(%zero : f32) outs(%e_dk : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %q : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dk : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  return %attn, %dq, %dk, %dv : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// Near-miss: the backward's scale is not the forward's: unfused.
// CHECK-LABEL: func.func @gen_backward_scale(
// CHECK-NOT: call @__fsdp_attention
// CHECK: math.exp
func.func @gen_backward_scale(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf32>, %v: tensor<2x8x16xf32>, %dout: tensor<2x8x16xf32>) -> (tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %scale = arith.constant 2.500000e-01 : f32
  %bscale = arith.constant 5.000000e-01 : f32
  %e_scores = tensor.empty() : tensor<2x8x8xf32>
  %f_scores = linalg.fill ins(%zero : f32) outs(%e_scores : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_scores : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_max = tensor.empty() : tensor<2x8xf32>
  %f_max = linalg.fill ins(%ninf : f32) outs(%e_max : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowmax = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%scores : tensor<2x8x8xf32>) outs(%f_max : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %mx = arith.maximumf %x, %acc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %acc, %mx : f32
    linalg.yield %r : f32
  } -> tensor<2x8xf32>
  %e_exp = tensor.empty() : tensor<2x8x8xf32>
  %expd = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%scores, %rowmax : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_exp : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %mx: f32, %o: f32):
    %df = arith.subf %x, %mx : f32
    %sc = arith.mulf %df, %scale : f32
    %ex = math.exp %sc : f32
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %c = arith.cmpi ugt, %j, %i : index
    %r = arith.select %c, %zero, %ex : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x8xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x8xf32>) -> tensor<2x8xf32>
  %denom = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%expd : tensor<2x8x8xf32>) outs(%f_sum : tensor<2x8xf32>) {
  ^bb0(%x: f32, %acc: f32):
    %s = arith.addf %x, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_p = tensor.empty() : tensor<2x8x8xf32>
  %probs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%expd, %denom : tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_p : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %s: f32, %o: f32):
    %r = arith.divf %x, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_attn = tensor.empty() : tensor<2x8x16xf32>
  %f_attn = linalg.fill ins(%zero : f32) outs(%e_attn : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %attn = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %v : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_attn : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dprobs = tensor.empty() : tensor<2x8x8xf32>
  %f_dprobs = linalg.fill ins(%zero : f32) outs(%e_dprobs : tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %dprobs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dout, %v : tensor<2x8x16xf32>, tensor<2x8x16xf32>) outs(%f_dprobs : tensor<2x8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x8xf32>
  %e_dv = tensor.empty() : tensor<2x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dv = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%probs, %dout : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dv : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_rd = tensor.empty() : tensor<2x8xf32>
  %f_rd = linalg.fill ins(%zero : f32) outs(%e_rd : tensor<2x8xf32>) -> tensor<2x8xf32>
  %rowdot = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%dprobs, %probs : tensor<2x8x8xf32>, tensor<2x8x8xf32>) outs(%f_rd : tensor<2x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8xf32>
  %e_ds = tensor.empty() : tensor<2x8x8xf32>
  %dscores = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%probs, %dprobs, %rowdot : tensor<2x8x8xf32>, tensor<2x8x8xf32>, tensor<2x8xf32>) outs(%e_ds : tensor<2x8x8xf32>) {
  ^bb0(%p: f32, %dp: f32, %rd: f32, %o: f32):
    %df = arith.subf %dp, %rd : f32
    %m = arith.mulf %p, %df : f32
    %r = arith.mulf %m, %bscale : f32
    linalg.yield %r : f32
  } -> tensor<2x8x8xf32>
  %e_dq = tensor.empty() : tensor<2x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dq = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %k : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dq : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  %e_dk = tensor.empty() : tensor<2x8x16xf32>
  %f_dk = linalg.fill ins(%zero : f32) outs(%e_dk : tensor<2x8x16xf32>) -> tensor<2x8x16xf32>
  %dk = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dscores, %q : tensor<2x8x8xf32>, tensor<2x8x16xf32>) outs(%f_dk : tensor<2x8x16xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<2x8x16xf32>
  return %attn, %dq, %dk, %dv : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
}

// -----

// The PyTorch frontend's scaled_dot_product_attention with is_causal
// (math backend): Q and K^T times sqrt(scale) = 0.5, batch_matmuls on
// [batch * heads] collapses, the [T, T] causal mask added, the softmax
// with _safe_softmax's guard, P V; autograd's backward. The call takes K
// transposed back to [batch, heads, T, d]; O and dV come back collapsed,
// dK transposed to K^T's layout; causal = 1, no mask.
// CHECK-LABEL: func.func @torch_causal(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<2x2x8x16xf32>, %[[KT:[^:]+]]: tensor<2x2x16x8xf32>, %[[V:[^:]+]]: tensor<2x2x8x16xf32>, %[[DO:[^:]+]]: tensor<2x2x8x16xf32>
// CHECK-NOT: -> tensor<2x2x8x8xf32>
// CHECK: %[[K:.+]] = linalg.transpose ins(%[[KT]] : tensor<2x2x16x8xf32>) outs(%{{.*}} : tensor<2x2x8x16xf32>) permutation = [0, 1, 3, 2]
// CHECK: %[[F:.+]]:2 = call @[[FWD:__fsdp_attention_fwd_[0-9]+]](%[[Q]], %[[K]], %[[V]]) : {{.*}} -> (tensor<2x2x8x16xf32>, tensor<2x2x8xf32>)
// CHECK: %[[O:.+]] = tensor.collapse_shape %[[F]]#0 {{\[}}[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
// CHECK: %[[B:.+]]:3 = call @[[BWD:__fsdp_attention_bwd_[0-9]+]](%[[Q]], %[[K]], %[[V]], %[[F]]#0, %[[DO]], %[[F]]#1)
// CHECK-DAG: %[[DV:.+]] = tensor.collapse_shape %[[B]]#2
// CHECK-DAG: %[[DK:.+]] = linalg.transpose ins(%[[B]]#1 : tensor<2x2x8x16xf32>) outs(%{{.*}} : tensor<2x2x16x8xf32>) permutation = [0, 1, 3, 2]
// CHECK-NOT: linalg.batch_matmul
// CHECK: return %[[O]], %[[B]]#0, %[[DK]], %[[DV]]
// CHECK: func.func private @[[FWD]](
// CHECK-DAG: %[[SCALE:.+]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[CAUSAL:.+]] = arith.constant 1 : i32
// CHECK: call @fsdprt_gpu_attention_fwd_f32({{.*}}, %[[SCALE]], %[[CAUSAL]])
func.func @torch_causal(%q: tensor<2x2x8x16xf32>, %kt: tensor<2x2x16x8xf32>, %v: tensor<2x2x8x16xf32>, %dout: tensor<2x2x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.5 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xf32>) outs(%e_qs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  %e_ks = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xf32>) outs(%e_ks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_ar = tensor.empty() : tensor<8xi64>
  %ar = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e_ar : tensor<8xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<8xi64>
  %row = tensor.expand_shape %ar [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %col = tensor.expand_shape %ar [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %e_diff = tensor.empty() : tensor<8x8xi64>
  %diff = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%row, %col : tensor<1x8xi64>, tensor<8x1xi64>) outs(%e_diff : tensor<8x8xi64>) {
  ^bb0(%a: i64, %b: i64, %out: i64):
    %s = arith.subi %a, %b : i64
    linalg.yield %s : i64
  } -> tensor<8x8xi64>
  %e_le = tensor.empty() : tensor<8x8xi1>
  %le = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%diff : tensor<8x8xi64>) outs(%e_le : tensor<8x8xi1>) {
  ^bb0(%a: i64, %out: i1):
    %s = arith.cmpi sle, %a, %c0_i64 : i64
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %ones = arith.constant dense<true> : tensor<8x8xi1>
  %e_both = tensor.empty() : tensor<8x8xi1>
  %both = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%le, %ones : tensor<8x8xi1>, tensor<8x8xi1>) outs(%e_both : tensor<8x8xi1>) {
  ^bb0(%a: i1, %b: i1, %out: i1):
    %s = arith.andi %a, %b : i1
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %s0 = arith.constant dense<0.000000e+00> : tensor<f32>
  %sninf = arith.constant dense<0xFF800000> : tensor<f32>
  %e_mask = tensor.empty() : tensor<8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%both, %s0, %sninf : tensor<8x8xi1>, tensor<f32>, tensor<f32>) outs(%e_mask : tensor<8x8xf32>) {
  ^bb0(%a: i1, %x: f32, %y: f32, %out: f32):
    %s = arith.select %a, %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xf32>, tensor<8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dv = tensor.empty() : tensor<4x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dv = linalg.batch_matmul ins(%pct, %doc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_vct = tensor.empty() : tensor<4x16x8xf32>
  %vct = linalg.transpose ins(%vc : tensor<4x8x16xf32>) outs(%e_vct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp = linalg.batch_matmul ins(%doc, %vct : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %p : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_qct = tensor.empty() : tensor<4x16x8xf32>
  %qct = linalg.transpose ins(%qc : tensor<4x8x16xf32>) outs(%e_qct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x16x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %dkt = linalg.batch_matmul ins(%qct, %dsc : tensor<4x16x8xf32>, tensor<4x8x8xf32>) outs(%f_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %e_kct = tensor.empty() : tensor<4x8x16xf32>
  %kct = linalg.transpose ins(%kc : tensor<4x16x8xf32>) outs(%e_kct : tensor<4x8x16xf32>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dq = linalg.batch_matmul ins(%dsc, %kct : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xf32> into tensor<2x2x16x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xf32> into tensor<2x2x8x16xf32>
  %e_dks = tensor.empty() : tensor<2x2x16x8xf32>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x16x8xf32>) outs(%e_dks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %e_dqs = tensor.empty() : tensor<2x2x8x16xf32>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x16xf32>) outs(%e_dqs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  return %o, %dqs, %dks, %dv : tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>
}

// -----

// Hugging Face's causal mask ([batch, 1, T, T]: key <= query on two
// reshaped aranges, broadcast over the batch, then 0 / -inf) is the
// kernels' causal flag: no mask operand.

// CHECK-LABEL: func.func @torch_hf_causal(
// CHECK-NOT: tensor<2x1x8x8xf32>
// CHECK: call @[[FWD:__fsdp_attention_fwd_[0-9]+]](%{{[^,]+}}, %{{[^,]+}}, %{{[^,]+}}) :
// CHECK: call @[[BWD:__fsdp_attention_bwd_[0-9]+]](
// CHECK: func.func private @[[FWD]](
// CHECK: %[[CAUSAL:.+]] = arith.constant 1 : i32
// CHECK: call @fsdprt_gpu_attention_fwd_f32({{.*}}, %[[CAUSAL]])
func.func @torch_hf_causal(%q: tensor<2x2x8x16xf32>, %kt: tensor<2x2x16x8xf32>, %v: tensor<2x2x8x16xf32>, %dout: tensor<2x2x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.5 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xf32>) outs(%e_qs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  %e_ks = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xf32>) outs(%e_ks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_ar = tensor.empty() : tensor<8xi64>
  %ar = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e_ar : tensor<8xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<8xi64>
  %query = tensor.expand_shape %ar [[0, 1, 2, 3]] output_shape [1, 1, 8, 1] : tensor<8xi64> into tensor<1x1x8x1xi64>
  %key = tensor.expand_shape %ar [[0, 1, 2, 3]] output_shape [1, 1, 1, 8] : tensor<8xi64> into tensor<1x1x1x8xi64>
  %e_le = tensor.empty() : tensor<1x1x8x8xi1>
  %le = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, 0, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%key, %query : tensor<1x1x1x8xi64>, tensor<1x1x8x1xi64>) outs(%e_le : tensor<1x1x8x8xi1>) {
  ^bb0(%kj: i64, %qi: i64, %out: i1):
    %r = arith.cmpi sle, %kj, %qi : i64
    linalg.yield %r : i1
  } -> tensor<1x1x8x8xi1>
  %le3 = tensor.collapse_shape %le [[0, 1], [2], [3]] : tensor<1x1x8x8xi1> into tensor<1x8x8xi1>
  %e_bc = tensor.empty() : tensor<2x1x8x8xi1>
  %bc = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%le3 : tensor<1x8x8xi1>) outs(%e_bc : tensor<2x1x8x8xi1>) {
  ^bb0(%x: i1, %out: i1):
    linalg.yield %x : i1
  } -> tensor<2x1x8x8xi1>
  %s0 = arith.constant dense<0.000000e+00> : tensor<f32>
  %sninf = arith.constant dense<0xFF800000> : tensor<f32>
  %e_mask = tensor.empty() : tensor<2x1x8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> ()>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%bc, %s0, %sninf : tensor<2x1x8x8xi1>, tensor<f32>, tensor<f32>) outs(%e_mask : tensor<2x1x8x8xf32>) {
  ^bb0(%cond: i1, %x: f32, %y: f32, %out: f32):
    %r = arith.select %cond, %x, %y : f32
    linalg.yield %r : f32
  } -> tensor<2x1x8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xf32>, tensor<2x1x8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dv = tensor.empty() : tensor<4x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dv = linalg.batch_matmul ins(%pct, %doc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_vct = tensor.empty() : tensor<4x16x8xf32>
  %vct = linalg.transpose ins(%vc : tensor<4x8x16xf32>) outs(%e_vct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp = linalg.batch_matmul ins(%doc, %vct : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %p : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_qct = tensor.empty() : tensor<4x16x8xf32>
  %qct = linalg.transpose ins(%qc : tensor<4x8x16xf32>) outs(%e_qct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x16x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %dkt = linalg.batch_matmul ins(%qct, %dsc : tensor<4x16x8xf32>, tensor<4x8x8xf32>) outs(%f_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %e_kct = tensor.empty() : tensor<4x8x16xf32>
  %kct = linalg.transpose ins(%kc : tensor<4x16x8xf32>) outs(%e_kct : tensor<4x8x16xf32>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dq = linalg.batch_matmul ins(%dsc, %kct : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xf32> into tensor<2x2x16x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xf32> into tensor<2x2x8x16xf32>
  %e_dks = tensor.empty() : tensor<2x2x16x8xf32>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x16x8xf32>) outs(%e_dks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %e_dqs = tensor.empty() : tensor<2x2x8x16xf32>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x16xf32>) outs(%e_dqs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  return %o, %dqs, %dks, %dv : tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>
}

// -----

// Under fsdp-autocast (param-dtype=bf16): bf16 operands, the batch matmuls
// as generics that widen them and accumulate in f32, their results rounded
// to bf16; the softmax in f32. The _bf16 kernels replace the chain, and the
// roundings of the replaced products are the kernels' bf16 results.

// CHECK-LABEL: func.func @torch_causal_bf16(
// CHECK-SAME: %[[Q:[^:]+]]: tensor<2x2x8x16xbf16>, %[[KT:[^:]+]]: tensor<2x2x16x8xbf16>, %[[V:[^:]+]]: tensor<2x2x8x16xbf16>, %[[DO:[^:]+]]: tensor<2x2x8x16xbf16>
// CHECK-NOT: tensor<4x8x8x
// CHECK: %[[K:.+]] = linalg.transpose ins(%[[KT]] : tensor<2x2x16x8xbf16>) outs(%{{.*}} : tensor<2x2x8x16xbf16>) permutation = [0, 1, 3, 2]
// CHECK: %[[F:.+]]:2 = call @[[FWD:__fsdp_attention_fwd_[0-9]+]](%[[Q]], %[[K]], %[[V]]) : {{.*}} -> (tensor<2x2x8x16xbf16>, tensor<2x2x8xf32>)
// CHECK: %[[O:.+]] = tensor.collapse_shape %[[F]]#0 {{\[}}[0, 1], [2], [3]] : tensor<2x2x8x16xbf16> into tensor<4x8x16xbf16>
// CHECK: %[[B:.+]]:3 = call @[[BWD:__fsdp_attention_bwd_[0-9]+]](%[[Q]], %[[K]], %[[V]], %[[F]]#0, %[[DO]], %[[F]]#1)
// CHECK-DAG: %[[DV:.+]] = tensor.collapse_shape %[[B]]#2
// CHECK-DAG: %[[DK:.+]] = linalg.transpose ins(%[[B]]#1 : tensor<2x2x8x16xbf16>) outs(%{{.*}} : tensor<2x2x16x8xbf16>) permutation = [0, 1, 3, 2]
// CHECK-NOT: linalg.generic
// CHECK: return %[[O]], %[[B]]#0, %[[DK]], %[[DV]]
// CHECK: func.func private @[[FWD]](
// CHECK-DAG: %[[SCALE:.+]] = arith.constant 2.500000e-01 : f32
// CHECK-DAG: %[[CAUSAL:.+]] = arith.constant 1 : i32
// CHECK: call @fsdprt_gpu_attention_fwd_bf16({{.*}}, %[[SCALE]], %[[CAUSAL]])
// CHECK: func.func private @[[BWD]](
// CHECK: call @fsdprt_gpu_attention_bwd_bf16(
func.func @torch_causal_bf16(%q: tensor<2x2x8x16xbf16>, %kt: tensor<2x2x16x8xbf16>, %v: tensor<2x2x8x16xbf16>, %dout: tensor<2x2x8x16xbf16>) -> (tensor<4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x16x8xbf16>, tensor<4x8x16xbf16>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.5 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xbf16>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xbf16>) outs(%e_qs : tensor<2x2x8x16xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %w = arith.extf %in : bf16 to f32
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %w, %t : f32
    %n = arith.truncf %m : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<2x2x8x16xbf16>
  %e_ks = tensor.empty() : tensor<2x2x16x8xbf16>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xbf16>) outs(%e_ks : tensor<2x2x16x8xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %w = arith.extf %in : bf16 to f32
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %w, %t : f32
    %n = arith.truncf %m : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<2x2x16x8xbf16>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xbf16> into tensor<4x8x16xbf16>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xbf16> into tensor<4x16x8xbf16>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%qc, %kc : tensor<4x8x16xbf16>, tensor<4x16x8xbf16>) outs(%f_sc : tensor<4x8x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x8x8xf32>
  %sc = arith.truncf %sc32 : tensor<4x8x8xf32> to tensor<4x8x8xbf16>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xbf16> into tensor<2x2x8x8xbf16>
  %e_ar = tensor.empty() : tensor<8xi64>
  %ar = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e_ar : tensor<8xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<8xi64>
  %row = tensor.expand_shape %ar [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %col = tensor.expand_shape %ar [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %e_diff = tensor.empty() : tensor<8x8xi64>
  %diff = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%row, %col : tensor<1x8xi64>, tensor<8x1xi64>) outs(%e_diff : tensor<8x8xi64>) {
  ^bb0(%a: i64, %b: i64, %out: i64):
    %s = arith.subi %a, %b : i64
    linalg.yield %s : i64
  } -> tensor<8x8xi64>
  %e_le = tensor.empty() : tensor<8x8xi1>
  %le = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%diff : tensor<8x8xi64>) outs(%e_le : tensor<8x8xi1>) {
  ^bb0(%a: i64, %out: i1):
    %s = arith.cmpi sle, %a, %c0_i64 : i64
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %ones = arith.constant dense<true> : tensor<8x8xi1>
  %e_both = tensor.empty() : tensor<8x8xi1>
  %both = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%le, %ones : tensor<8x8xi1>, tensor<8x8xi1>) outs(%e_both : tensor<8x8xi1>) {
  ^bb0(%a: i1, %b: i1, %out: i1):
    %s = arith.andi %a, %b : i1
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %s0 = arith.constant dense<0.000000e+00> : tensor<f32>
  %sninf = arith.constant dense<0xFF800000> : tensor<f32>
  %e_mask = tensor.empty() : tensor<8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%both, %s0, %sninf : tensor<8x8xi1>, tensor<f32>, tensor<f32>) outs(%e_mask : tensor<8x8xf32>) {
  ^bb0(%a: i1, %x: f32, %y: f32, %out: f32):
    %s = arith.select %a, %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xbf16>, tensor<8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a16: bf16, %m: f32, %out: f32):
    %a = arith.extf %a16 : bf16 to f32
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xbf16> into tensor<4x8x16xbf16>
  %pc16 = arith.truncf %pc : tensor<4x8x8xf32> to tensor<4x8x8xbf16>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pc16, %vc : tensor<4x8x8xbf16>, tensor<4x8x16xbf16>) outs(%f_o : tensor<4x8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %o = arith.truncf %o32 : tensor<4x8x16xf32> to tensor<4x8x16xbf16>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x16xbf16> into tensor<4x8x16xbf16>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct32 = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %pct = arith.truncf %pct32 : tensor<4x8x8xf32> to tensor<4x8x8xbf16>
  %e_dv = tensor.empty() : tensor<4x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dv32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pct, %doc : tensor<4x8x8xbf16>, tensor<4x8x16xbf16>) outs(%f_dv : tensor<4x8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %dv = arith.truncf %dv32 : tensor<4x8x16xf32> to tensor<4x8x16xbf16>
  %e_vct = tensor.empty() : tensor<4x16x8xbf16>
  %vct = linalg.transpose ins(%vc : tensor<4x8x16xbf16>) outs(%e_vct : tensor<4x16x8xbf16>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%doc, %vct : tensor<4x8x16xbf16>, tensor<4x16x8xbf16>) outs(%f_dp : tensor<4x8x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x8x8xf32>
  %dp = arith.truncf %dp32 : tensor<4x8x8xf32> to tensor<4x8x8xbf16>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xbf16> into tensor<2x2x8x8xbf16>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %p : tensor<2x2x8x8xbf16>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a16: bf16, %x: f32, %out: f32):
    %a = arith.extf %a16 : bf16 to f32
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc32 = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %dsc = arith.truncf %dsc32 : tensor<4x8x8xf32> to tensor<4x8x8xbf16>
  %e_qct = tensor.empty() : tensor<4x16x8xbf16>
  %qct = linalg.transpose ins(%qc : tensor<4x8x16xbf16>) outs(%e_qct : tensor<4x16x8xbf16>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x16x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %dkt32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%qct, %dsc : tensor<4x16x8xbf16>, tensor<4x8x8xbf16>) outs(%f_dkt : tensor<4x16x8xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x16x8xf32>
  %dkt = arith.truncf %dkt32 : tensor<4x16x8xf32> to tensor<4x16x8xbf16>
  %e_kct = tensor.empty() : tensor<4x8x16xbf16>
  %kct = linalg.transpose ins(%kc : tensor<4x16x8xbf16>) outs(%e_kct : tensor<4x8x16xbf16>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dq32 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%dsc, %kct : tensor<4x8x8xbf16>, tensor<4x8x16xbf16>) outs(%f_dq : tensor<4x8x16xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xw = arith.extf %x : bf16 to f32
    %yw = arith.extf %y : bf16 to f32
    %m = arith.mulf %xw, %yw : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x8x16xf32>
  %dq = arith.truncf %dq32 : tensor<4x8x16xf32> to tensor<4x8x16xbf16>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xbf16> into tensor<2x2x16x8xbf16>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xbf16> into tensor<2x2x8x16xbf16>
  %e_dks = tensor.empty() : tensor<2x2x16x8xbf16>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x16x8xbf16>) outs(%e_dks : tensor<2x2x16x8xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %w = arith.extf %in : bf16 to f32
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %w, %t : f32
    %n = arith.truncf %m : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<2x2x16x8xbf16>
  %e_dqs = tensor.empty() : tensor<2x2x8x16xbf16>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x16xbf16>) outs(%e_dqs : tensor<2x2x8x16xbf16>) {
  ^bb0(%in: bf16, %out: bf16):
    %w = arith.extf %in : bf16 to f32
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %w, %t : f32
    %n = arith.truncf %m : f32 to bf16
    linalg.yield %n : bf16
  } -> tensor<2x2x8x16xbf16>
  return %o, %dqs, %dks, %dv : tensor<4x8x16xbf16>, tensor<2x2x8x16xbf16>, tensor<2x2x16x8xbf16>, tensor<4x8x16xbf16>
}

// -----

// No mask and no _safe_softmax guard: causal = 0.
// CHECK-LABEL: func.func @torch_plain(
// CHECK: call @[[FWD:__fsdp_attention_fwd_[0-9]+]](
// CHECK: call @__fsdp_attention_bwd_
// CHECK-NOT: linalg.batch_matmul
// CHECK: func.func private @[[FWD]](
// CHECK: %[[NC:.+]] = arith.constant 0 : i32
// CHECK: call @fsdprt_gpu_attention_fwd_f32({{.*}}, %[[NC]])
func.func @torch_plain(%q: tensor<2x2x8x16xf32>, %kt: tensor<2x2x16x8xf32>, %v: tensor<2x2x8x16xf32>, %dout: tensor<2x2x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.5 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xf32>) outs(%e_qs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  %e_ks = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xf32>) outs(%e_ks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%s4 : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %div [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dv = tensor.empty() : tensor<4x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dv = linalg.batch_matmul ins(%pct, %doc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_vct = tensor.empty() : tensor<4x16x8xf32>
  %vct = linalg.transpose ins(%vc : tensor<4x8x16xf32>) outs(%e_vct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp = linalg.batch_matmul ins(%doc, %vct : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %div : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%div, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_qct = tensor.empty() : tensor<4x16x8xf32>
  %qct = linalg.transpose ins(%qc : tensor<4x8x16xf32>) outs(%e_qct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x16x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %dkt = linalg.batch_matmul ins(%qct, %dsc : tensor<4x16x8xf32>, tensor<4x8x8xf32>) outs(%f_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %e_kct = tensor.empty() : tensor<4x8x16xf32>
  %kct = linalg.transpose ins(%kc : tensor<4x16x8xf32>) outs(%e_kct : tensor<4x8x16xf32>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dq = linalg.batch_matmul ins(%dsc, %kct : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xf32> into tensor<2x2x16x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xf32> into tensor<2x2x8x16xf32>
  %e_dks = tensor.empty() : tensor<2x2x16x8xf32>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x16x8xf32>) outs(%e_dks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %e_dqs = tensor.empty() : tensor<2x2x8x16xf32>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x16xf32>) outs(%e_dqs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  return %o, %dqs, %dks, %dv : tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>
}

// -----

// An additive [T, T] mask (a function argument): passed to the kernels
// with strides 0, 0, T, 1.
// CHECK-LABEL: func.func @torch_additive(
// CHECK-SAME: %[[MASK:[^:]+]]: tensor<8x8xf32>
// CHECK: call @[[FWD:__fsdp_attention_fwd_[0-9]+]](%{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]])
// CHECK: call @__fsdp_attention_bwd_{{[0-9]+}}(%{{.*}}, %{{.*}}, %{{.*}}, %[[MASK]],
// CHECK: func.func private @[[FWD]](
// CHECK: call @fsdprt_gpu_attention_fwd_f32(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}, %c0_i64{{[_0-9]*}}, %c0_i64{{[_0-9]*}}, %c8_i64{{[_0-9]*}}, %c1_i64{{[_0-9]*}},
func.func @torch_additive(%q: tensor<2x2x8x16xf32>, %kt: tensor<2x2x16x8xf32>, %v: tensor<2x2x8x16xf32>, %mask: tensor<8x8xf32>, %dout: tensor<2x2x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.5 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xf32>) outs(%e_qs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  %e_ks = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xf32>) outs(%e_ks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xf32>, tensor<8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dv = tensor.empty() : tensor<4x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dv = linalg.batch_matmul ins(%pct, %doc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_vct = tensor.empty() : tensor<4x16x8xf32>
  %vct = linalg.transpose ins(%vc : tensor<4x8x16xf32>) outs(%e_vct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp = linalg.batch_matmul ins(%doc, %vct : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %p : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_qct = tensor.empty() : tensor<4x16x8xf32>
  %qct = linalg.transpose ins(%qc : tensor<4x8x16xf32>) outs(%e_qct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x16x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %dkt = linalg.batch_matmul ins(%qct, %dsc : tensor<4x16x8xf32>, tensor<4x8x8xf32>) outs(%f_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %e_kct = tensor.empty() : tensor<4x8x16xf32>
  %kct = linalg.transpose ins(%kc : tensor<4x16x8xf32>) outs(%e_kct : tensor<4x8x16xf32>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dq = linalg.batch_matmul ins(%dsc, %kct : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xf32> into tensor<2x2x16x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xf32> into tensor<2x2x8x16xf32>
  %e_dks = tensor.empty() : tensor<2x2x16x8xf32>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x16x8xf32>) outs(%e_dks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %e_dqs = tensor.empty() : tensor<2x2x8x16xf32>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x16xf32>) outs(%e_dqs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  return %o, %dqs, %dks, %dv : tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>
}

// -----

// A forward alone.
// CHECK-LABEL: func.func @torch_forward(
// CHECK: call @__fsdp_attention_fwd_
// CHECK-NOT: call @__fsdp_attention_bwd_
// CHECK-NOT: linalg.batch_matmul
// CHECK: return
func.func @torch_forward(%q: tensor<2x2x8x16xf32>, %kt: tensor<2x2x16x8xf32>, %v: tensor<2x2x8x16xf32>) -> (tensor<4x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.5 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xf32>) outs(%e_qs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  %e_ks = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xf32>) outs(%e_ks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_ar = tensor.empty() : tensor<8xi64>
  %ar = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e_ar : tensor<8xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<8xi64>
  %row = tensor.expand_shape %ar [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %col = tensor.expand_shape %ar [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %e_diff = tensor.empty() : tensor<8x8xi64>
  %diff = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%row, %col : tensor<1x8xi64>, tensor<8x1xi64>) outs(%e_diff : tensor<8x8xi64>) {
  ^bb0(%a: i64, %b: i64, %out: i64):
    %s = arith.subi %a, %b : i64
    linalg.yield %s : i64
  } -> tensor<8x8xi64>
  %e_le = tensor.empty() : tensor<8x8xi1>
  %le = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%diff : tensor<8x8xi64>) outs(%e_le : tensor<8x8xi1>) {
  ^bb0(%a: i64, %out: i1):
    %s = arith.cmpi sle, %a, %c0_i64 : i64
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %ones = arith.constant dense<true> : tensor<8x8xi1>
  %e_both = tensor.empty() : tensor<8x8xi1>
  %both = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%le, %ones : tensor<8x8xi1>, tensor<8x8xi1>) outs(%e_both : tensor<8x8xi1>) {
  ^bb0(%a: i1, %b: i1, %out: i1):
    %s = arith.andi %a, %b : i1
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %s0 = arith.constant dense<0.000000e+00> : tensor<f32>
  %sninf = arith.constant dense<0xFF800000> : tensor<f32>
  %e_mask = tensor.empty() : tensor<8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%both, %s0, %sninf : tensor<8x8xi1>, tensor<f32>, tensor<f32>) outs(%e_mask : tensor<8x8xf32>) {
  ^bb0(%a: i1, %x: f32, %y: f32, %out: f32):
    %s = arith.select %a, %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xf32>, tensor<8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  return %o : tensor<4x8x16xf32>
}

// -----

// Near-miss: head dim 8 has no kernel: unfused.
// CHECK-LABEL: func.func @torch_head_dim_8(
// CHECK-NOT: call @__fsdp_attention
// CHECK: linalg.batch_matmul
func.func @torch_head_dim_8(%q: tensor<2x2x8x8xf32>, %kt: tensor<2x2x8x8xf32>, %v: tensor<2x2x8x8xf32>, %dout: tensor<2x2x8x8xf32>) -> (tensor<4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<4x8x8xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.59460355750136051 : f64
  %dc = arith.constant 0.59460355750136051 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x8xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x8xf32>) outs(%e_qs : tensor<2x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x8xf32>
  %e_ks = tensor.empty() : tensor<2x2x8x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x8x8xf32>) outs(%e_ks : tensor<2x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_ar = tensor.empty() : tensor<8xi64>
  %ar = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e_ar : tensor<8xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<8xi64>
  %row = tensor.expand_shape %ar [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %col = tensor.expand_shape %ar [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %e_diff = tensor.empty() : tensor<8x8xi64>
  %diff = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%row, %col : tensor<1x8xi64>, tensor<8x1xi64>) outs(%e_diff : tensor<8x8xi64>) {
  ^bb0(%a: i64, %b: i64, %out: i64):
    %s = arith.subi %a, %b : i64
    linalg.yield %s : i64
  } -> tensor<8x8xi64>
  %e_le = tensor.empty() : tensor<8x8xi1>
  %le = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%diff : tensor<8x8xi64>) outs(%e_le : tensor<8x8xi1>) {
  ^bb0(%a: i64, %out: i1):
    %s = arith.cmpi sle, %a, %c0_i64 : i64
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %ones = arith.constant dense<true> : tensor<8x8xi1>
  %e_both = tensor.empty() : tensor<8x8xi1>
  %both = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%le, %ones : tensor<8x8xi1>, tensor<8x8xi1>) outs(%e_both : tensor<8x8xi1>) {
  ^bb0(%a: i1, %b: i1, %out: i1):
    %s = arith.andi %a, %b : i1
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %s0 = arith.constant dense<0.000000e+00> : tensor<f32>
  %sninf = arith.constant dense<0xFF800000> : tensor<f32>
  %e_mask = tensor.empty() : tensor<8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%both, %s0, %sninf : tensor<8x8xi1>, tensor<f32>, tensor<f32>) outs(%e_mask : tensor<8x8xf32>) {
  ^bb0(%a: i1, %x: f32, %y: f32, %out: f32):
    %s = arith.select %a, %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xf32>, tensor<8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_o = tensor.empty() : tensor<4x8x8xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%f_o : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dv = tensor.empty() : tensor<4x8x8xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dv = linalg.batch_matmul ins(%pct, %doc : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%f_dv : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %e_vct = tensor.empty() : tensor<4x8x8xf32>
  %vct = linalg.transpose ins(%vc : tensor<4x8x8xf32>) outs(%e_vct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp = linalg.batch_matmul ins(%doc, %vct : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%f_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %p : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_qct = tensor.empty() : tensor<4x8x8xf32>
  %qct = linalg.transpose ins(%qc : tensor<4x8x8xf32>) outs(%e_qct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x8x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dkt = linalg.batch_matmul ins(%qct, %dsc : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%f_dkt : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %e_kct = tensor.empty() : tensor<4x8x8xf32>
  %kct = linalg.transpose ins(%kc : tensor<4x8x8xf32>) outs(%e_kct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x8xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dq = linalg.batch_matmul ins(%dsc, %kct : tensor<4x8x8xf32>, tensor<4x8x8xf32>) outs(%f_dq : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_dks = tensor.empty() : tensor<2x2x8x8xf32>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x8x8xf32>) outs(%e_dks : tensor<2x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x8xf32>
  %e_dqs = tensor.empty() : tensor<2x2x8x8xf32>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x8xf32>) outs(%e_dqs : tensor<2x2x8x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x8xf32>
  return %o, %dqs, %dks, %dv : tensor<4x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<4x8x8xf32>
}

// -----

// Near-miss: the backward scales dQ and dK by another factor: unfused.
// CHECK-LABEL: func.func @torch_backward_scale(
// CHECK-NOT: call @__fsdp_attention
// CHECK: linalg.batch_matmul
func.func @torch_backward_scale(%q: tensor<2x2x8x16xf32>, %kt: tensor<2x2x16x8xf32>, %v: tensor<2x2x8x16xf32>, %dout: tensor<2x2x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.25 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xf32>) outs(%e_qs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  %e_ks = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xf32>) outs(%e_ks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_ar = tensor.empty() : tensor<8xi64>
  %ar = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e_ar : tensor<8xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<8xi64>
  %row = tensor.expand_shape %ar [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %col = tensor.expand_shape %ar [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %e_diff = tensor.empty() : tensor<8x8xi64>
  %diff = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%row, %col : tensor<1x8xi64>, tensor<8x1xi64>) outs(%e_diff : tensor<8x8xi64>) {
  ^bb0(%a: i64, %b: i64, %out: i64):
    %s = arith.subi %a, %b : i64
    linalg.yield %s : i64
  } -> tensor<8x8xi64>
  %e_le = tensor.empty() : tensor<8x8xi1>
  %le = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%diff : tensor<8x8xi64>) outs(%e_le : tensor<8x8xi1>) {
  ^bb0(%a: i64, %out: i1):
    %s = arith.cmpi sle, %a, %c0_i64 : i64
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %ones = arith.constant dense<true> : tensor<8x8xi1>
  %e_both = tensor.empty() : tensor<8x8xi1>
  %both = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%le, %ones : tensor<8x8xi1>, tensor<8x8xi1>) outs(%e_both : tensor<8x8xi1>) {
  ^bb0(%a: i1, %b: i1, %out: i1):
    %s = arith.andi %a, %b : i1
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %s0 = arith.constant dense<0.000000e+00> : tensor<f32>
  %sninf = arith.constant dense<0xFF800000> : tensor<f32>
  %e_mask = tensor.empty() : tensor<8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%both, %s0, %sninf : tensor<8x8xi1>, tensor<f32>, tensor<f32>) outs(%e_mask : tensor<8x8xf32>) {
  ^bb0(%a: i1, %x: f32, %y: f32, %out: f32):
    %s = arith.select %a, %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xf32>, tensor<8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dv = tensor.empty() : tensor<4x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dv = linalg.batch_matmul ins(%pct, %doc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_vct = tensor.empty() : tensor<4x16x8xf32>
  %vct = linalg.transpose ins(%vc : tensor<4x8x16xf32>) outs(%e_vct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp = linalg.batch_matmul ins(%doc, %vct : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %p : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_qct = tensor.empty() : tensor<4x16x8xf32>
  %qct = linalg.transpose ins(%qc : tensor<4x8x16xf32>) outs(%e_qct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x16x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %dkt = linalg.batch_matmul ins(%qct, %dsc : tensor<4x16x8xf32>, tensor<4x8x8xf32>) outs(%f_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %e_kct = tensor.empty() : tensor<4x8x16xf32>
  %kct = linalg.transpose ins(%kc : tensor<4x16x8xf32>) outs(%e_kct : tensor<4x8x16xf32>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dq = linalg.batch_matmul ins(%dsc, %kct : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xf32> into tensor<2x2x16x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xf32> into tensor<2x2x8x16xf32>
  %e_dks = tensor.empty() : tensor<2x2x16x8xf32>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x16x8xf32>) outs(%e_dks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %e_dqs = tensor.empty() : tensor<2x2x8x16xf32>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x16xf32>) outs(%e_dqs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  return %o, %dqs, %dks, %dv : tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>
}

// -----

// Near-miss: P is also a result: unfused.
// CHECK-LABEL: func.func @torch_p_escapes(
// CHECK-NOT: call @__fsdp_attention
// CHECK: linalg.batch_matmul
func.func @torch_p_escapes(%q: tensor<2x2x8x16xf32>, %kt: tensor<2x2x16x8xf32>, %v: tensor<2x2x8x16xf32>, %dout: tensor<2x2x8x16xf32>) -> (tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>, tensor<2x2x8x8xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %ninf64 = arith.constant 0xFFF0000000000000 : f64
  %c = arith.constant 0.5 : f64
  %dc = arith.constant 0.5 : f64
  %true = arith.constant true
  %c0_i64 = arith.constant 0 : i64
  %zeros = arith.constant dense<0.000000e+00> : tensor<2x2x8x8xf32>
  %e_qs = tensor.empty() : tensor<2x2x8x16xf32>
  %qs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%q : tensor<2x2x8x16xf32>) outs(%e_qs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  %e_ks = tensor.empty() : tensor<2x2x16x8xf32>
  %ks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%kt : tensor<2x2x16x8xf32>) outs(%e_ks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %c : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %qc = tensor.collapse_shape %qs [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %kc = tensor.collapse_shape %ks [[0, 1], [2], [3]] : tensor<2x2x16x8xf32> into tensor<4x16x8xf32>
  %e_sc = tensor.empty() : tensor<4x8x8xf32>
  %f_sc = linalg.fill ins(%zero : f32) outs(%e_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %sc = linalg.batch_matmul ins(%qc, %kc : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_sc : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s4 = tensor.expand_shape %sc [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_ar = tensor.empty() : tensor<8xi64>
  %ar = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%e_ar : tensor<8xi64>) {
  ^bb0(%out: i64):
    %i = linalg.index 0 : index
    %ic = arith.index_cast %i : index to i64
    linalg.yield %ic : i64
  } -> tensor<8xi64>
  %row = tensor.expand_shape %ar [[0, 1]] output_shape [1, 8] : tensor<8xi64> into tensor<1x8xi64>
  %col = tensor.expand_shape %ar [[0, 1]] output_shape [8, 1] : tensor<8xi64> into tensor<8x1xi64>
  %e_diff = tensor.empty() : tensor<8x8xi64>
  %diff = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (0, d1)>, affine_map<(d0, d1) -> (d0, 0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%row, %col : tensor<1x8xi64>, tensor<8x1xi64>) outs(%e_diff : tensor<8x8xi64>) {
  ^bb0(%a: i64, %b: i64, %out: i64):
    %s = arith.subi %a, %b : i64
    linalg.yield %s : i64
  } -> tensor<8x8xi64>
  %e_le = tensor.empty() : tensor<8x8xi1>
  %le = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%diff : tensor<8x8xi64>) outs(%e_le : tensor<8x8xi1>) {
  ^bb0(%a: i64, %out: i1):
    %s = arith.cmpi sle, %a, %c0_i64 : i64
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %ones = arith.constant dense<true> : tensor<8x8xi1>
  %e_both = tensor.empty() : tensor<8x8xi1>
  %both = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%le, %ones : tensor<8x8xi1>, tensor<8x8xi1>) outs(%e_both : tensor<8x8xi1>) {
  ^bb0(%a: i1, %b: i1, %out: i1):
    %s = arith.andi %a, %b : i1
    linalg.yield %s : i1
  } -> tensor<8x8xi1>
  %s0 = arith.constant dense<0.000000e+00> : tensor<f32>
  %sninf = arith.constant dense<0xFF800000> : tensor<f32>
  %e_mask = tensor.empty() : tensor<8x8xf32>
  %mask = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> ()>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%both, %s0, %sninf : tensor<8x8xi1>, tensor<f32>, tensor<f32>) outs(%e_mask : tensor<8x8xf32>) {
  ^bb0(%a: i1, %x: f32, %y: f32, %out: f32):
    %s = arith.select %a, %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<8x8xf32>
  %e_masked = tensor.empty() : tensor<2x2x8x8xf32>
  %masked = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s4, %mask : tensor<2x2x8x8xf32>, tensor<8x8xf32>) outs(%e_masked : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.addf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_mi = tensor.empty() : tensor<2x2x8xi64>
  %f_mi = linalg.fill ins(%c0_i64 : i64) outs(%e_mi : tensor<2x2x8xi64>) -> tensor<2x2x8xi64>
  %e_mx = tensor.empty() : tensor<2x2x8xf32>
  %f_mx = linalg.fill ins(%ninf : f32) outs(%e_mx : tensor<2x2x8xf32>) -> tensor<2x2x8xf32>
  %max:2 = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%f_mx, %f_mi : tensor<2x2x8xf32>, tensor<2x2x8xi64>) {
  ^bb0(%in: f32, %out: f32, %idx: i64):
    %i = linalg.index 3 : index
    %ic = arith.index_cast %i : index to i64
    %m = arith.maximumf %in, %out : f32
    %g = arith.cmpf ogt, %in, %out : f32
    %s = arith.select %g, %ic, %idx : i64
    linalg.yield %m, %s : f32, i64
  } -> (tensor<2x2x8xf32>, tensor<2x2x8xi64>)
  %mx4 = tensor.expand_shape %max#0 [[0], [1], [2, 3]] output_shape [2, 2, 8, 1] : tensor<2x2x8xf32> into tensor<2x2x8x1xf32>
  %e_sub = tensor.empty() : tensor<2x2x8x8xf32>
  %sub = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked, %mx4 : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_sub : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %m: f32, %out: f32):
    %s = arith.subf %a, %m : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_exp = tensor.empty() : tensor<2x2x8x8xf32>
  %exp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%sub : tensor<2x2x8x8xf32>) outs(%e_exp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = math.exp %a : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x8xf32>
  %e_sum = tensor.empty() : tensor<2x2x8x1xf32>
  %f_sum = linalg.fill ins(%zero : f32) outs(%e_sum : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %sum = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%exp : tensor<2x2x8x8xf32>) outs(%f_sum : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_div = tensor.empty() : tensor<2x2x8x8xf32>
  %div = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%exp, %sum : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_div : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %s: f32, %out: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_isninf = tensor.empty() : tensor<2x2x8x8xi1>
  %isninf = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%masked : tensor<2x2x8x8xf32>) outs(%e_isninf : tensor<2x2x8x8xi1>) {
  ^bb0(%a: f32, %out: i1):
    %x = arith.extf %a : f32 to f64
    %r = arith.cmpf oeq, %x, %ninf64 : f64
    linalg.yield %r : i1
  } -> tensor<2x2x8x8xi1>
  %e_all = tensor.empty() : tensor<2x2x8x1xi1>
  %f_all = linalg.fill ins(%true : i1) outs(%e_all : tensor<2x2x8x1xi1>) -> tensor<2x2x8x1xi1>
  %all = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%isninf : tensor<2x2x8x8xi1>) outs(%f_all : tensor<2x2x8x1xi1>) {
  ^bb0(%a: i1, %out: i1):
    %r = arith.andi %a, %out : i1
    linalg.yield %r : i1
  } -> tensor<2x2x8x1xi1>
  %e_p = tensor.empty() : tensor<2x2x8x8xf32>
  %p = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%all, %zeros, %div : tensor<2x2x8x1xi1>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_p : tensor<2x2x8x8xf32>) {
  ^bb0(%a: i1, %z: f32, %x: f32, %out: f32):
    %r = arith.select %a, %z, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %pc = tensor.collapse_shape %p [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %vc = tensor.collapse_shape %v [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_o = tensor.empty() : tensor<4x8x16xf32>
  %f_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %o = linalg.batch_matmul ins(%pc, %vc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_o : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %doc = tensor.collapse_shape %dout [[0, 1], [2], [3]] : tensor<2x2x8x16xf32> into tensor<4x8x16xf32>
  %e_pct = tensor.empty() : tensor<4x8x8xf32>
  %pct = linalg.transpose ins(%pc : tensor<4x8x8xf32>) outs(%e_pct : tensor<4x8x8xf32>) permutation = [0, 2, 1]
  %e_dv = tensor.empty() : tensor<4x8x16xf32>
  %f_dv = linalg.fill ins(%zero : f32) outs(%e_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dv = linalg.batch_matmul ins(%pct, %doc : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dv : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %e_vct = tensor.empty() : tensor<4x16x8xf32>
  %vct = linalg.transpose ins(%vc : tensor<4x8x16xf32>) outs(%e_vct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dp = tensor.empty() : tensor<4x8x8xf32>
  %f_dp = linalg.fill ins(%zero : f32) outs(%e_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp = linalg.batch_matmul ins(%doc, %vct : tensor<4x8x16xf32>, tensor<4x16x8xf32>) outs(%f_dp : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %dp4 = tensor.expand_shape %dp [[0, 1], [2], [3]] output_shape [2, 2, 8, 8] : tensor<4x8x8xf32> into tensor<2x2x8x8xf32>
  %e_pdp = tensor.empty() : tensor<2x2x8x8xf32>
  %pdp = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dp4, %p : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_pdp : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_rs = tensor.empty() : tensor<2x2x8x1xf32>
  %f_rs = linalg.fill ins(%zero : f32) outs(%e_rs : tensor<2x2x8x1xf32>) -> tensor<2x2x8x1xf32>
  %rs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%pdp : tensor<2x2x8x8xf32>) outs(%f_rs : tensor<2x2x8x1xf32>) {
  ^bb0(%a: f32, %out: f32):
    %s = arith.addf %a, %out : f32
    linalg.yield %s : f32
  } -> tensor<2x2x8x1xf32>
  %e_prs = tensor.empty() : tensor<2x2x8x8xf32>
  %prs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, 0)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p, %rs : tensor<2x2x8x8xf32>, tensor<2x2x8x1xf32>) outs(%e_prs : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.mulf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %e_ds = tensor.empty() : tensor<2x2x8x8xf32>
  %ds = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%pdp, %prs : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>) outs(%e_ds : tensor<2x2x8x8xf32>) {
  ^bb0(%a: f32, %x: f32, %out: f32):
    %r = arith.subf %a, %x : f32
    linalg.yield %r : f32
  } -> tensor<2x2x8x8xf32>
  %dsc = tensor.collapse_shape %ds [[0, 1], [2], [3]] : tensor<2x2x8x8xf32> into tensor<4x8x8xf32>
  %e_qct = tensor.empty() : tensor<4x16x8xf32>
  %qct = linalg.transpose ins(%qc : tensor<4x8x16xf32>) outs(%e_qct : tensor<4x16x8xf32>) permutation = [0, 2, 1]
  %e_dkt = tensor.empty() : tensor<4x16x8xf32>
  %f_dkt = linalg.fill ins(%zero : f32) outs(%e_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %dkt = linalg.batch_matmul ins(%qct, %dsc : tensor<4x16x8xf32>, tensor<4x8x8xf32>) outs(%f_dkt : tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  %e_kct = tensor.empty() : tensor<4x8x16xf32>
  %kct = linalg.transpose ins(%kc : tensor<4x16x8xf32>) outs(%e_kct : tensor<4x8x16xf32>) permutation = [0, 2, 1]
  %e_dq = tensor.empty() : tensor<4x8x16xf32>
  %f_dq = linalg.fill ins(%zero : f32) outs(%e_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dq = linalg.batch_matmul ins(%dsc, %kct : tensor<4x8x8xf32>, tensor<4x8x16xf32>) outs(%f_dq : tensor<4x8x16xf32>) -> tensor<4x8x16xf32>
  %dkt4 = tensor.expand_shape %dkt [[0, 1], [2], [3]] output_shape [2, 2, 16, 8] : tensor<4x16x8xf32> into tensor<2x2x16x8xf32>
  %dq4 = tensor.expand_shape %dq [[0, 1], [2], [3]] output_shape [2, 2, 8, 16] : tensor<4x8x16xf32> into tensor<2x2x8x16xf32>
  %e_dks = tensor.empty() : tensor<2x2x16x8xf32>
  %dks = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dkt4 : tensor<2x2x16x8xf32>) outs(%e_dks : tensor<2x2x16x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x16x8xf32>
  %e_dqs = tensor.empty() : tensor<2x2x8x16xf32>
  %dqs = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%dq4 : tensor<2x2x8x16xf32>) outs(%e_dqs : tensor<2x2x8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %t = arith.truncf %dc : f64 to f32
    %m = arith.mulf %in, %t : f32
    linalg.yield %m : f32
  } -> tensor<2x2x8x16xf32>
  return %o, %dqs, %dks, %dv, %p : tensor<4x8x16xf32>, tensor<2x2x8x16xf32>, tensor<2x2x16x8xf32>, tensor<4x8x16xf32>, tensor<2x2x8x8xf32>
}
