"""Developer tools of fsdp-opt: test models, references and fuzzing. Not part
of the user API (`fsdp_mlir`, `fsdp_mlir.torch`); the tests, benchmarks and
scripts use them.

Modules:
  mlir_builder   small SSA text builder for linalg/tensor/arith/math programs
  gen            CLI that writes one rank's training step and the global inputs
  reference      numpy (float64) forward + hand-derived backward on the global batch
  check          CLI that compares a runner's outputs with the reference
  upstream_exec  runs the generated step with upstream MLIR tools only (no fsdp-opt)
  fuzz           mutation fuzzer of fsdp-opt and fsdp-run
"""

__all__ = ["mlir_builder", "gen", "reference", "check", "upstream_exec", "fuzz"]
