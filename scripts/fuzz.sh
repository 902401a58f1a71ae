#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/, clang, -fsanitize=fuzzer,address,undefined) in
# build-fuzz/, replays every seed (tests/fuzz/corpus/<target>/) and every crash found so far
# (tests/fuzz/crashes/<target>/) as regression inputs, then fuzzes each target for a short
# smoke run.
#   FUZZ_SECONDS=10  seconds of fuzzing per target (0: replay only)
#   FUZZ_TARGETS="npy trace"  a subset (default: all)
# For a long run of one target, keeping what it finds:
#   scripts/fuzz.sh  (once, to build)
#   build-fuzz/bin/fuzz_npy -max_total_time=3600 -max_len=65536 build-fuzz/corpus/npy \
#     tests/fuzz/corpus/npy
# A crash is written as crash-<sha1> in the current directory: copy it to
# tests/fuzz/crashes/<target>/ with the fix, so every later run replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-10}
jobs=${GEARBOX_JOBS:-$(nproc)}
targets=${FUZZ_TARGETS:-"ir_text npy trace gears_json cost_model kernel_descriptor bundle op_info recompile_report cost_override assert gears_report"}
# Line tables (-gline-tables-only) are all a crash report prints, and a smaller, faster build
# than -g; lld, when installed, links the twelve harnesses.
flags="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -gline-tables-only -O1"
ld=""
if command -v ld.lld >/dev/null 2>&1; then ld=-fuse-ld=lld; fi
args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DGEARBOX_FUZZ=ON
      -DGEARBOX_BUILD_BENCH=OFF -DGEARBOX_BUILD_PYTHON=OFF "-DCMAKE_CXX_FLAGS=$flags"
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only" "-DCMAKE_EXE_LINKER_FLAGS=$ld")
if command -v ccache >/dev/null 2>&1; then args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B build-fuzz "${args[@]}" >/dev/null
build=()
for t in $targets; do build+=(--target "fuzz_$t"); done
cmake --build build-fuzz -j "$jobs" "${build[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in $targets; do
  bin=build-fuzz/bin/fuzz_$t
  echo "== fuzz $t: replay corpus and crashes =="
  # Every file once (-runs=0 over files): the regression part.
  mapfile -t files < <(find "tests/fuzz/corpus/$t" "tests/fuzz/crashes/$t" -type f ! -name .gitkeep)
  if [ ${#files[@]} -gt 0 ]; then "$bin" -runs=0 "${files[@]}" 2>&1 | tail -n 2; fi
done
# The smoke runs, $jobs targets at a time (each is one process on one core). Each writes its own
# log and exit code, printed in target order afterwards, so the output does not depend on timing.
smoke() {
  local t=$1 work=build-fuzz/corpus/$1 log=build-fuzz/fuzz_$1.log rc=0
  mkdir -p "$work"
  "build-fuzz/bin/fuzz_$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  echo "$rc" >"build-fuzz/fuzz_$t.rc"
}
if [ "$secs" -gt 0 ]; then
  running=0
  for t in $targets; do
    rm -f "build-fuzz/fuzz_$t.rc"
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
    smoke "$t" &
    running=$((running + 1))
  done
  wait
  failed=0
  for t in $targets; do
    echo "== fuzz $t: ${secs}s smoke =="
    log=build-fuzz/fuzz_$t.log
    if [ "$(cat "build-fuzz/fuzz_$t.rc" 2>/dev/null)" != 0 ]; then
      tail -n 60 "$log"
      echo "fuzz $t: FAILED (log: $log; the input is the crash-*/timeout-*/oom-* file above)" >&2
      failed=1
      continue
    fi
    grep -E "^stat::number_of_executed_units|^Done" "$log" || true
  done
  if [ "$failed" -ne 0 ]; then exit 1; fi
fi
echo "== fuzz: all targets passed =="
