"""fsdp-opt's Python package: the user API.

Modules:
  model          model description (model.json), meshes, layouts, .npy I/O
  optim          optimizer configuration (SGD, AdamW) shared by the frontends
  runner         ctypes binding of the C runner (fsdprun.h)
  aot            ahead-of-time step libraries
  checkpoint     reads fsdp-run's sharded checkpoints; converts them to .npy or a torch state_dict
  torch          PyTorch frontend: export an nn.Module's training step (needs torch, torch-mlir)

Developer tools (test-model generator, numpy reference, fuzzer, ...) live in
`fsdp_mlir.dev`; nothing here imports them.
"""

__all__ = ["model", "optim", "runner", "aot", "checkpoint"]
