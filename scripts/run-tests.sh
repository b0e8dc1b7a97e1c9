#!/usr/bin/env bash
# Runs every test: unit, runtime and Python tests (ctest) and the lit suite.
# Prints each runner's summary line; exits non-zero if any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
status=0
echo "== ctest (unit, runtime, python) =="
ctest --test-dir build --output-on-failure -j "${FSDP_JOBS:-2}" || status=1
echo "== lit =="
cmake --build build --target check-fsdp || status=1
exit $status
