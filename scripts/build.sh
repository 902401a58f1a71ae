#!/usr/bin/env bash
# Configures and builds one flavour of gearbox.
#   scripts/build.sh release   -> build/       (Release, benches; the CLI is build/bin/gearbox)
#   scripts/build.sh asan      -> build-asan/  (Debug + AddressSanitizer + UBSan, no benches)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=${GEARBOX_JOBS:-$(nproc)}
case "$flavour" in
  release) dir=build; args=(-DCMAKE_BUILD_TYPE=Release) ;;
  asan) dir=build-asan; args=(-DCMAKE_BUILD_TYPE=Debug -DGEARBOX_SANITIZE=ON -DGEARBOX_BUILD_BENCH=OFF) ;;
  *) echo "usage: scripts/build.sh release|asan" >&2; exit 2 ;;
esac
cmake -S . -B "$dir" "${args[@]}" >/dev/null
cmake --build "$dir" -j "$jobs"
