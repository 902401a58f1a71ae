#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, and run every test twice:
# Release, then Debug with AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=${GEARBOX_JOBS:-$(nproc)}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
for flavour in release asan; do
  echo "== gearbox tests: $flavour =="
  bash scripts/build.sh "$flavour"
  dir=build; [ "$flavour" = asan ] && dir=build-asan
  ctest --test-dir "$dir" -j "$jobs" --output-on-failure --timeout 600
  # ---- package step (issue 13): pytest, install + out-of-tree consumer, shared build ----
  if [ "$flavour" = release ]; then bash scripts/test-package.sh build; fi
  # ---- end of package step ----
done
echo "== gearbox tests: all flavours passed =="
