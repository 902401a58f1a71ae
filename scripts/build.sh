#!/usr/bin/env bash
# Configures and builds one flavour of gearbox.
#   scripts/build.sh release   -> build/       (Release, benches; the CLI is build/bin/gearbox)
#   scripts/build.sh asan      -> build-asan/  (Debug + AddressSanitizer + UBSan, no benches)
#   scripts/build.sh tsan      -> build-tsan/  (ThreadSanitizer, -O1, tests only; scripts/test.sh
#                                 runs the tests that touch threads, TSAN_TEST_FILTER below)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=${GEARBOX_JOBS:-$(nproc)}
case "$flavour" in
  release) dir=build; args=(-DCMAKE_BUILD_TYPE=Release) ;;
  # The Python module too: scripts/test-python-asan.sh runs the pytest suite against it.
  # -g1 (line tables, no locals): enough for the sanitizers' stack traces, and a smaller, faster
  # build than -g.
  asan) dir=build-asan; args=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1" -DGEARBOX_SANITIZE=ON -DGEARBOX_BUILD_BENCH=OFF -DGEARBOX_BUILD_PYTHON=ON) ;;
  # Flags rather than a CMake option: the top-level CMakeLists stays as it is, and -O1 keeps the
  # TSan run of the threaded tests short.
  tsan) dir=build-tsan; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBOX_BUILD_BENCH=OFF -DGEARBOX_BUILD_PYTHON=OFF
          -DGEARBOX_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=thread -O1 -g -fno-omit-frame-pointer -DGEARBOX_STD_THREADS"
          "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g") ;;
  *) echo "usage: scripts/build.sh release|asan|tsan" >&2; exit 2 ;;
esac
# ccache, when installed, makes rebuilds in several work trees cheap; CI has none and needs none.
if command -v ccache >/dev/null 2>&1; then args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" "${args[@]}" ${GEARBOX_CMAKE_ARGS:-} >/dev/null
cmake --build "$dir" -j "$jobs"
