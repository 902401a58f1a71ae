#!/usr/bin/env bash
# Builds the libFuzzer harnesses (tests/fuzz/) in build-asan/, the clang ASan + UBSan flavour
# whose libraries carry libFuzzer's coverage instrumentation (scripts/build.sh asan; after the
# sanitized suite has been built there, only the harnesses are left to link), replays every seed
# (tests/fuzz/corpus/<target>/) and every crash found so far (tests/fuzz/crashes/<target>/) as
# regression inputs, then fuzzes each target for a short smoke run.
#   FUZZ_SECONDS=10  seconds of fuzzing per target (0: replay only)
#   FUZZ_TARGETS="npy trace"  a subset (default: all)
# For a long run of one target, keeping what it finds:
#   scripts/fuzz.sh  (once, to build)
#   build-asan/bin/fuzz_npy -max_total_time=3600 -max_len=65536 build-asan/corpus/npy \
#     tests/fuzz/corpus/npy
# A crash is written as crash-<sha1> in the current directory: copy it to
# tests/fuzz/crashes/<target>/ with the fix, so every later run replays it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${FUZZ_SECONDS:-10}
jobs=${GEARBOX_JOBS:-$(nproc)}
targets=${FUZZ_TARGETS:-"ir_text npy trace gears_json cost_model kernel_descriptor bundle op_info recompile_report cost_override assert gears_report"}
build=()
for t in $targets; do build+=("fuzz_$t"); done
bash scripts/build.sh asan "${build[@]}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in $targets; do
  bin=build-asan/bin/fuzz_$t
  echo "== fuzz $t: replay corpus and crashes =="
  # Every file once (-runs=0 over files): the regression part.
  mapfile -t files < <(find "tests/fuzz/corpus/$t" "tests/fuzz/crashes/$t" -type f ! -name .gitkeep)
  if [ ${#files[@]} -gt 0 ]; then "$bin" -runs=0 "${files[@]}" 2>&1 | tail -n 2; fi
done
# The smoke runs, $jobs targets at a time (each is one process on one core). Each writes its own
# log and exit code, printed in target order afterwards, so the output does not depend on timing.
smoke() {
  local t=$1 work=build-asan/corpus/$1 log=build-asan/fuzz_$1.log rc=0
  mkdir -p "$work"
  "build-asan/bin/fuzz_$t" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  echo "$rc" >"build-asan/fuzz_$t.rc"
}
if [ "$secs" -gt 0 ]; then
  running=0
  for t in $targets; do
    rm -f "build-asan/fuzz_$t.rc"
    if [ "$running" -ge "$jobs" ]; then wait -n || true; running=$((running - 1)); fi
    smoke "$t" &
    running=$((running + 1))
  done
  wait
  failed=0
  for t in $targets; do
    echo "== fuzz $t: ${secs}s smoke =="
    log=build-asan/fuzz_$t.log
    if [ "$(cat "build-asan/fuzz_$t.rc" 2>/dev/null)" != 0 ]; then
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
