#!/usr/bin/env bash
# The package checks (issue 13), run by scripts/test.sh after the Release build:
#   1. pytest: the Python bindings, the ONNX importer and the docs' examples (tests/python);
#   2. cmake --install into a temporary prefix; nothing installed may point back into the
#      source or build tree;
#   3. examples/consumer, copied out of the tree, built against that prefix alone with
#      find_package(gearbox CONFIG REQUIRED), and run; the same main.cpp built with pkg-config;
#   4. the same with BUILD_SHARED_LIBS=ON (libraries and CLI only), unless GEARBOX_TEST_SHARED=0.
# Usage: bash scripts/test-package.sh [build-dir]   (default build/, already built)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
build=${1:-build}
jobs=${GEARBOX_JOBS:-$(nproc)}
py=/usr/bin/python3  # Debian's interpreter: python3-numpy, -pytest and -onnx live there
tmp=$(mktemp -d /tmp/gearbox-package.XXXXXX)
# A failing step stops the background shared build (below) before the temporary files go.
trap '[ -n "${shared_pid:-}" ] && kill "$shared_pid" 2>/dev/null; wait; rm -rf "$tmp"' EXIT

# The shared-library build (step 4) compiles in the background while pytest, which keeps one
# core busy, and the static checks run: CI's time budget (scripts/test.sh).
shared=${GEARBOX_TEST_SHARED:-1}
shared_pid=""
if [ "$shared" != 0 ]; then
  launcher=()
  # ccache as in scripts/build.sh: not in CI, where every compile of a fresh clone misses.
  if command -v ccache >/dev/null 2>&1 && [ "${CCACHE_DISABLE:-0}" = 0 ] && [ "${CI:-}" != true ]; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  # Compiled at -O0 by clang: this build checks what is installed and how a consumer links and
  # runs against it, not speed (the Release build above is the same code at -O3, by GCC), and
  # clang compiles this code at -O0 faster. A unity build (as scripts/build.sh's sanitized
  # flavours): 150 s of CPU instead of 315 on the Zen 5 VM. Linked with lld when installed, as
  # scripts/build.sh does. The consumer is built by the default compiler.
  ld=""
  if command -v ld.lld >/dev/null 2>&1; then ld=-fuse-ld=lld; fi
  # A build-shared/ that GCC configured (before this build was clang's) starts again.
  if [ -f build-shared/CMakeCache.txt ] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang' build-shared/CMakeCache.txt; then
    rm -rf build-shared
  fi
  cmake -S . -B build-shared -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_FLAGS_RELEASE=-O0 -DNDEBUG" \
    "-DCMAKE_CXX_COMPILER=$(command -v clang++ || echo clang++)" \
    -DBUILD_SHARED_LIBS=ON -DGEARBOX_BUILD_TESTS=OFF -DGEARBOX_BUILD_BENCH=OFF \
    -DGEARBOX_BUILD_PYTHON=OFF "-DCMAKE_SHARED_LINKER_FLAGS=$ld" "-DCMAKE_EXE_LINKER_FLAGS=$ld" \
    -DCMAKE_UNITY_BUILD=ON \
    "${launcher[@]}" >/dev/null
  # The compiler's output goes to a log, shown only when the build fails.
  cmake --build build-shared --target gearbox -j "$jobs" >"$tmp/shared-build.log" 2>&1 &
  shared_pid=$!
fi

echo "== package: pytest (tests/python) =="
set +e
PYTHONPATH="$repo/$build/python" GEARBOX_BUILD_DIR="$repo/$build" \
  "$py" -m pytest -q -p no:cacheprovider tests/python
rc=$?
set -e
# pytest exits 5 when it collected no test: that is a failure here, never a pass.
if [ $rc -eq 5 ]; then echo "package: pytest collected no tests" >&2; exit 1; fi
if [ $rc -ne 0 ]; then exit $rc; fi

# Builds the consumer from a copy outside the tree against prefix $1, runs it; then the same
# main.cpp through pkg-config.
check_consumer() {
  local prefix=$1 name=$2
  if grep -rIl -e "$repo" "$prefix/lib/cmake" "$prefix/lib/pkgconfig" "$prefix/include" >/dev/null 2>&1; then
    echo "package: the installed files refer to the source tree:" >&2
    grep -rIl -e "$repo" "$prefix/lib/cmake" "$prefix/lib/pkgconfig" "$prefix/include" >&2
    exit 1
  fi
  cp -r examples/consumer "$tmp/consumer-$name"
  (cd "$tmp" && cmake -S "consumer-$name" -B "consumer-$name/build" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_PREFIX_PATH="$prefix" >/dev/null && cmake --build "consumer-$name/build" -j "$jobs" >/dev/null)
  "$tmp/consumer-$name/build/consumer"
  local cflags libs
  cflags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags gearbox)
  libs=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --libs gearbox)
  # shellcheck disable=SC2086
  g++ -O1 $cflags "$tmp/consumer-$name/main.cpp" -o "$tmp/consumer-$name/consumer-pc" $libs \
    -Wl,-rpath,"$prefix/lib"
  "$tmp/consumer-$name/consumer-pc"
  "$prefix/bin/gearbox" --version
}

echo "== package: install (static libraries) and the out-of-tree consumer =="
cmake --install "$build" --prefix "$tmp/static" >/dev/null
check_consumer "$tmp/static" static
PYTHONPATH="$tmp/static/lib/gearbox/python" "$py" -c \
  'import gearbox; print("installed python module: gearbox", gearbox.__version__)'

if [ "$shared" != 0 ]; then
  echo "== package: BUILD_SHARED_LIBS=ON, install and the out-of-tree consumer =="
  rc=0
  wait "$shared_pid" || rc=$?
  shared_pid=""
  if [ $rc -ne 0 ]; then
    cat "$tmp/shared-build.log" >&2
    exit 1
  fi
  cmake --install build-shared --prefix "$tmp/shared" >/dev/null
  ls "$tmp/shared/lib/"libgearbox_executor.so* >/dev/null
  check_consumer "$tmp/shared" shared
  # The consumer really uses the shared libraries of the prefix. ldd's output is read whole
  # first: under pipefail, `ldd | grep -q` fails when grep exits at its match before ldd has
  # written the rest (SIGPIPE), which is what stop 33's CI run died of.
  deps=$(ldd "$tmp/consumer-shared/build/consumer")
  if ! grep -qF "$tmp/shared/lib/libgearbox_executor.so" <<<"$deps"; then
    echo "package: the shared consumer does not load the prefix's libgearbox_executor.so:" >&2
    echo "$deps" >&2
    exit 1
  fi
fi
echo "== package: all checks passed =="
