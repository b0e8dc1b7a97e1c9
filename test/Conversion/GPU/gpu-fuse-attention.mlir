// RUN: fsdp-opt %s -split-input-file --fsdp-gpu-fuse-attention | FileCheck %s

// The generator's causal attention (fsdp_mlir.gen transformer --attention),
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
