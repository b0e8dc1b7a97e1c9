"""Bucketed, scheduled quantized gathers give the bits of unbucketed ones.

    compare_quantized_buckets.py BIN MODEL.mlir DATA WORK [--mpirun CMD]
                                 FORMAT...

For each FORMAT, compiles MODEL twice with fsdp-opt --fsdp-pipeline
(lower=true quantize=FORMAT quantize-min-elements=0 ...):

- reference: quantize-split=false bucket=none schedule=false, one
  synchronous fsdp.quantized_all_gather per parameter;
- bucketed: the defaults, quantize + a byte all-gather per unit's bucket
  (started ahead by fsdp-schedule) + dequantize;

checks that the bucketed IR quantizes, starts its byte gathers ahead
(all_gather_start) and has no more of them than quantized parameters (the
test checks the counts: one per unit), runs both with fsdp-run
on every rank (--all-ranks; under MPI with --mpirun) and compares every
output file bit for bit. Prints one line per format, then PASS or FAIL.
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys

import numpy as np


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode:
        sys.exit(f"FAIL: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def main():
    p = argparse.ArgumentParser()
    p.add_argument("bin")
    p.add_argument("model")
    p.add_argument("data")
    p.add_argument("work")
    p.add_argument("formats", nargs="+")
    p.add_argument("--mpirun", help="mpirun command line, e.g. 'mpirun -np 8'")
    a = p.parse_args()
    opt, runner = os.path.join(a.bin, "fsdp-opt"), os.path.join(a.bin, "fsdp-run")
    ok = True
    for fmt in a.formats:
        work = pathlib.Path(a.work) / fmt
        work.mkdir(parents=True, exist_ok=True)
        base = f"lower=true quantize={fmt} quantize-min-elements=0"
        variants = {
            "reference": base + " quantize-split=false bucket=none schedule=false",
            "bucketed": base,
        }
        outs = {}
        for name, opts in variants.items():
            ir = work / f"{name}.mlir"
            run([opt, a.model, f"--fsdp-pipeline={opts}", "-o", str(ir)])
            # The same pipeline before lowering, to look at the gathers.
            spmd = run([opt, a.model, "--fsdp-pipeline=" + opts.replace("lower=true ", "")])
            if name == "bucketed":
                quantized = len(re.findall(r"fsdp\.quantize ", spmd))
                byte_gathers = len(re.findall(r"all_gather_start [^\n]*xi8>", spmd))
                fused = spmd.count("fsdp.quantized_all_gather")
                if fused or not quantized or not byte_gathers or byte_gathers > quantized:
                    print(f"{fmt}: FAIL: {quantized} quantized parameters in "
                          f"{byte_gathers} started byte gathers, {fused} fused")
                    ok = False
            out = work / f"out-{name}"
            cmd = [runner, str(ir), "--inputs", a.data, "--outputs", str(out), "--all-ranks"]
            if a.mpirun:
                cmd = a.mpirun.split() + cmd + ["--backend", "mpi"]
            run(cmd)
            outs[name] = out
        files = sorted(f.name for f in outs["reference"].glob("*.npy"))
        if not files or files != sorted(f.name for f in outs["bucketed"].glob("*.npy")):
            print(f"{fmt}: FAIL: different output files")
            ok = False
            continue
        differing = [
            f for f in files
            if np.load(outs["reference"] / f).tobytes() != np.load(outs["bucketed"] / f).tobytes()
        ]
        if differing:
            print(f"{fmt}: FAIL: {len(differing)} of {len(files)} outputs differ: {differing[:4]}")
            ok = False
        else:
            print(f"{fmt}: {quantized} quantized parameters in {byte_gathers} "
                  f"bucketed gathers, {len(files)} outputs bit-identical")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
