# The end-to-end stage of bench/gpu/check.sh for steps compiled ahead of
# time (sourced by check.sh; uses its note and run_logged). docs/AOT.md.
#
# A pack (bench/gpu/pack_aot.py, built where the compiler is) holds step
# libraries, their inputs and the CPU path's results. This stage builds the
# runtime from the pack's sources with CMake (no LLVM, no MLIR), runs each
# step with the LLVM-free runner (python3 -m fsdp_mlir.aot: standard library
# only) on its rank threads, and compares every result with the reference
# (fp32 within the step's rtol, 1e-5). Steps of kind "cpu" run anywhere;
# steps of kind "gpu" need a GPU and are reported as skipped without one.
#
# Variables from check.sh: ROOT, OUT, DRY, AOT_PACK (the pack directory;
# empty: $ROOT when it holds pack.json, else $ROOT/build-gpu-pack).

aot_stage() {
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
  if ! command -v cmake >/dev/null 2>&1; then
    note "e2e: runtime (CMake)" FAIL "cmake not found"
    return
  fi
  # The runtime from source: threads backend (what the CPU steps need);
  # the NCCL backend and CUDA parts come with it when the toolkit is found.
  local rt=$OUT/aot-runtime t0
  t0=$(date +%s)
  if run_logged "runtime (CMake)" "$OUT/build-aot-runtime.log" \
       cmake -S "$pack/runtime" -B "$rt" -DCMAKE_BUILD_TYPE=Release \
         -DFSDPRT_BUILD_TESTS=OFF -DFSDPRT_BUILD_BENCH=OFF -DFSDPRT_ENABLE_MPI=OFF \
         -DFSDPRT_QUANT_BUILD_TESTS=OFF -DFSDPRT_QUANT_BUILD_BENCH=OFF \
         -DFSDPRT_QUANT_ENABLE_CUDA=OFF &&
     run_logged "runtime (CMake)" "$OUT/build-aot-runtime.log" \
       cmake --build "$rt" --target fsdprt -j "${FSDP_JOBS:-4}"; then
    note "e2e: runtime (CMake)" ok "$(( $(date +%s) - t0 )) s, $rt/libfsdprt.so"
  else
    note "e2e: runtime (CMake)" FAIL "see $OUT/build-aot-runtime.log"
    return
  fi
  local lib
  lib=$(find "$rt" -name 'libfsdprt.so' -print -quit)
  # One line per step: name kind library inputs reference steps rtol.
  local steps
  steps=$("$py" -c '
import json, sys
for s in json.load(open(sys.argv[1]))["steps"]:
    print(s["name"], s["kind"], s["library"], s["inputs"], s["reference"], s["steps"], s["rtol"])
' "$pack/pack.json") || { note "e2e: AOT steps" FAIL "cannot read $pack/pack.json"; return; }
  local name kind library inputs reference n rtol out rc
  while read -r name kind library inputs reference n rtol; do
    [ -z "$name" ] && continue
    if [ "$kind" = gpu ] && [ "$DRY" = 1 ]; then
      note "e2e: $name (gpu)" skipped "needs a GPU"
      continue
    fi
    out=$OUT/aot-out/$name
    rm -rf "$out"
    mkdir -p "$OUT/aot-out"
    if PYTHONPATH="$pack/python" "$py" -m fsdp_mlir.aot run "$pack/$library" --runtime "$lib" \
         --inputs "$pack/$inputs" --outputs "$out" --steps "$n" --report "$out.json" \
         >"$out.log" 2>&1; then
      if PYTHONPATH="$pack/python" "$py" -m fsdp_mlir.aot compare "$out" "$pack/$reference" \
           --rtol "$rtol" >"$out.compare" 2>&1; then
        note "e2e: $name ($kind)" ok "$n step(s), median $("$py" -c '
import json, sys
r = json.load(open(sys.argv[1]))
ms, world, load = r["median_step_s"] * 1e3, r["world"], r["load_s"]
print(f"{ms:.2f} ms on {world} rank(s), load {load:.3f} s; matches the CPU path (rtol {sys.argv[2]})")
' "$out.json" "$rtol")"
      else
        sed 's/^/   /' "$out.compare" | head -20
        note "e2e: $name ($kind)" FAIL "results differ from the CPU path (see $out.compare)"
      fi
    else
      rc=$?
      tail -5 "$out.log" | sed 's/^/   /'
      note "e2e: $name ($kind)" FAIL "exit $rc (see $out.log)"
    fi
  done <<<"$steps"
  if ! grep -q '"kind": "gpu"' "$pack/pack.json"; then
    note "e2e: GPU steps" skipped "the pack has no compute=gpu steps yet"
  fi
}
