#!/usr/bin/env bash
# The pytest suite (tests/python) against the Python module built with AddressSanitizer +
# UndefinedBehaviorSanitizer (issue 22). CPython is not instrumented, so the ASan runtime is
# preloaded (LD_PRELOAD) ahead of everything else; the module, and the gearbox CLI the tests run
# as a subprocess, come from the sanitizer build. A sanitizer report aborts the test process,
# which fails the run.
#   bash scripts/test-python-asan.sh [build-dir [pytest args...]]   (default build-asan/, and
#   every test file; e.g. `... build-asan tests/python/test_hostile_surfaces.py` for one file)
# The build must have the module: scripts/build.sh asan turns GEARBOX_BUILD_PYTHON on.
# Leak detection is off: CPython itself does not free everything at exit, and those reports
# would drown gearbox's (the C++ suite runs with leak detection on, scripts/test.sh).
# tests/python/test_html_report.py is left out: Chromium under the preloaded ASan runtime does
# not start (its screenshot times out). Torch loads under the preloaded runtime; its model
# tests run, slowly (the Debug + ASan kernels).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-asan}
shift || true
if [ ! -d "$build/python/gearbox" ]; then
  echo "test-python-asan: $build/python/gearbox is missing: run scripts/build.sh asan" >&2
  exit 1
fi
# The runtime of the compiler that built the tree: clang's shared ASan runtime holds UBSan's
# handlers and the coverage hooks of GEARBOX_FUZZ (scripts/build.sh asan); GCC's are two.
cxx=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$build/CMakeCache.txt")
# (--version read whole first: under pipefail `| grep -q` can fail by SIGPIPE when it matches.)
cxx_version=$("$cxx" --version)
if grep -q clang <<<"$cxx_version"; then
  preload=("$("$cxx" -print-runtime-dir)/libclang_rt.asan-x86_64.so")
else
  preload=("$(g++ -print-file-name=libasan.so)" "$(g++ -print-file-name=libubsan.so)")
fi
for lib in "${preload[@]}"; do
  [ -e "$lib" ] || { echo "test-python-asan: no $lib ($cxx's sanitizer runtime)" >&2; exit 1; }
done
py=/usr/bin/python3  # Debian's interpreter: numpy, pytest, onnx, hypothesis live there
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:halt_on_error=1:detect_odr_violation=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
set +e
# Arguments (test files, -k, -x, --durations=N) replace the default selection, tests/python.
if [ $# -eq 0 ]; then set -- tests/python; fi
# GEARBOX_SANITIZED tells the tests which run this is (tests/python/test_transformer_exports.py
# leaves its whole-trace acceptance runs to the Release pytest); the preloaded runtime's name
# does not: GCC's is libasan, clang's libclang_rt.asan.
GEARBOX_SANITIZED=1 LD_PRELOAD="$(IFS=:; echo "${preload[*]}")" PYTHONPATH="$PWD/$build/python" \
  GEARBOX_BUILD_DIR="$PWD/$build" \
  "$py" -m pytest -q -p no:cacheprovider --ignore=tests/python/test_html_report.py "$@"
rc=$?
set -e
if [ $rc -eq 5 ]; then echo "test-python-asan: pytest collected no tests" >&2; exit 1; fi
exit $rc
