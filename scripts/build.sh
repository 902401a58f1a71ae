#!/usr/bin/env bash
# Configures and builds one flavour of gearbox.
#   scripts/build.sh release   -> build/       (Release, benches; the CLI is build/bin/gearbox)
#   scripts/build.sh asan      -> build-asan/  (clang, Debug asserts at -O1, AddressSanitizer +
#                                 UBSan, no benches; the Python module and the libFuzzer
#                                 harnesses too, which scripts/fuzz.sh runs)
#   scripts/build.sh tsan      -> build-tsan/  (ThreadSanitizer, -O1; only the libraries, the CLI
#                                 and gearbox_thread_tests, the files holding the tests that touch
#                                 threads, which scripts/test.sh runs: TSAN_TEST_FILTER there)
#   scripts/build.sh FLAVOUR TARGET...  builds only those targets
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=${1:-release}
shift || true
jobs=${GEARBOX_JOBS:-$(nproc)}
# lld (scripts/install-deps.sh) links the sanitized test binary in half GNU ld's time.
ld=""
if command -v ld.lld >/dev/null 2>&1; then ld=-fuse-ld=lld; fi
case "$flavour" in
  release) dir=build; args=(-DCMAKE_BUILD_TYPE=Release) ;;
  # The Python module too: scripts/test-python-asan.sh runs the pytest suite against it.
  # clang, so the libFuzzer harnesses (GEARBOX_FUZZ) come from this tree instead of a third
  # sanitized build of every library. -O1 with Debug's asserts: a sanitized suite at -O0 ran
  # several times slower for the same checks. Line tables are all a sanitizer report prints.
  asan) dir=build-asan; args=(-DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_COMPILER=$(command -v clang++ || echo clang++)"
          "-DCMAKE_CXX_FLAGS_DEBUG=-O1 -gline-tables-only" -DGEARBOX_SANITIZE=ON -DGEARBOX_FUZZ=ON
          -DGEARBOX_BUILD_BENCH=OFF -DGEARBOX_BUILD_PYTHON=ON) ;;
  # Flags rather than a CMake option: the top-level CMakeLists stays as it is, and -O1 keeps the
  # TSan run of the threaded tests short; -g1 (line tables) is all TSan's reports print.
  # clang, as for asan: it compiles this code faster than GCC at -O1.
  tsan) dir=build-tsan; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_COMPILER=$(command -v clang++ || echo clang++)"
          -DGEARBOX_BUILD_BENCH=OFF -DGEARBOX_BUILD_PYTHON=OFF
          -DGEARBOX_NATIVE=OFF "-DCMAKE_CXX_FLAGS=-fsanitize=thread -O1 -g1 -fno-omit-frame-pointer -DGEARBOX_STD_THREADS"
          "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread $ld" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1") ;;
  *) echo "usage: scripts/build.sh release|asan|tsan" >&2; exit 2 ;;
esac
# The sanitized flavours compile the libraries as unity builds (CMAKE_UNITY_BUILD: eight files
# to a translation unit; not the kernels, executor/CMakeLists.txt, nor the tests): front-end
# work on the same headers done once per eight files instead of once per file. clang at -O0
# built the libraries and CLI in 150 s of CPU instead of 315 (scripts/test-package.sh). Release
# is what users build and what the benchmarks measure: one file at a time, as shipped.
[ "$flavour" = release ] || args+=(-DCMAKE_UNITY_BUILD=ON)
args+=("-DCMAKE_SHARED_LINKER_FLAGS=$ld" "-DCMAKE_MODULE_LINKER_FLAGS=$ld")
[ "$flavour" = tsan ] || args+=("-DCMAKE_EXE_LINKER_FLAGS=$ld")
# ccache, when installed (and not disabled), makes rebuilds in several work trees cheap. CI
# (CI=true) goes without it even where a developer installed it on the machine: CI builds a
# fresh clone in a new folder, so every compile misses (the include paths differ), and ccache
# does not cache compiles that use a precompiled header, so a ccache build goes without them
# (GEARBOX_PCH) -- stop 31's CI paid both. Without ccache the test binaries precompile theirs.
if command -v ccache >/dev/null 2>&1 && [ "${CCACHE_DISABLE:-0}" = 0 ] && [ "${CI:-}" != true ]; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DGEARBOX_PCH=OFF)
else
  args+=(-DGEARBOX_PCH=ON)
fi
# A tree configured with another compiler (build-asan was GCC's before it was clang's) cannot
# be reconfigured in place: start it again.
want=$(printf '%s\n' "${args[@]}" | sed -n 's/^-DCMAKE_CXX_COMPILER=//p')
have=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
if [ -n "$have" ] && [ "$(basename "${want:-c++}")" != "$(basename "$have")" ]; then
  echo "build.sh: $dir was configured with $have; reconfiguring it from scratch" >&2
  rm -rf "$dir"
fi
cmake -S . -B "$dir" "${args[@]}" ${GEARBOX_CMAKE_ARGS:-} >/dev/null
targets=()
[ "$flavour" = tsan ] && targets=(--target gearbox_thread_tests)
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$dir" -j "$jobs" "${targets[@]}"
