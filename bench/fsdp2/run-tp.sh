#!/usr/bin/env bash
# Tensor parallelism against DTensor TP + FSDP2 (parallelize_module on the
# 'tp' dim, fully_shard on 'dp', gloo, one process per rank) on a Hugging
# Face Llama: dp=2,tp=2 and dp=4,tp=2, with and without sequence
# parallelism; fsdp-run's threads and mpi backends. The gradients are
# checked against DTensor's, the collectives of a step counted on both
# sides. Results: docs/BENCHMARKS.md, "Against DTensor tensor parallelism".
#
#   bench/fsdp2/run-tp.sh               # Llama hidden 256, 2 layers, 256 tokens (9-10 min at load 20 on 2 cores)
#   bench/fsdp2/run-tp.sh --no-mpi      # threads backend only
#   bench/fsdp2/run-tp.sh --dp 2        # dp=2,tp=2 only
#   bench/fsdp2/run-tp.sh --plan auto   # the whole plan: vocabulary-parallel embedding and LM head
#   bench/fsdp2/run-tp.sh --smoke       # a tiny Llama on dp=2,tp=2, 2 steps
#   bench/fsdp2/run-tp.sh --help        # every option of tp.py
#
# Needs build/bin/fsdp-opt and build/bin/fsdp-run (FSDP_BUILD=dir to use
# another build) and the venv with torch and transformers
# (python/requirements-torch.txt; FSDP_PYTHON=python to use another
# interpreter).
set -euo pipefail
exec "$(dirname "$0")/../run-driver.sh" "$0" fsdp2 torch driver=tp.py -- "$@"
