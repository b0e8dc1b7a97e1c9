// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer="momentum=0.9 dampening=0.1 weight-decay=0.01" | FileCheck %s --check-prefix=MOM
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer="momentum=0.9 nesterov=true" | FileCheck %s --check-prefix=NEST
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer="optimizer=adamw betas=0.8,0.95 eps=1e-6 weight-decay=0.1" | FileCheck %s --check-prefix=ADAMW
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer="optimizer=adamw max-grad-norm=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer="optimizer=adamw max-grad-norm=1.0 device-scalars=true" | FileCheck %s --check-prefix=DEV
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition --fsdp-optimizer="keep-grads=true" | FileCheck %s --check-prefix=KEEP

// Two parameters of an HSDP step: a sharded weight and a bias replicated on
// every axis (DDP), one data argument.
fsdp.mesh @mesh [replicate = 2, shard = 4]
func.func @step(%w: tensor<10x4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w", fsdp.unit = "l0"},
                %b: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "b"},
                %x: tensor<2x4xf32> {fsdp.name = "x"})
    -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"},
        tensor<10x4xf32> {fsdp.grad_of = 0 : i64, fsdp.name = "grad.w"},
        tensor<4xf32> {fsdp.grad_of = 1 : i64, fsdp.name = "grad.b"}) {
  %loss = "model.forward"(%x, %w, %b) : (tensor<2x4xf32>, tensor<10x4xf32>, tensor<4xf32>) -> tensor<f32>
  %dw = "model.backward_w"(%x, %w) : (tensor<2x4xf32>, tensor<10x4xf32>) -> tensor<10x4xf32>
  %db = "model.backward_b"(%x, %b) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %loss, %dw, %db : tensor<f32>, tensor<10x4xf32>, tensor<4xf32>
}

// Plain sgd. lr and step are appended, replicated; no state. The gradients
// are replaced by the updated parameters (same slot, layout and name), and
// the step count is fed back.
// SGD-LABEL: func.func @step(
// SGD-SAME: %arg0: tensor<3x4xf32> {fsdp.global_type = tensor<10x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w", fsdp.unit = "l0"}
// SGD-SAME: %arg3: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "lr", fsdp.optim = "lr"}
// SGD-SAME: %arg4: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "step", fsdp.optim = "step"})
// SGD-SAME: -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"},
// SGD-SAME: tensor<3x4xf32> {fsdp.global_type = tensor<10x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w", fsdp.update_of = 0 : i64},
// SGD-SAME: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "b", fsdp.update_of = 1 : i64},
// SGD-SAME: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "step", fsdp.update_of = 4 : i64})
// SGD: %[[GW:.*]] = fsdp.grad_reduce %{{.*}} : tensor<10x4xf32> -> tensor<3x4xf32>
// SGD: %[[GB:.*]] = fsdp.grad_reduce %{{.*}} : tensor<4xf32> -> tensor<4xf32>
// SGD: %[[LR:.*]] = tensor.extract %arg3[] : tensor<f32>
// SGD: %[[STEP:.*]] = tensor.extract %arg4[] : tensor<f32>
// SGD: %[[NEXT:.*]] = arith.addf %[[STEP]], %{{.*}} : f32
// SGD: %[[LR64:.*]] = arith.extf %[[LR]] : f32 to f64
// SGD: %[[NEG:.*]] = arith.negf %[[LR64]] : f64
// SGD: %[[NEGLR:.*]] = arith.truncf %[[NEG]] : f64 to f32
// SGD: %[[W:.*]] = linalg.generic {{.*}} ins(%arg0, %[[GW]] : tensor<3x4xf32>, tensor<3x4xf32>)
// SGD-NEXT: ^bb0(%[[P:[^:]+]]: f32, %[[G:[^:]+]]: f32, %{{.*}}: f32):
// SGD-NEXT: %[[D:.*]] = arith.mulf %[[NEGLR]], %[[G]] : f32
// SGD-NEXT: %[[U:.*]] = arith.addf %[[P]], %[[D]] : f32
// SGD-NEXT: linalg.yield %[[U]] : f32
// SGD: %[[B:.*]] = linalg.generic {{.*}} ins(%arg1, %[[GB]] : tensor<4xf32>, tensor<4xf32>)
// SGD: %[[S:.*]] = tensor.from_elements %[[NEXT]] : tensor<f32>
// SGD-NEXT: return %{{.*}}, %[[W]], %[[B]], %[[S]] : tensor<f32>, tensor<3x4xf32>, tensor<4xf32>, tensor<f32>

// Momentum: one buffer per parameter with its slot type, layout, global
// type and unit; buf = grad on the first step (step == 0), else
// momentum * buf + (1 - dampening) * grad; weight decay adds wd * p to the
// gradient first.
// MOM-LABEL: func.func @step(
// MOM-SAME: %arg5: tensor<3x4xf32> {fsdp.global_type = tensor<10x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "momentum_buffer.w", fsdp.state_of = 0 : i64, fsdp.unit = "l0"}
// MOM-SAME: %arg6: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "momentum_buffer.b", fsdp.state_of = 1 : i64})
// MOM-SAME: fsdp.name = "w", fsdp.update_of = 0 : i64}
// MOM-SAME: fsdp.name = "b", fsdp.update_of = 1 : i64}
// MOM-SAME: fsdp.name = "momentum_buffer.w", fsdp.update_of = 5 : i64}
// MOM-SAME: fsdp.name = "momentum_buffer.b", fsdp.update_of = 6 : i64}
// MOM-SAME: fsdp.name = "step", fsdp.update_of = 4 : i64})
// MOM: %[[STEP:.*]] = tensor.extract %arg4[] : tensor<f32>
// MOM: %[[FIRST:.*]] = arith.cmpf oeq, %[[STEP]], %{{.*}} : f32
// MOM: linalg.generic {{.*}} ins(%arg0, %{{.*}}, %arg5 : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) outs(%{{.*}}, %{{.*}} : tensor<3x4xf32>, tensor<3x4xf32>)
// MOM-NEXT: ^bb0(%[[P:[^:]+]]: f32, %[[G:[^:]+]]: f32, %[[BUF:[^:]+]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// MOM-NEXT: %[[WD:.*]] = arith.constant 0.00999999977 : f32
// MOM-NEXT: %[[PWD:.*]] = arith.mulf %[[WD]], %[[P]] : f32
// MOM-NEXT: %[[G1:.*]] = arith.addf %[[G]], %[[PWD]] : f32
// MOM-NEXT: %[[DAMP:.*]] = arith.constant 0.899999976 : f32
// MOM-NEXT: %[[DG:.*]] = arith.mulf %[[DAMP]], %[[G1]] : f32
// MOM-NEXT: %[[M:.*]] = arith.constant 0.899999976 : f32
// MOM-NEXT: %[[MB:.*]] = arith.mulf %[[BUF]], %[[M]] : f32
// MOM-NEXT: %[[NB:.*]] = arith.addf %[[MB]], %[[DG]] : f32
// MOM-NEXT: %[[B:.*]] = arith.select %[[FIRST]], %[[G1]], %[[NB]] : f32
// MOM-NEXT: %[[D:.*]] = arith.mulf %{{.*}}, %[[B]] : f32
// MOM-NEXT: %[[U:.*]] = arith.addf %[[P]], %[[D]] : f32
// MOM-NEXT: linalg.yield %[[U]], %[[B]] : f32, f32

// Nesterov: the step uses grad + momentum * buf.
// NEST-LABEL: func.func @step(
// NEST: ^bb0(%[[P:[^:]+]]: f32, %[[G:[^:]+]]: f32, %[[BUF:[^:]+]]: f32, %{{.*}}: f32, %{{.*}}: f32):
// NEST: %[[B:.*]] = arith.select %{{.*}}, %[[G]], %{{.*}} : f32
// NEST-NEXT: %[[M:.*]] = arith.constant 0.899999976 : f32
// NEST-NEXT: %[[MB:.*]] = arith.mulf %[[M]], %[[B]] : f32
// NEST-NEXT: %[[NG:.*]] = arith.addf %[[G]], %[[MB]] : f32
// NEST-NEXT: %[[D:.*]] = arith.mulf %{{.*}}, %[[NG]] : f32
// NEST-NEXT: %[[U:.*]] = arith.addf %[[P]], %[[D]] : f32
// NEST-NEXT: linalg.yield %[[U]], %[[B]] : f32, f32

// AdamW: exp_avg and exp_avg_sq per parameter (in parameter order); the
// bias corrections and step size in f64 from t = step + 1; decoupled weight
// decay p * (1 - lr * wd); lerp for the first moment.
// ADAMW-LABEL: func.func @step(
// ADAMW-SAME: %arg5: tensor<3x4xf32> {{{.*}}fsdp.name = "exp_avg.w", fsdp.state_of = 0 : i64, fsdp.unit = "l0"}
// ADAMW-SAME: %arg6: tensor<3x4xf32> {{{.*}}fsdp.name = "exp_avg_sq.w", fsdp.state_of = 0 : i64, fsdp.unit = "l0"}
// ADAMW-SAME: %arg7: tensor<4xf32> {{{.*}}fsdp.name = "exp_avg.b", fsdp.state_of = 1 : i64}
// ADAMW-SAME: %arg8: tensor<4xf32> {{{.*}}fsdp.name = "exp_avg_sq.b", fsdp.state_of = 1 : i64})
// ADAMW-SAME: fsdp.name = "exp_avg.w", fsdp.update_of = 5 : i64}
// ADAMW-SAME: fsdp.name = "exp_avg_sq.w", fsdp.update_of = 6 : i64}
// ADAMW-SAME: fsdp.name = "exp_avg.b", fsdp.update_of = 7 : i64}
// ADAMW-SAME: fsdp.name = "exp_avg_sq.b", fsdp.update_of = 8 : i64}
// ADAMW: %[[NEXT:.*]] = arith.addf
// ADAMW: %[[T:.*]] = arith.extf %[[NEXT]] : f32 to f64
// ADAMW: %[[B1T:.*]] = math.powf %{{.*}}, %[[T]] : f64
// ADAMW: %[[BC1:.*]] = arith.subf %{{.*}}, %[[B1T]] : f64
// ADAMW: %[[B2T:.*]] = math.powf %{{.*}}, %[[T]] : f64
// ADAMW: %[[BC2:.*]] = arith.subf %{{.*}}, %[[B2T]] : f64
// ADAMW: arith.divf %{{.*}}, %[[BC1]] : f64
// ADAMW: math.sqrt %[[BC2]] : f64
// ADAMW: linalg.generic {{.*}} ins(%arg0, %{{.*}}, %arg5, %arg6 : {{.*}}) outs(%{{.*}}, %{{.*}}, %{{.*}} : {{.*}})
// ADAMW-NEXT: ^bb0(%[[P:[^:]+]]: f32, %[[G:[^:]+]]: f32, %[[M:[^:]+]]: f32, %[[V:[^:]+]]: f32,
// ADAMW-NEXT: %[[PD:.*]] = arith.mulf %[[P]], %{{.*}} : f32
// ADAMW-NEXT: %[[DIFF:.*]] = arith.subf %[[G]], %[[M]] : f32
// ADAMW-NEXT: %[[W:.*]] = arith.constant 2.000000e-01 : f32
// ADAMW-NEXT: %[[WD:.*]] = arith.mulf %[[W]], %[[DIFF]] : f32
// ADAMW-NEXT: %[[M1:.*]] = arith.addf %[[M]], %[[WD]] : f32
// ADAMW-NEXT: %[[B2:.*]] = arith.constant 0.949999988 : f32
// ADAMW-NEXT: %[[VB:.*]] = arith.mulf %[[V]], %[[B2]] : f32
// ADAMW-NEXT: arith.constant 5.000000e-02 : f32
// ADAMW-NEXT: arith.mulf
// ADAMW-NEXT: %[[GG:.*]] = arith.mulf %{{.*}}, %[[G]] : f32
// ADAMW-NEXT: %[[V1:.*]] = arith.addf %[[VB]], %[[GG]] : f32
// ADAMW-NEXT: %[[SQ:.*]] = math.sqrt %[[V1]] : f32
// ADAMW-NEXT: %[[DN:.*]] = arith.divf %[[SQ]], %{{.*}} : f32
// ADAMW-NEXT: %[[EPS:.*]] = arith.constant 9.99999997E-7 : f32
// ADAMW-NEXT: %[[DEN:.*]] = arith.addf %[[DN]], %[[EPS]] : f32
// ADAMW-NEXT: %[[NUM:.*]] = arith.mulf %{{.*}}, %[[M1]] : f32
// ADAMW-NEXT: %[[Q:.*]] = arith.divf %[[NUM]], %[[DEN]] : f32
// ADAMW-NEXT: %[[U:.*]] = arith.addf %[[PD]], %[[Q]] : f32
// ADAMW-NEXT: linalg.yield %[[U]], %[[M1]], %[[V1]] : f32, f32, f32

// Clipping: the sharded weight's sum of squares is all-reduced over the
// shard axis only (the replicate axis already agrees); the replicated bias
// is held whole by every rank and added after the all-reduce, once.
// CLIP-LABEL: func.func @step(
// CLIP-SAME: tensor<f32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, replicate]>, fsdp.name = "grad_norm"})
// CLIP: %[[GW:.*]] = fsdp.grad_reduce {{.*}} -> tensor<3x4xf32>
// CLIP: %[[GB:.*]] = fsdp.grad_reduce {{.*}} -> tensor<4xf32>
// CLIP: linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]} ins(%[[GW]] : tensor<3x4xf32>) outs(%{{.*}} : tensor<f64>)
// CLIP: %[[SSW:.*]] = tensor.extract %{{.*}}[] : tensor<f64>
// CLIP: linalg.generic {{.*}} iterator_types = ["reduction"]} ins(%[[GB]] : tensor<4xf32>) outs(%{{.*}} : tensor<f64>)
// CLIP: %[[SSB:.*]] = tensor.extract %{{.*}}[] : tensor<f64>
// CLIP: %[[BUF:.*]] = tensor.from_elements %[[SSW]] : tensor<1xf64>
// CLIP: %[[RED:.*]] = fsdp.all_reduce %[[BUF]] over @mesh ["shard"] sum : tensor<1xf64> -> tensor<1xf64>
// CLIP-NOT: fsdp.all_reduce
// CLIP: %[[SW:.*]] = tensor.extract %[[RED]][%{{.*}}] : tensor<1xf64>
// CLIP: %[[TOT:.*]] = arith.addf %[[SW]], %[[SSB]] : f64
// CLIP: %[[ROOT:.*]] = math.sqrt %[[TOT]] : f64
// CLIP: %[[NORM:.*]] = arith.truncf %[[ROOT]] : f64 to f32
// CLIP: %[[DEN:.*]] = arith.addf %[[NORM]], %{{.*}} : f32
// CLIP: %[[Q:.*]] = arith.divf %{{.*}}, %[[DEN]] : f32
// CLIP: %[[COEF:.*]] = arith.minimumf %[[Q]], %{{.*}} : f32
// CLIP: ^bb0(%{{[^:]+}}: f32, %[[G:[^:]+]]: f32,
// CLIP-NEXT: arith.mulf %[[G]], %[[COEF]] : f32
// CLIP: %[[N:.*]] = tensor.from_elements %[[NORM]] : tensor<f32>
// CLIP-NEXT: return {{.*}}, %[[N]] :

// device-scalars: each gradient's sum of squares is a tensor<1xf64> of its
// own (from zero), marked for a multi-tensor launch; the sharded weight's
// sum is all-reduced over "shard", and the norm's op adds the sets in the
// host form's order. Every update is marked too.
// DEV-LABEL: func.func @step(
// DEV: %[[GW:.*]] = fsdp.grad_reduce {{.*}} -> tensor<3x4xf32>
// DEV: %[[GB:.*]] = fsdp.grad_reduce {{.*}} -> tensor<4xf32>
// DEV: %[[SW:.*]] = linalg.generic {{.*}} ins(%[[GW]] : tensor<3x4xf32>) outs(%{{.*}} : tensor<1xf64>) attrs =  {fsdp.multi_tensor = "sum_of_squares"}
// DEV: %[[SB:.*]] = linalg.generic {{.*}} ins(%[[GB]] : tensor<4xf32>) outs(%{{.*}} : tensor<1xf64>) attrs =  {fsdp.multi_tensor = "sum_of_squares"}
// DEV: %[[RED:.*]] = fsdp.all_reduce %[[SW]] over @mesh ["shard"] sum : tensor<1xf64> -> tensor<1xf64>
// DEV-NOT: fsdp.all_reduce
// DEV: linalg.generic {{.*}} ins(%[[RED]], %[[SB]] : tensor<1xf64>, tensor<1xf64>)
// DEV-NEXT: ^bb0(%[[A:[^:]+]]: f64, %[[B:[^:]+]]: f64,
// DEV-NEXT: %[[T:.*]] = arith.addf %[[A]], %[[B]] : f64
// DEV-NEXT: math.sqrt %[[T]] : f64
// DEV: linalg.generic {{.*}} ins(%arg0, %[[GW]], {{.*}}) outs({{.*}}) attrs =  {fsdp.multi_tensor = "adamw"}
// DEV: linalg.generic {{.*}} ins(%arg1, %[[GB]], {{.*}}) outs({{.*}}) attrs =  {fsdp.multi_tensor = "adamw"}

// keep-grads: the reduced gradients stay where they were.
// KEEP-LABEL: func.func @step(
// KEEP-SAME: -> (tensor<f32> {fsdp.loss, fsdp.name = "loss"}, tensor<3x4xf32> {{{.*}}fsdp.grad_of = 0 : i64{{.*}}fsdp.name = "grad.w"}, tensor<4xf32> {{{.*}}fsdp.grad_of = 1 : i64{{.*}}fsdp.name = "grad.b"}, tensor<3x4xf32> {{{.*}}fsdp.name = "w", fsdp.update_of = 0 : i64}
// KEEP: %[[GW:.*]] = fsdp.grad_reduce {{.*}} -> tensor<3x4xf32>
// KEEP: %[[GB:.*]] = fsdp.grad_reduce {{.*}} -> tensor<4xf32>
// KEEP: return %{{.*}}, %[[GW]], %[[GB]], %{{.*}}, %{{.*}}, %{{.*}} :

// -----

// A bf16 parameter (the master shard itself is bf16): the update runs in
// f32 and is rounded once.
fsdp.mesh @mesh [shard = 2]
func.func @bf16(%w: tensor<4xbf16> {fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"})
    -> (tensor<4xbf16> {fsdp.grad_of = 0 : i64, fsdp.name = "grad.w"}) {
  %dw = "model.backward"(%w) : (tensor<4xbf16>) -> tensor<4xbf16>
  return %dw : tensor<4xbf16>
}
// SGD-LABEL: func.func @bf16(
// SGD: linalg.generic
// SGD-NEXT: ^bb0(%[[P:[^:]+]]: bf16, %[[G:[^:]+]]: bf16, %{{.*}}: bf16):
// SGD-NEXT: %[[P32:.*]] = arith.extf %[[P]] : bf16 to f32
// SGD-NEXT: %[[G32:.*]] = arith.extf %[[G]] : bf16 to f32
// SGD-NEXT: %[[D:.*]] = arith.mulf %{{.*}}, %[[G32]] : f32
// SGD-NEXT: %[[U:.*]] = arith.addf %[[P32]], %[[D]] : f32
// SGD-NEXT: %[[R:.*]] = arith.truncf %[[U]] : f32 to bf16
// SGD-NEXT: linalg.yield %[[R]] : bf16

// -----

// Gradient accumulation: @step_accumulate returns running sums (partial
// over the replicate axis) and is left alone; @step gets the update.
// RUN: fsdp-opt %s -split-input-file --allow-unregistered-dialect --fsdp-partition=accumulation-steps=2 --fsdp-optimizer | FileCheck %s --check-prefix=ACC
fsdp.mesh @mesh [replicate = 2, shard = 2]
func.func @step(%w: tensor<4xf32> {fsdp.layout = #fsdp.layout<@mesh, [replicate, shard<0>]>, fsdp.name = "w"})
    -> (tensor<4xf32> {fsdp.grad_of = 0 : i64, fsdp.name = "grad.w"}) {
  %dw = "model.backward"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  return %dw : tensor<4xf32>
}
// ACC-LABEL: func.func @step(%arg0: tensor<2xf32>
// ACC-SAME: fsdp.name = "accum.grad.w"
// ACC-SAME: fsdp.name = "lr", fsdp.optim = "lr"
// ACC-SAME: -> (tensor<2xf32> {{{.*}}fsdp.name = "w", fsdp.update_of = 0 : i64}
// ACC-LABEL: func.func @step_accumulate(%arg0: tensor<2xf32>
// ACC-NOT: fsdp.optim
// ACC-SAME: -> (tensor<2xf32> {{{.*}}fsdp.grad_of = 0 : i64
// ACC-NOT: linalg.generic
// ACC: return
