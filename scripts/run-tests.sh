#!/usr/bin/env bash
# Runs every test: unit, runtime and Python tests and the benchmarks' smoke
# modes (ctest; label bench-smoke), and the lit suite (with test/Docs, the
# documented commands, and test/Fuzz, a bounded mutation fuzzer run), and
# the quick sanitizer run (scripts/sanitize.sh --quick: the runtime, .npy
# reader and layout unit tests under ASan + UBSan + LSan;
# FSDP_SKIP_SANITIZE=1 skips it).
# Prints each runner's summary line; exits non-zero if any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
echo "== ctest (unit, runtime, python) =="
ctest --test-dir build --output-on-failure -j "${FSDP_JOBS:-2}" || status=1
echo "== lit =="
cmake --build build --target check-fsdp || status=1
if [ "${FSDP_SKIP_SANITIZE:-0}" != 1 ]; then
  echo "== sanitizers (quick) =="
  scripts/sanitize.sh --quick || status=1
fi
exit $status
