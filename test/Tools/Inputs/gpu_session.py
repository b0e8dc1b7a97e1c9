"""Opens a step in the Python runner (libfsdprun's C API) and prints why it
cannot, for the compute=gpu error tests.

    gpu_session.py step.mlir
"""

import sys

from fsdp_mlir import runner

try:
    with runner.Program(sys.argv[1], jit_cache_dir=None) as prog:
        print("opened", prog)
except runner.RunnerError as e:
    print("RunnerError:", e)
    sys.exit(1)
