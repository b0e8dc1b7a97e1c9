"""Runs a one-rank step lowered with `compute=gpu gpu-emulation=true` on the
emulated GPU runtime (build/lib/cuda-emulation/libfsdprt.so) and writes its
results as .npy files, as fsdp-run --outputs does:

  run_gpu_emulated.py lowered.mlir --inputs DIR [--inputs DIR] --outputs DIR
      --runtime build/lib/cuda-emulation/libfsdprt.so
      --translate mlir-translate --llc llc

The lowered module is translated to LLVM IR (the fsdp dialect's module
attributes and mesh dropped), compiled to a shared library whose global
constructors register the step's host kernels, and called through its C
interface on device buffers of one nccl rank: inputs uploaded, the compute
stream synchronized after the step, results downloaded. Prints the
context's launch and module-load counts."""
import argparse
import ctypes
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

DTYPES = {"f32": np.float32, "f64": np.float64, "i64": np.int64, "i32": np.int32}


def signature(text: str, entry: str):
    """(name, shape, dtype) of the entry's arguments and results, in order."""
    attrs = text.splitlines()[0]
    m = re.search(r"\b" + entry + r" = #fsdp\.signature<args = \[(.*?)\], results = \[(.*)", attrs)
    if not m:
        sys.exit(f"FAIL: no fsdp.signatures entry for {entry}")
    # The results run to the next entry's signature, if any.
    results = m.group(2).split("#fsdp.signature<")[0]
    port = re.compile(r'<"([^"]+)" : tensor<((?:\d+x)*)(\w+)>')

    def ports(s):
        out = []
        for name, dims, ty in port.findall(s):
            if ty not in DTYPES:
                sys.exit(f"FAIL: {name}: element type {ty} is not supported here")
            out.append((name, [int(d) for d in dims.split("x") if d], DTYPES[ty]))
        return out

    return ports(m.group(1)), ports(results)


def compile_step(text: str, work: str, translate: str, llc: str) -> str:
    # The fsdp dialect is not registered in mlir-translate: its module
    # attributes and mesh symbol are not needed once lowered.
    lines = text.splitlines()
    lines[0] = "module attributes {gpu.container_module} {"
    host = "\n".join(l for l in lines if not l.lstrip().startswith("fsdp.mesh"))
    paths = {k: os.path.join(work, "step." + k) for k in ("mlir", "ll", "o", "so")}
    with open(paths["mlir"], "w") as f:
        f.write(host)
    subprocess.run([translate, "--mlir-to-llvmir", paths["mlir"], "-o", paths["ll"]], check=True)
    subprocess.run(
        [llc, "-O2", "-relocation-model=pic", "-filetype=obj", paths["ll"], "-o", paths["o"]],
        check=True,
    )
    # -Bsymbolic: `step` itself, not libc's regexp step(), for the wrapper.
    subprocess.run(
        ["cc", "-shared", "-Wl,-Bsymbolic", paths["o"], "-o", paths["so"], "-lm"], check=True
    )
    return paths["so"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module")
    ap.add_argument("--inputs", action="append", required=True,
                    help="directories of <name>.npy inputs, first match wins; "
                    "an input in none of them is zeros (as in fsdp-run)")
    ap.add_argument("--outputs", required=True)
    ap.add_argument("--runtime", required=True)
    ap.add_argument("--translate", default="mlir-translate")
    ap.add_argument("--llc", default="llc")
    ap.add_argument("--entry", default="step")
    ap.add_argument("--stack", default="",
                    help="comma-separated scalar results to write with one entry per "
                    "step (shape [1]), as fsdp-run does for a training step's loss")
    args = ap.parse_args()

    text = open(args.module).read()
    if "fsdp.gpu_emulation" not in text.splitlines()[0]:
        sys.exit("FAIL: the module was not lowered with gpu-emulation=true")
    ins, outs = signature(text, args.entry)

    rt = ctypes.CDLL(os.path.abspath(args.runtime), mode=ctypes.RTLD_GLOBAL)
    vp, i32, i64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64
    for name, res, argtypes in [
        ("fsdprt_gpu_emulated", i32, []),
        ("fsdprt_nccl_get_unique_id", i32, [vp]),
        ("fsdprt_nccl_comm_create", i32, [i32, vp, i64, vp, i32, vp, vp]),
        ("fsdprt_nccl_comm_context", vp, [vp]),
        ("fsdprt_set_thread_comm", None, [vp]),
        ("fsdprt_comm_error", i32, [vp]),
        ("fsdprt_comm_error_message", ctypes.c_char_p, [vp]),
        ("fsdprt_comm_destroy", i32, [vp]),
        ("fsdprt_gpu_alloc", vp, [i64]),
        ("fsdprt_gpu_free", None, [vp]),
        ("fsdprt_gpu_copy_to_device", i32, [vp, vp, i64]),
        ("fsdprt_gpu_copy_to_host", i32, [vp, vp, i64]),
        ("fsdprt_gpu_synchronize", i32, [vp]),
        ("fsdprt_gpu_context_error_message", ctypes.c_char_p, [vp]),
        ("fsdprt_gpu_context_stats", i32, [vp, vp]),
        ("fsdprt_gpu_last_error_message", ctypes.c_char_p, []),
        ("mgpuMemFree", None, [vp, vp]),
    ]:
        fn = getattr(rt, name)
        fn.restype, fn.argtypes = res, argtypes
    if rt.fsdprt_gpu_emulated() != 1:
        sys.exit(f"FAIL: {args.runtime} is not the emulated runtime")

    with tempfile.TemporaryDirectory() as work:
        so = compile_step(text, work, args.translate, args.llc)
        # Its global constructors register the host kernels with `rt`.
        step = ctypes.CDLL(so, mode=ctypes.RTLD_GLOBAL)

    nccl_id = ctypes.create_string_buffer(128)
    shape = (i64 * 1)(1)
    comm = vp()
    if rt.fsdprt_nccl_get_unique_id(nccl_id) != 0 or rt.fsdprt_nccl_comm_create(
        1, shape, 0, nccl_id, 0, None, ctypes.byref(comm)
    ) != 0:
        sys.exit("FAIL: no emulated nccl rank: " + rt.fsdprt_gpu_last_error_message().decode())
    rt.fsdprt_set_thread_comm(comm)
    ctx = rt.fsdprt_nccl_comm_context(comm)

    def descriptor(ptr, dims):
        words = (i64 * (3 + 2 * len(dims)))()
        words[0] = words[1] = ptr
        stride = 1
        for d in range(len(dims) - 1, -1, -1):
            words[3 + d] = dims[d]
            words[3 + len(dims) + d] = stride
            stride *= dims[d]
        return words

    buffers, descs = [], []
    for name, dims, dtype in ins:
        found = [d for d in args.inputs if os.path.exists(os.path.join(d, name + ".npy"))]
        if found:
            host = np.load(os.path.join(found[0], name + ".npy"))
        else:
            host = np.zeros(dims, dtype=dtype)
        host = np.array(host, dtype=dtype, order="C")  # keeps a 0-d shape
        if list(host.shape) != dims:
            sys.exit(f"FAIL: input {name} has shape {list(host.shape)}, the step wants {dims}")
        dev = rt.fsdprt_gpu_alloc(max(host.nbytes, 1))
        rt.fsdprt_gpu_copy_to_device(dev, host.ctypes.data, host.nbytes)
        buffers.append(dev)
        descs.append(descriptor(dev, dims))
    offsets, words = [], 0
    for _, dims, _ in outs:
        offsets.append(words)
        words += 3 + 2 * len(dims)
    area = (i64 * max(words, 1))()

    fn = getattr(step, "_mlir_ciface_" + args.entry)
    fn.restype = None
    fn.argtypes = [vp] * (1 + len(descs))
    fn(ctypes.addressof(area), *[ctypes.addressof(d) for d in descs])
    # The lowered step never waits on its stream: the caller does.
    status = rt.fsdprt_gpu_synchronize(ctx)
    if status != 0 or rt.fsdprt_comm_error(comm) != 0:
        msg = rt.fsdprt_gpu_context_error_message(ctx) or rt.fsdprt_comm_error_message(comm)
        sys.exit("FAIL: " + (msg or b"").decode())

    os.makedirs(args.outputs, exist_ok=True)
    allocations = []
    for (name, dims, dtype), off in zip(outs, offsets):
        allocated, aligned, offset = area[off], area[off + 1], area[off + 2]
        host = np.empty(dims, dtype=dtype)
        item = np.dtype(dtype).itemsize
        if rt.fsdprt_gpu_copy_to_host(host.ctypes.data, aligned + offset * item, host.nbytes):
            sys.exit(f"FAIL: result {name}: " + rt.fsdprt_gpu_last_error_message().decode())
        np.save(os.path.join(args.outputs, name + ".npy"),
                host.reshape(1) if name in args.stack.split(",") else host)
        if allocated not in allocations:
            allocations.append(allocated)
    # Results may share a buffer (a reduce-scatter's packed output).
    for allocated in allocations:
        rt.mgpuMemFree(allocated, None)
    for dev in buffers:
        rt.fsdprt_gpu_free(dev)
    stats = (ctypes.c_uint64 * 6)()
    rt.fsdprt_gpu_context_stats(ctx, stats)
    if rt.fsdprt_gpu_synchronize(ctx) != 0:
        sys.exit("FAIL: " + rt.fsdprt_gpu_context_error_message(ctx).decode())
    print(f"launches {stats[2]} module-loads {stats[3]} gemms {stats[4]}")
    rt.fsdprt_set_thread_comm(None)
    rt.fsdprt_comm_destroy(comm)


if __name__ == "__main__":
    main()
