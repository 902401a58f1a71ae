#!/usr/bin/env bash
# Configures and builds one flavour of gearbox.
#   scripts/build.sh release   -> build/       (Release, benches; the CLI is build/bin/gearbox)
#   scripts/build.sh asan      -> build-asan/  (Debug + AddressSanitizer + UBSan, no benches)
#   scripts/build.sh tsan      -> build-tsan/  (ThreadSanitizer, -O1; only the libraries, the CLI
#                                 and gearbox_thread_tests, the files holding the tests that touch
#                                 threads, which scripts/test.sh runs: TSAN_TEST_FILTER there)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
jobs=${GEARBOX_JOBS:-$(nproc)}
# lld (scripts/install-deps.sh) links the sanitized test binary in half GNU ld's time.
ld=""
if command -v ld.lld >/dev/null 2>&1; then ld=-fuse-ld=lld; fi
case "$flavour" in
  release) dir=build; args=(-DCMAKE_BUILD_TYPE=Release) ;;
  # The Python module too: scripts/test-python-asan.sh runs the pytest suite against it.
  # -g1 (line tables, no locals): enough for the sanitizers' stack traces, and a smaller, faster
  # build than -g.
  asan) dir=build-asan; args=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g1" -DGEARBOX_SANITIZE=ON -DGEARBOX_BUILD_BENCH=OFF -DGEARBOX_BUILD_PYTHON=ON) ;;
  # Flags rather than a CMake option: the top-level CMakeLists stays as it is, and -O1 keeps the
  # TSan run of the threaded tests short; -g1 (line tables) is all TSan's reports print.
  tsan) dir=build-tsan; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEARBOX_BUILD_BENCH=OFF -DGEARBOX_BUILD_PYTHON=OFF
          -DGEARBOX_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=thread -O1 -g1 -fno-omit-frame-pointer -DGEARBOX_STD_THREADS"
          "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread $ld" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1") ;;
  *) echo "usage: scripts/build.sh release|asan|tsan" >&2; exit 2 ;;
esac
args+=("-DCMAKE_SHARED_LINKER_FLAGS=$ld" "-DCMAKE_MODULE_LINKER_FLAGS=$ld")
[ "$flavour" = tsan ] || args+=("-DCMAKE_EXE_LINKER_FLAGS=$ld")
# ccache, when installed (and not disabled), makes rebuilds in several work trees cheap; CI has
# none and needs none. ccache does not cache compiles that use a precompiled header, so a ccache
# build goes without them (GEARBOX_PCH); without ccache the test binaries precompile theirs.
if command -v ccache >/dev/null 2>&1 && [ "${CCACHE_DISABLE:-0}" = 0 ]; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DGEARBOX_PCH=OFF)
else
  args+=(-DGEARBOX_PCH=ON)
fi
cmake -S . -B "$dir" "${args[@]}" ${GEARBOX_CMAKE_ARGS:-} >/dev/null
targets=()
[ "$flavour" = tsan ] && targets=(--target gearbox_thread_tests)
cmake --build "$dir" -j "$jobs" "${targets[@]}"
