#!/usr/bin/env bash
# The main job: shows how a layout shards each parameter of a training step
# over every rank of a 2x4 HSDP mesh.
set -euo pipefail
cd "$(dirname "$0")/.."
build/bin/fsdp-opt examples/hsdp_mlp_step.mlir --fsdp-layout-report -o /dev/null
