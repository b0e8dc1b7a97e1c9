"""A training step as fsdp-run receives it after partitioning and the
optimizer (docs/SEMANTICS.md, training), its inputs and a numpy reference.

Least squares on W ranks: the weight w [R, 4] sharded by rows (slots of
ceil(R / W), padding on the last ranks), a global batch of 8, SGD with
momentum, the learning rate an input (one value per step):
  loss = sum((x w^T - y)^2) / 8
  g = 2/8 (x w^T - y)^T x;  m' = 0.9 m + g;  w' = w - lr m';  step' = step + 1

  train_sgd.py mlir W [--rows R] [--state-name NAME]   (the module, on stdout)
  train_sgd.py make DIR STEPS [--same-batch] [--with-state]
  train_sgd.py split DIR OUT   DIR's inputs with x, y and lr as directories
                               of one file per step (OUT/x/<g>.npy, ...)
  train_sgd.py check OUT DIR FIRST STEPS   (OUT from fsdp-run; steps
                                            FIRST..FIRST+STEPS-1 of DIR's data)
  train_sgd.py same FULL FIRST SECOND [--rtol R]
      FIRST then SECOND (a resumed run) equal FULL (an uninterrupted run):
      bit for bit, or within a relative R (each loss; the largest error of
      a tensor relative to its largest element)
  train_sgd.py peaks A.json B.json   the same measured peak per rank, and
                                     nothing held after a step
"""

import json
import os
import sys

import numpy as np

MODULE = """\
#id2 = affine_map<(i, j) -> (i, j)>
#all2 = affine_map<(i, j) -> ()>
fsdp.mesh @mesh [shard = {W}]
func.func @step(
    %w: tensor<{S}x4xf32> {{fsdp.global_type = tensor<{R}x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w"}},
    %x: tensor<{B}x4xf32> {{fsdp.name = "x"}},
    %y: tensor<{B}x{R}xf32> {{fsdp.name = "y"}},
    %lr: tensor<f32> {{fsdp.layout = #fsdp.layout<@mesh, [replicate]>, fsdp.name = "lr", fsdp.optim = "lr"}},
    %step: tensor<f32> {{fsdp.layout = #fsdp.layout<@mesh, [replicate]>, fsdp.name = "step", fsdp.optim = "step"}},
    %m: tensor<{S}x4xf32> {{fsdp.global_type = tensor<{R}x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "{M}", fsdp.state_of = 0 : i64}})
    -> (tensor<f32> {{fsdp.loss, fsdp.name = "loss"}},
        tensor<{S}x4xf32> {{fsdp.global_type = tensor<{R}x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "w", fsdp.update_of = 0 : i64}},
        tensor<{S}x4xf32> {{fsdp.global_type = tensor<{R}x4xf32>, fsdp.layout = #fsdp.layout<@mesh, [shard<0>]>, fsdp.name = "{M}", fsdp.update_of = 5 : i64}},
        tensor<f32> {{fsdp.layout = #fsdp.layout<@mesh, [replicate]>, fsdp.name = "step", fsdp.update_of = 4 : i64}}) {{
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %inv8 = arith.constant 0.125 : f32
  %quarter = arith.constant 0.25 : f32
  %mu = arith.constant 0.9 : f32
  // Forward with the gathered weight.
  %flat = tensor.collapse_shape %w [[0, 1]] : tensor<{S}x4xf32> into tensor<{S4}xf32>
  %all = fsdp.all_gather %flat over @mesh ["shard"] : tensor<{S4}xf32> -> tensor<{P4}xf32>
  %w12 = tensor.expand_shape %all [[0, 1]] output_shape [{P}, 4] : tensor<{P4}xf32> into tensor<{P}x4xf32>
  %wf = tensor.extract_slice %w12[0, 0] [{R}, 4] [1, 1] : tensor<{P}x4xf32> to tensor<{R}x4xf32>
  %e = tensor.empty() : tensor<{B}x{R}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{B}x{R}xf32>) -> tensor<{B}x{R}xf32>
  %pred = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%x, %wf : tensor<{B}x4xf32>, tensor<{R}x4xf32>) outs(%f : tensor<{B}x{R}xf32>) -> tensor<{B}x{R}xf32>
  %diff = linalg.sub ins(%pred, %y : tensor<{B}x{R}xf32>, tensor<{B}x{R}xf32>) outs(%e : tensor<{B}x{R}xf32>) -> tensor<{B}x{R}xf32>
  // The loss: this rank's part, summed over the ranks.
  %l0 = tensor.empty() : tensor<f32>
  %lz = linalg.fill ins(%zero : f32) outs(%l0 : tensor<f32>) -> tensor<f32>
  %ls = linalg.generic {{indexing_maps = [#id2, #all2], iterator_types = ["reduction", "reduction"]}}
      ins(%diff : tensor<{B}x{R}xf32>) outs(%lz : tensor<f32>) {{
    ^bb0(%d: f32, %acc: f32):
      %sq = arith.mulf %d, %d : f32
      %sc = arith.mulf %sq, %inv8 : f32
      %a = arith.addf %acc, %sc : f32
      linalg.yield %a : f32
  }} -> tensor<f32>
  %l1 = tensor.expand_shape %ls [] output_shape [1] : tensor<f32> into tensor<1xf32>
  %lall = fsdp.all_reduce %l1 over @mesh ["shard"] sum : tensor<1xf32> -> tensor<1xf32>
  %loss = tensor.collapse_shape %lall [] : tensor<1xf32> into tensor<f32>
  // The gradient, padded to the slots and reduce-scattered.
  %ge = tensor.empty() : tensor<{P}x4xf32>
  %gz = linalg.fill ins(%zero : f32) outs(%ge : tensor<{P}x4xf32>) -> tensor<{P}x4xf32>
  %g10 = tensor.extract_slice %gz[0, 0] [{R}, 4] [1, 1] : tensor<{P}x4xf32> to tensor<{R}x4xf32>
  %gm = linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (k, m)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>]
       ins(%diff, %x : tensor<{B}x{R}xf32>, tensor<{B}x4xf32>) outs(%g10 : tensor<{R}x4xf32>) -> tensor<{R}x4xf32>
  %gpad = tensor.insert_slice %gm into %gz[0, 0] [{R}, 4] [1, 1] : tensor<{R}x4xf32> into tensor<{P}x4xf32>
  %gflat = tensor.collapse_shape %gpad [[0, 1]] : tensor<{P}x4xf32> into tensor<{P4}xf32>
  %gs = fsdp.reduce_scatter %gflat over @mesh ["shard"] sum : tensor<{P4}xf32> -> tensor<{S4}xf32>
  %g = tensor.expand_shape %gs [[0, 1]] output_shape [{S}, 4] : tensor<{S4}xf32> into tensor<{S}x4xf32>
  // SGD with momentum on the local shard.
  %lrv = tensor.extract %lr[] : tensor<f32>
  %we = tensor.empty() : tensor<{S}x4xf32>
  %mn = linalg.generic {{indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}}
      ins(%m, %g : tensor<{S}x4xf32>, tensor<{S}x4xf32>) outs(%we : tensor<{S}x4xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %bs = arith.mulf %b, %quarter : f32
      %am = arith.mulf %a, %mu : f32
      %r = arith.addf %am, %bs : f32
      linalg.yield %r : f32
  }} -> tensor<{S}x4xf32>
  %wn = linalg.generic {{indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"]}}
      ins(%w, %mn : tensor<{S}x4xf32>, tensor<{S}x4xf32>) outs(%we : tensor<{S}x4xf32>) {{
    ^bb0(%a: f32, %b: f32, %o: f32):
      %c = arith.mulf %b, %lrv : f32
      %r = arith.subf %a, %c : f32
      linalg.yield %r : f32
  }} -> tensor<{S}x4xf32>
  %sv = tensor.extract %step[] : tensor<f32>
  %s1 = arith.addf %sv, %one : f32
  %sn = tensor.from_elements %s1 : tensor<f32>
  return %loss, %wn, %mn, %sn : tensor<f32>, tensor<{S}x4xf32>, tensor<{S}x4xf32>, tensor<f32>
}}
"""


def module(world, rows=10, state="momentum_buffer.w"):
    slot = -(-rows // world)
    return MODULE.format(
        W=world,
        R=rows,
        S=slot,
        P=slot * world,
        S4=slot * 4,
        P4=slot * world * 4,
        B=8 // world,
        M=state,
    )


def option(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def make(out, steps, same_batch, with_state):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(7)
    np.save(os.path.join(out, "w.npy"), rng.standard_normal((10, 4)).astype(np.float32))
    shape = (8, 4) if same_batch else (steps, 8, 4)
    np.save(os.path.join(out, "x.npy"), rng.standard_normal(shape).astype(np.float32))
    yshape = (8, 10) if same_batch else (steps, 8, 10)
    np.save(os.path.join(out, "y.npy"), rng.standard_normal(yshape).astype(np.float32))
    lr = 0.05 * 0.9 ** np.arange(steps)  # a schedule: one value per step
    np.save(os.path.join(out, "lr.npy"), lr.astype(np.float32))
    if with_state:
        m = rng.standard_normal((10, 4)).astype(np.float32)
        np.save(os.path.join(out, "momentum_buffer.w.npy"), m)
        np.save(os.path.join(out, "step.npy"), np.array(3.0, np.float32))


def split(inputs, out):
    os.makedirs(out, exist_ok=True)
    for name in ("w", "momentum_buffer.w", "step"):
        path = os.path.join(inputs, name + ".npy")
        if os.path.exists(path):
            np.save(os.path.join(out, name + ".npy"), np.load(path))
    for name in ("x", "y", "lr"):
        values = np.load(os.path.join(inputs, name + ".npy"))
        os.makedirs(os.path.join(out, name), exist_ok=True)
        for g, value in enumerate(values):
            np.save(os.path.join(out, name, "%d.npy" % g), value)


def reference(inputs, first, steps):
    """Float32 training of the same model on the global batch."""
    w = np.load(os.path.join(inputs, "w.npy"))
    mpath = os.path.join(inputs, "momentum_buffer.w.npy")
    m = np.load(mpath) if os.path.exists(mpath) else np.zeros_like(w)
    spath = os.path.join(inputs, "step.npy")
    step = np.float32(np.load(spath)) if os.path.exists(spath) else np.float32(0)
    x_all, y_all = (
        np.load(os.path.join(inputs, "x.npy")),
        np.load(os.path.join(inputs, "y.npy")),
    )
    lr_all = np.load(os.path.join(inputs, "lr.npy"))
    losses = []
    for g in range(first + steps):
        x = x_all if x_all.ndim == 2 else x_all[g]
        y = y_all if y_all.ndim == 2 else y_all[g]
        lr = lr_all if lr_all.ndim == 0 else lr_all[g]
        diff = x @ w.T - y
        losses.append(np.sum(diff * diff) / np.float32(8))
        grad = np.float32(0.25) * (diff.T @ x)
        m = np.float32(0.9) * m + grad
        w = w - np.float32(lr) * m
        step = step + np.float32(1)
    return np.array(losses[first:], np.float32), w, m, step


def check(out, inputs, first, steps):
    loss, w, m, step = reference(inputs, first, steps)
    got = {
        n: np.load(os.path.join(out, n + ".npy"))
        for n in ("loss", "w", "momentum_buffer.w", "step")
    }
    assert got["loss"].shape == (steps,), got["loss"].shape
    np.testing.assert_allclose(got["loss"], loss, rtol=1e-5, err_msg="loss")
    for name, want in (("w", w), ("momentum_buffer.w", m), ("step", step)):
        err = np.max(np.abs(got[name].astype(np.float64) - want)) / max(
            np.max(np.abs(want)), 1e-30
        )
        assert err <= 1e-5, f"{name}: error {err:.3g} relative to its largest element"
    print(
        f"train_sgd: {steps} steps match numpy (last loss {loss[-1]:.6f}, step {float(got['step']):.0f})"
    )


def same(full, first, second, rtol):
    loss = np.concatenate(
        [
            np.load(os.path.join(first, "loss.npy")),
            np.load(os.path.join(second, "loss.npy")),
        ]
    )
    pairs = [("loss", np.load(os.path.join(full, "loss.npy")), loss)]
    for n in ("w", "momentum_buffer.w", "step"):
        pairs.append(
            (
                n,
                np.load(os.path.join(full, n + ".npy")),
                np.load(os.path.join(second, n + ".npy")),
            )
        )
    for name, want, got in pairs:
        if rtol is None:
            assert want.tobytes() == got.tobytes(), f"{name} differs"
        elif name == "loss":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=0, err_msg=name)
        else:  # relative to the tensor's largest element (sums in another order)
            err = np.max(np.abs(got.astype(np.float64) - want)) / max(
                np.max(np.abs(want)), 1e-30
            )
            assert err <= rtol, f"{name}: relative error {err:.3g} > {rtol}"
    print(
        "train_sgd: resumed run "
        + ("bit-identical" if rtol is None else f"within {rtol}")
    )


def peaks(a, b):
    with open(a) as fa, open(b) as fb:
        ja, jb = json.load(fa), json.load(fb)
    # The arena plus what malloc held at most (all of it planned: 0).
    for key in ("measured_peak_bytes", "jit_peak_bytes"):
        assert ja[key] == jb[key], (key, ja[key], jb[key])
    assert max(ja["jit_held_after_step_bytes"] + jb["jit_held_after_step_bytes"]) == 0
    assert min(ja["measured_peak_bytes"]) > 0
    print(
        f"train_sgd: peak {ja['measured_peak_bytes'][0]} B after {ja['steps']} and {jb['steps']} steps"
    )


if __name__ == "__main__":
    if sys.argv[1] == "mlir":
        print(
            module(
                int(sys.argv[2]),
                int(option("--rows", 10)),
                option("--state-name", "momentum_buffer.w"),
            ),
            end="",
        )
    elif sys.argv[1] == "make":
        make(
            sys.argv[2],
            int(sys.argv[3]),
            "--same-batch" in sys.argv,
            "--with-state" in sys.argv,
        )
    elif sys.argv[1] == "split":
        split(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif sys.argv[1] == "same":
        rtol = option("--rtol", None)
        same(
            sys.argv[2], sys.argv[3], sys.argv[4], None if rtol is None else float(rtol)
        )
    elif sys.argv[1] == "peaks":
        peaks(sys.argv[2], sys.argv[3])
