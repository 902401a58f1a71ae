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
# ccache, when installed, makes rebuilds in several work trees cheap; CI has none and needs none.
if command -v ccache >/dev/null 2>&1; then args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" "${args[@]}" ${GEARBOX_CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j "$jobs"
