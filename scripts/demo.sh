#!/usr/bin/env bash
# The main job, end to end: generate one rank's training step for an MLP with
# widths that do not divide the shard count, partition and lower it with
# fsdp-opt, run it on 8 ranks (2x4 HSDP mesh, threads backend) and compare
# every gradient with the unsharded numpy reference.
#
# Extra arguments go to the generator, e.g. `scripts/demo.sh --policy balanced`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/python"
out=build/demo
rm -rf "$out" && mkdir -p "$out"

echo "== 1. generate: 4-layer MLP, widths 64,100,37,50,10, 2x4 HSDP mesh"
$PY -m fsdp_mlir.gen mlp --widths 64,100,37,50,10 --batch 4 --mesh 2x4 \
  --act gelu "$@" -o "$out/model.mlir" --data "$out/data"
grep -o 'fsdp.layout = #fsdp.layout<[^>]*>>*' "$out/model.mlir" | sort | uniq -c | sed 's/^/   /'

echo "== 2. fsdp-opt --fsdp-pipeline (partition, expand collectives, lower to LLVM)"
echo "   (unit buckets, prefetch 1; the plain program is bucket=none schedule=false)"
build/bin/fsdp-opt "$out/model.mlir" \
  --fsdp-pipeline="all-reduce-loss=true" -o "$out/spmd.mlir"
build/bin/fsdp-opt "$out/model.mlir" \
  --fsdp-pipeline="all-reduce-loss=true bucket=none schedule=false" -o "$out/plain.mlir"
build/bin/fsdp-opt "$out/model.mlir" \
  --fsdp-pipeline="all-reduce-loss=true lower=true" -o "$out/lowered.mlir"
printf '   %-15s %8s %8s\n' collective plain bucketed
for op in all_gather reduce_scatter all_reduce; do
  printf '   %-15s %8s %8s\n' "$op" \
    "$(grep -cE "fsdp\.$op(_start)? " "$out/plain.mlir")" \
    "$(grep -cE "fsdp\.$op(_start)? " "$out/spmd.mlir")"
done

echo "== 3. fsdp-run: 8 ranks, threads backend"
build/bin/fsdp-run "$out/lowered.mlir" --inputs "$out/data" \
  --outputs "$out/out" --print-comm-stats

echo "== 4. check against the unsharded numpy reference"
$PY -m fsdp_mlir.check "$out/data" "$out/out"
