#!/usr/bin/env bash
# Runs a GoogleTest binary as N shards in parallel (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX), one
# process each, from DIR (where ctest would run it); prints each shard's log in shard order and
# fails when any shard fails or runs over the time limit (GTEST_SHARD_TIMEOUT seconds, 1800).
# Usage: bash scripts/gtest-shards.sh BINARY N [DIR]
set -euo pipefail
bin=$(realpath "$1")
n=$2
dir=${3:-.}
limit=${GTEST_SHARD_TIMEOUT:-1800}
logs=$(mktemp -d /tmp/gearbox-shards.XXXXXX)
trap 'rm -rf "$logs"' EXIT
cd "$dir"
pids=()
for ((i = 0; i < n; i++)); do
  GTEST_TOTAL_SHARDS=$n GTEST_SHARD_INDEX=$i timeout "$limit" "$bin" --gtest_brief=1 \
    >"$logs/$i.log" 2>&1 &
  pids+=($!)
done
failed=0
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
done
exit "$failed"
