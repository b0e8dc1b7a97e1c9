# The end-to-end stage of bench/gpu/check.sh for steps compiled ahead of
# time (sourced by check.sh; uses its note and run_logged). docs/AOT.md.
#
# A pack (bench/gpu/pack_aot.py, built where the compiler is) holds step
# libraries, their inputs and the CPU path's results. This stage builds the
# runtime from the pack's sources with CMake (no LLVM, no MLIR; the GPU
# runtime and NCCL backend when the toolkit and NCCL are found), runs each
# step with the LLVM-free runner (python3 -m fsdp_mlir.aot: standard library
# only) on its rank threads and compares every result with the reference
# (CPU steps: elementwise within 1e-5; GPU steps: each result's 2-norm
# within 1e-5 for fp32, 1e-2 for bf16). Steps of kind "cpu" run anywhere;
# steps of kind "gpu" run on the device path (a GPU context and an NCCL
# communicator per rank) and are skipped, with the reason, without a GPU or
# when the pack could not compile them. GPT-2 small's inputs and its fp32
# reference (torch on the GPU) are made here (bench/gpu/gpt2_inputs.py).
# Then torch eager and torch.compile time the same models and batches
# (bench/gpu/torch_baseline.py) and bench/gpu/e2e_table.py prints the table
# (also $OUT/e2e_table.txt, which check.sh prints after its summary), with
# the cost model's estimate for this GPU next to each measured GPU step.
#
# Variables from check.sh: ROOT, OUT, DRY, GPU (nvidia-smi's name), AOT_PACK (the pack directory;
# empty: $ROOT when it holds pack.json, else $ROOT/build-gpu-pack), NCCL_INC,
# NCCL_LIB. Environment: FSDP_TORCH_PYTHON (the interpreter with torch;
# default python3), FSDP_EMULATED_RUNTIME (the libfsdprt built over the host
# emulation of CUDA, for the pack's gpu-emulation=true steps, which run
# without a GPU too; pack_aot.py --emulation adds them).

aot_stage() {
  rm -f "$OUT/e2e_table.txt"
  local pack=${AOT_PACK:-}
  if [ -z "$pack" ]; then
    if [ -f "$ROOT/pack.json" ]; then pack=$ROOT; else pack=$ROOT/build-gpu-pack; fi
  fi
  if [ ! -f "$pack/pack.json" ]; then
    note "e2e: AOT steps" skipped "no pack at $pack (build it with bench/gpu/pack_aot.py)"
    return
  fi
  local py
  py=$(command -v python3 || true)
  if [ -z "$py" ]; then
    note "e2e: AOT steps" skipped "python3 not found"
    return
  fi
  local tpy=${FSDP_TORCH_PYTHON:-$py}
  local res=$OUT/aot-out
  rm -rf "$res"
  mkdir -p "$res"
  : >"$res/status.tsv"
  if ! command -v cmake >/dev/null 2>&1; then
    note "e2e: runtime (CMake)" FAIL "cmake not found"
    return
  fi
  # The runtime and the runner (libfsdprun, fsdp-run; no LLVM) from source:
  # threads backend (what the CPU steps need);
  # the GPU runtime and the NCCL backend come with it when the toolkit and
  # NCCL are found (check.sh's NCCL_HOME search is passed on).
  local rt=$OUT/aot-runtime t0 nccl_args=()
  if [ -n "${NCCL_INC:-}" ] && [ -n "${NCCL_LIB:-}" ]; then
    nccl_args=(-DFSDPRT_NCCL_INCLUDE_DIR="$NCCL_INC" -DFSDPRT_NCCL_LIBRARY="$(ls "$NCCL_LIB"/libnccl.so* | head -1)")
  fi
  t0=$(date +%s)
  if run_logged "runtime (CMake)" "$OUT/build-aot-runtime.log" \
       cmake -S "$pack/runtime" -B "$rt" -DCMAKE_BUILD_TYPE=Release \
         -DFSDPRT_BUILD_TESTS=OFF -DFSDPRT_BUILD_BENCH=OFF -DFSDPRT_ENABLE_MPI=OFF \
         -DFSDPRT_QUANT_BUILD_TESTS=OFF -DFSDPRT_QUANT_BUILD_BENCH=OFF \
         -DFSDPRT_QUANT_ENABLE_CUDA=OFF "${nccl_args[@]}" &&
     run_logged "runtime (CMake)" "$OUT/build-aot-runtime-build.log" \
       cmake --build "$rt" --target fsdprt fsdprun fsdp-run -j "${FSDP_JOBS:-$(nproc 2>/dev/null || echo 4)}"; then
    note "e2e: runtime (CMake)" ok "$(( $(date +%s) - t0 )) s, $rt/libfsdprt.so ($(grep -o 'nccl=[A-Z]* gpu=[A-Z]*' "$OUT/build-aot-runtime.log" | head -1))"
  else
    note "e2e: runtime (CMake)" FAIL "see $OUT/build-aot-runtime.log, build-aot-runtime-build.log"
    return
  fi
  local lib
  lib=$(find "$rt" -name 'libfsdprt.so' -print -quit)
  # One line per step, tab-separated (the reason of an unavailable step last).
  local steps
  steps=$("$py" -c '
import json, sys
for s in json.load(open(sys.argv[1]))["steps"]:
    f = [s["name"], s["kind"], s.get("library", "-"), s.get("inputs", "-"), s.get("reference", "-"),
         s["steps"], s["rtol"], s.get("metric", "elementwise"), s.get("inputs_from") or "-",
         int("gpu-emulation=true" in s.get("pipeline", "")), s.get("unavailable") or "-"]
    print("\t".join(str(x) for x in f))
' "$pack/pack.json") || { note "e2e: AOT steps" FAIL "cannot read $pack/pack.json"; return; }
  local name kind library inputs reference n rtol metric from emu why out rc gen_rc="" steprt
  step_result() { # name kind result detail [report]
    note "e2e: $1 ($2)" "$3" "$4"
    printf '%s\t%s\t%s\t%s\n' "$1" "$3" "$4" "${5:-}" >>"$res/status.tsv"
  }
  while IFS=$'\t' read -r name kind library inputs reference n rtol metric from emu why; do
    [ -z "$name" ] && continue
    if [ "$why" != - ]; then
      step_result "$name" "$kind" skipped "not in the pack: $why"
      continue
    fi
    steprt=$lib
    if [ "$emu" = 1 ]; then
      # Kernels as host functions: the emulated runtime, GPU or not.
      if [ -z "${FSDP_EMULATED_RUNTIME:-}" ]; then
        step_result "$name" "$kind" skipped "for the emulated runtime: set FSDP_EMULATED_RUNTIME=<build>/lib/cuda-emulation/libfsdprt.so"
        continue
      fi
      steprt=$FSDP_EMULATED_RUNTIME
    elif [ "$kind" = gpu ] && [ "$DRY" = 1 ]; then
      step_result "$name" "$kind" skipped "needs a GPU (dry run)"
      continue
    fi
    inputs=$pack/$inputs reference=$pack/$reference
    if [ "$from" = gpt2_inputs ]; then
      # Made once for both GPT-2 steps (the same model and batch).
      if [ -z "$gen_rc" ]; then
        "$tpy" "$pack/bench/gpu/gpt2_inputs.py" --model-json "$pack/$(dirname "$library")/model.json" \
          --out "$OUT/aot-gpt2" >"$res/gpt2_inputs.log" 2>&1
        gen_rc=$?
      fi
      if [ "$gen_rc" = 77 ]; then
        step_result "$name" "$kind" skipped "$(tail -1 "$res/gpt2_inputs.log")"
        continue
      elif [ "$gen_rc" != 0 ]; then
        tail -5 "$res/gpt2_inputs.log" | sed 's/^/   /'
        step_result "$name" "$kind" FAIL "its inputs: exit $gen_rc (see $res/gpt2_inputs.log)"
        continue
      fi
      inputs=$OUT/aot-gpt2/inputs reference=$OUT/aot-gpt2/reference
    fi
    out=$res/$name
    # A rank stuck in NCCL's setup would hang the check: a time limit.
    PYTHONPATH="$pack/python" timeout "${FSDP_STEP_TIMEOUT:-180}" "$py" -m fsdp_mlir.aot run "$pack/$library" --runtime "$steprt" \
      --inputs "$inputs" --outputs "$out" --steps "$n" --report "$out.json" >"$out.log" 2>&1
    rc=$?
    if [ "$rc" = 77 ]; then
      step_result "$name" "$kind" skipped "$(tail -1 "$out.log" | sed 's/^fsdp_mlir.aot: skipped (no GPU): //')"
    elif [ "$rc" = 124 ]; then
      step_result "$name" "$kind" FAIL "over ${FSDP_STEP_TIMEOUT:-180} s (see $out.log)"
    elif [ "$rc" != 0 ]; then
      tail -5 "$out.log" | sed 's/^/   /'
      step_result "$name" "$kind" FAIL "exit $rc (see $out.log)"
    elif PYTHONPATH="$pack/python" "$py" -m fsdp_mlir.aot compare "$out" "$reference" \
           --rtol "$rtol" --metric "$metric" >"$out.compare" 2>&1; then
      step_result "$name" "$kind" ok "$n step(s), median $("$py" -c '
import json, sys
r = json.load(open(sys.argv[1]))
ms, world, load = r["median_step_s"] * 1e3, r["world"], r["load_s"]
print(f"{ms:.3f} ms on {world} rank(s), load {load:.3f} s; matches (rtol {sys.argv[2]}, {sys.argv[3]})")
' "$out.json" "$rtol" "$metric")" "$out.json"
    else
      sed 's/^/   /' "$out.compare" | head -20
      step_result "$name" "$kind" FAIL "results differ from the reference (see $out.compare)"
    fi
  done <<<"$steps"
  if ! grep -q '"kind": "gpu"' "$pack/pack.json"; then
    note "e2e: GPU steps" skipped "the pack has no compute=gpu steps (pack_aot.py --no-gpu?)"
  fi
  # torch eager / torch.compile on the same models and batches.
  local dry=() budget=${FSDP_TORCH_BUDGET:-100}
  [ "$DRY" = 1 ] && dry=(--dry-run)
  [ "${QUICK:-0}" = 1 ] && [ -z "${FSDP_TORCH_BUDGET:-}" ] && budget=30
  if "$tpy" "$pack/bench/gpu/torch_baseline.py" --pack "$pack/pack.json" --out "$res/torch.json" \
       --budget "$budget" --compile-budget 75 "${dry[@]}" >"$res/torch.log" 2>&1; then
    local measured
    measured=$(grep -c ' ms$' "$res/torch.log")
    if [ "$measured" -gt 0 ]; then
      note "e2e: torch eager / compile" ok "$measured measurement(s) ($res/torch.json)"
    else
      why=$(sed -n 's/.*skipped: //p' "$res/torch.log" | sort -u | head -1)
      note "e2e: torch eager / compile" skipped "${why:-the pack has no steps with a torch model}"
    fi
  else
    tail -5 "$res/torch.log" | sed 's/^/   /'
    note "e2e: torch eager / compile" FAIL "see $res/torch.log"
  fi
  "$py" "$pack/bench/gpu/e2e_table.py" --pack "$pack/pack.json" --status "$res/status.tsv" \
    --torch "$res/torch.json" --gpu "${GPU:-}" >"$OUT/e2e_table.txt" 2>&1 ||
    note "e2e: table" FAIL "see $OUT/e2e_table.txt"
  echo "end to end ($OUT/e2e_table.txt):"
  sed 's/^/   /' "$OUT/e2e_table.txt"
}
