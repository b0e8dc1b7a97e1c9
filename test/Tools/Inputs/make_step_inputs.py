"""Global inputs for Inputs/step.mlir: make_step_inputs.py DIR [--bad-shape]."""
import os
import sys

import numpy as np

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1)
np.save(os.path.join(out, "w.npy"), rng.standard_normal((10, 4)).astype(np.float32))
rows = 7 if "--bad-shape" in sys.argv else 8  # 4 ranks x batch 2
np.save(os.path.join(out, "x.npy"), rng.standard_normal((rows, 4)).astype(np.float32))
