#!/usr/bin/env bash
# Runs a GoogleTest binary as N shards in parallel, one process each, from DIR (where ctest would
# run it); prints each shard's log in shard order and fails when any shard fails or runs over the
# time limit (GTEST_SHARD_TIMEOUT seconds, 1800).
# Usage: bash scripts/gtest-shards.sh BINARY N [DIR]
#   GTEST_SHARD_RECORD=FILE   after a passing run, write each test's time to FILE (JSON)
#   GTEST_SHARD_WEIGHTS=FILE  deal the tests to shards by the times in FILE, heaviest first
#                             (scripts/gtest-balance.py); without it, or before FILE exists,
#                             gtest deals them by index (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX)
# GTEST_FILTER, when set, selects the tests either way.
set -euo pipefail
bin=$(realpath "$1")
n=$2
dir=${3:-.}
limit=${GTEST_SHARD_TIMEOUT:-1800}
here=$(cd "$(dirname "$0")" && pwd)
weights=${GTEST_SHARD_WEIGHTS:+$(realpath -m "$GTEST_SHARD_WEIGHTS")}
record=${GTEST_SHARD_RECORD:+$(realpath -m "$GTEST_SHARD_RECORD")}
logs=$(mktemp -d /tmp/gearbox-shards.XXXXXX)
trap 'rm -rf "$logs"' EXIT
cd "$dir"
dealt=
if [ -n "$weights" ] && [ -f "$weights" ]; then
  "$bin" --gtest_list_tests --gtest_output="json:$logs/listing.json" >/dev/null
  dealt=$(/usr/bin/python3 "$here/gtest-balance.py" deal "$n" "$logs/listing.json" "$weights" \
    "$logs/filter")
  echo "== $dealt tests dealt to $n shards by their times in $weights =="
fi
pids=()
for ((i = 0; i < n; i++)); do
  out=()
  [ -n "$record" ] && out=(--gtest_output="json:$logs/$i.json")
  if [ -n "$dealt" ]; then
    # The shard's filter comes from its flag file; GTEST_FILTER chose the listing above.
    env -u GTEST_FILTER -u GTEST_TOTAL_SHARDS -u GTEST_SHARD_INDEX timeout "$limit" "$bin" \
      --gtest_brief=1 --gtest_flagfile="$logs/filter$i" "${out[@]}" >"$logs/$i.log" 2>&1 &
  else
    GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$limit" "$bin" --gtest_brief=1 "${out[@]}" \
      >"$logs/$i.log" 2>&1 &
  fi
  pids+=($!)
done
failed=0
ran=0
for ((i = 0; i < n; i++)); do
  rc=0
  wait "${pids[$i]}" || rc=$?
  echo "== shard $((i + 1)) of $n: exit $rc =="
  # --gtest_brief prints failures and the summary only; a failed shard's log is shown whole
  # (a sanitizer report, a timeout).
  if [ "$rc" -ne 0 ]; then
    cat "$logs/$i.log"
    failed=1
  else
    tail -n 3 "$logs/$i.log"
  fi
  count=$(sed -n 's/^\[==========\] \([0-9]*\) tests\? from .* ran\..*/\1/p' "$logs/$i.log")
  ran=$((ran + ${count:-0}))
done
# Dealt by name, the shards must together run every listed test once: a name the filter
# syntax misread would drop a test silently.
if [ "$failed" -eq 0 ] && [ -n "$dealt" ] && [ "$ran" -ne "$dealt" ]; then
  echo "gtest-shards: the shards ran $ran tests, but $dealt were listed" >&2
  failed=1
fi
if [ "$failed" -eq 0 ] && [ -n "$record" ]; then
  /usr/bin/python3 "$here/gtest-balance.py" record "$record" "$logs"/[0-9]*.json
fi
exit "$failed"
