#!/usr/bin/env bash
# The main job, end to end: generate one rank's training step for an MLP with
# widths that do not divide the shard count, partition and lower it with
# fsdp-opt, run it on 8 ranks (2x4 HSDP mesh, threads backend) and compare
# every gradient with the unsharded numpy reference; then train it for 20
# AdamW steps on the same mesh (sharded optimizer state, sharded checkpoints)
# and compare every step's loss with numpy.
#
# `--quantize FORMAT` (fp8_e4m3_tensor, fp8_e5m2_tensor, mxfp8_rowwise,
# mxfp8_colwise, nvfp4, fp8_block_1x128, fp8_block_128x128) gathers parameters
# quantized: the gradients are then compared at the format's tolerance, and a
# program that returns its gathered parameters shows their error against the
# unquantized values and checks them bit for bit against the numpy/ml_dtypes
# model of the format. Other arguments go to the generator, e.g.
# `scripts/demo.sh --policy balanced`.
set -euo pipefail
cd "$(dirname "$0")/.."
quant=""
args=()
while (($#)); do
  case "$1" in
  --quantize) quant="$2"; shift 2 ;;
  *) args+=("$1"); shift ;;
  esac
done
set -- "${args[@]+"${args[@]}"}"
qopts=""
rtol=1e-5
if [ -n "$quant" ]; then
  qopts=" quantize=$quant quantize-min-elements=0"
  rtol=0.25
fi
PY="${FSDP_PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
export PYTHONPATH="$PWD/python"
bin="${FSDP_BUILD_DIR:-build}/bin"
out="${FSDP_DEMO_OUT:-build/demo}"
rm -rf "$out" && mkdir -p "$out"

echo "== 1. generate: 4-layer MLP, widths 64,100,37,50,10, 2x4 HSDP mesh"
$PY -m fsdp_mlir.dev.gen mlp --widths 64,100,37,50,10 --batch 4 --mesh 2x4 \
  --act gelu "$@" -o "$out/model.mlir" --data "$out/data"
grep -o 'fsdp.layout = #fsdp.layout<[^>]*>>*' "$out/model.mlir" | sort | uniq -c | sed 's/^/   /'

echo "== 2. fsdp-opt --fsdp-pipeline (partition, expand collectives, lower to LLVM)"
echo "   (unit buckets, prefetch 1; the plain program is bucket=none schedule=false)"
"$bin/fsdp-opt" "$out/model.mlir" \
  --fsdp-pipeline="all-reduce-loss=true" -o "$out/spmd.mlir"
"$bin/fsdp-opt" "$out/model.mlir" \
  --fsdp-pipeline="all-reduce-loss=true bucket=none schedule=false" -o "$out/plain.mlir"
"$bin/fsdp-opt" "$out/model.mlir" \
  --fsdp-pipeline="all-reduce-loss=true lower=true$qopts" -o "$out/lowered.mlir" 2>"$out/remarks.txt"
[ -z "$quant" ] || echo "   parameter gathers in $quant ($(grep -c remark "$out/remarks.txt" || true) too small or unblockable, kept f32)"
printf '   %-15s %8s %8s\n' collective plain bucketed
for op in all_gather reduce_scatter all_reduce; do
  printf '   %-15s %8s %8s\n' "$op" \
    "$(grep -cE "fsdp\.$op(_start)? " "$out/plain.mlir")" \
    "$(grep -cE "fsdp\.$op(_start)? " "$out/spmd.mlir")"
done

echo "== 3. fsdp-run: 8 ranks, threads backend"
"$bin/fsdp-run" "$out/lowered.mlir" --inputs "$out/data" \
  --outputs "$out/out" --print-comm-stats

echo "== 4. check against the unsharded numpy reference (rtol $rtol)"
$PY -m fsdp_mlir.dev.check "$out/data" "$out/out" --rtol "$rtol"

echo "== 5. train: 20 AdamW steps (warmup + cosine learning rate, a fresh batch each step),"
echo "   parameters and optimizer state sharded in memory, a sharded checkpoint every 10 steps"
topts="optimizer=adamw betas=0.9,0.95 eps=1e-8 weight-decay=0.1 max-grad-norm=1.0"
$PY test/Integration/Inputs/train_check.py inputs "$out/data" "$out/train_in" 20
"$bin/fsdp-opt" "$out/model.mlir" \
  --fsdp-pipeline="all-reduce-loss=true lower=true $topts$qopts" -o "$out/train.mlir" 2>/dev/null
"$bin/fsdp-run" "$out/train.mlir" --inputs "$out/train_in" --inputs "$out/data" \
  --outputs "$out/train_out" --steps 20 --save "$out/checkpoints" --save-every 10 \
  --print-memory | grep -E '^step (1|5|10|15|20):|^saved|measured|rank 0:|resident|^parse'
echo "   checkpoints: $(ls "$out/checkpoints" | tr '\n' ' ')"
echo "== 6. every step's loss against the same training in numpy on the global batch"
$PY test/Integration/Inputs/train_check.py check "$out/data" "$out/train_in" \
  "$out/train_out" 20 "$topts" --rtol "$( [ -n "$quant" ] && echo 0.25 || echo 1e-4)"

if [ -n "$quant" ]; then
  echo "== 7. gathered parameters in $quant vs unquantized, and bit for bit vs the format's model"
  q=examples/quantized_gather_params.mlir
  $PY test/Integration/Inputs/check_quantized.py inputs "$q" "$out/qdata"
  "$bin/fsdp-opt" "$q" --fsdp-pipeline="lower=true$qopts" -o "$out/qlowered.mlir" 2>/dev/null
  "$bin/fsdp-run" "$out/qlowered.mlir" --inputs "$out/qdata" --outputs "$out/qout" \
    --all-ranks --print-comm-stats >"$out/qstats.txt"
  $PY test/Integration/Inputs/check_quantized.py gathered "$out/qdata" "$out/qout" 8 \
    "$quant" w0:0:4 w1:0:4 w2:1:4 w3:0:4 w4:0:4:balanced b:0:4 s:0:4 --stats "$out/qstats.txt"
fi
