"""The Python runner (libfsdprun's C API) on a compute=gpu step.

    gpu_session.py step.mlir              opens it; prints why it cannot
    gpu_session.py step.mlir INPUT_DIR    runs 2 steps, then 1 more (the
                                          session keeps the state), printing
                                          `w` after each and the report's
                                          device keys
"""

import sys

import numpy as np
from fsdp_mlir import runner

try:
    with runner.Program(sys.argv[1], jit_cache_dir=None) as prog:
        if len(sys.argv) < 3:
            print("opened")
            sys.exit(0)
        for steps in (2, 1):
            out = prog.run(steps, input_dir=sys.argv[2])
            print("w", out["w"].tolist(), "after", prog.steps_taken)
        report = prog.report()
        print("gpu", report["gpu"], "devices", report["devices"])
        print("same", bool(np.array_equal(out["sum"], out["w"])))
except runner.RunnerError as e:
    print("RunnerError:", e)
    sys.exit(1)
