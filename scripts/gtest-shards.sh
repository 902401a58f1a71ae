#!/usr/bin/env bash
# Runs a GoogleTest binary as shards (GTEST_TOTAL_SHARDS/GTEST_SHARD_INDEX), one process each, at
# most N at a time, from DIR (where ctest would run it); prints each shard's log in shard order
# and fails when any shard fails or runs over the time limit (GTEST_SHARD_TIMEOUT seconds, 1800).
# Usage: bash scripts/gtest-shards.sh BINARY N [DIR]
#
# GTEST_SHARDS shards in all (8 per process slot unless set), each started when a slot frees
# up. gtest's shards take every Nth test, and the sanitized suite's times are heavy-tailed (a
# few tests of 20-60 s among 4,300 mostly under 0.1 s): two shards on two cores came out 317 and
# 236 s in CI, the second core idle for the difference. Sixteen smaller shards in a queue end
# within a small shard of each other, for one process start-up each (about a second under ASan).
set -euo pipefail
bin=$(realpath "$1")
n=$2
dir=${3:-.}
limit=${GTEST_SHARD_TIMEOUT:-1800}
total=${GTEST_SHARDS:-$((8 * n))}
if ! [[ "$n" =~ ^[1-9][0-9]*$ && "$total" =~ ^[1-9][0-9]*$ ]]; then
  echo "gtest-shards.sh: N and GTEST_SHARDS must be positive integers" >&2
  exit 2
fi
logs=$(mktemp -d /tmp/gearbox-shards.XXXXXX)
trap 'rm -rf "$logs"' EXIT
cd "$dir"
running=0
for ((i = 0; i < total; i++)); do
  if [ "$running" -ge "$n" ]; then
    wait -n || true # each shard's status is in its .rc file
    running=$((running - 1))
  fi
  (
    rc=0
    GTEST_TOTAL_SHARDS=$total GTEST_SHARD_INDEX=$i timeout "$limit" "$bin" --gtest_brief=1 \
      >"$logs/$i.log" 2>&1 || rc=$?
    echo "$rc" >"$logs/$i.rc"
  ) &
  running=$((running + 1))
done
wait
failed=0
for ((i = 0; i < total; i++)); do
  rc=$(cat "$logs/$i.rc" 2>/dev/null || echo "no status")
  echo "== shard $((i + 1)) of $total: exit $rc =="
  # --gtest_brief prints failures and the summary only; a failed shard's log is shown whole
  # (a sanitizer report, a timeout).
  if [ "$rc" != 0 ]; then
    cat "$logs/$i.log"
    failed=1
  else
    tail -n 2 "$logs/$i.log"
  fi
done
exit "$failed"
