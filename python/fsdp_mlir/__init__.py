"""Training-step generator (MLIR), numpy reference and result checker for fsdp-opt.

Modules:
  model          model description (model.json), meshes, layouts, .npy I/O
  mlir_builder   small SSA text builder for linalg/tensor/arith/math programs
  gen            CLI that writes one rank's training step and the global inputs
  reference      numpy (float64) forward + hand-derived backward on the global batch
  check          CLI that compares a runner's outputs with the reference
  upstream_exec  runs the generated step with upstream MLIR tools only (no fsdp-opt)
  checkpoint     reads fsdp-run's sharded checkpoints; converts them to .npy or a torch state_dict
  torch          PyTorch frontend: export an nn.Module's training step (needs torch, torch-mlir)
"""

__all__ = ["model", "mlir_builder", "gen", "reference", "check", "upstream_exec", "checkpoint"]
