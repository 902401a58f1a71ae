#!/usr/bin/env bash
# Quick start, command 2: install what is missing, build, and run every test: Release, then
# AddressSanitizer + UndefinedBehaviorSanitizer (clang, Debug asserts at -O1), then the tests that
# touch threads under ThreadSanitizer, then the fuzz harnesses (corpus + crash replay and a short
# smoke), which the ASan build has already built.
set -euo pipefail
cd "$(dirname "$0")/.."
# Each stage's header says how long the run has taken so far: CI's budget is 45 minutes on two
# cores, and these are where it goes.
start=$SECONDS
stage() { printf '== %s (at %dm%02ds) ==\n' "$1" $(((SECONDS - start) / 60)) $(((SECONDS - start) % 60)); }
bash scripts/install-deps.sh
jobs=${GEARBOX_JOBS:-$(nproc)}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
# Every gtest run below takes its tests in an order shuffled by this seed (a new one per run,
# unless given): a test that passes only after another fails somewhere. To replay an order:
# GTEST_SHUFFLE=1 GTEST_RANDOM_SEED=<seed> build/bin/gearbox_tests.
export GTEST_SHUFFLE=1 GTEST_RANDOM_SEED=${GTEST_RANDOM_SEED:-$((RANDOM % 99999 + 1))}
echo "gtest order: shuffled, seed $GTEST_RANDOM_SEED (GTEST_SHUFFLE=1 GTEST_RANDOM_SEED=$GTEST_RANDOM_SEED)"
for flavour in release asan; do
  stage "gearbox tests: $flavour"
  bash scripts/build.sh "$flavour"
  dir=build; [ "$flavour" = asan ] && dir=build-asan
  stage "gearbox tests: $flavour built, running the gtest suite"
  if [ "$flavour" = release ]; then
    # As gtest shards, one process each: ctest's one process per test paid gtest's start-up
    # (registering 4,300 parameterised tests) 4,300 times, 4.5 of CI's minutes against half a
    # minute. The shuffled order (GTEST_SHUFFLE, above) is what catches a test that leans on
    # an earlier one's state; `ctest --test-dir build` still runs each test alone.
    # Each test's time is kept for the sanitized run below, which deals its tests to shards by
    # them (scripts/gtest-balance.py): gtest's deal by index left one ASan shard 160 s longer.
    GTEST_SHARD_RECORD=build/tests/gtest-times.json \
      bash scripts/gtest-shards.sh "$dir/bin/gearbox_tests" "$jobs" "$dir/tests"
    # The whole suite again at each lower ISA this CPU has (GEARBOX_ISA, issue 23): what an
    # AVX2 or a baseline x86-64 machine would run, plans and compile decisions included, which
    # the differential tests' own per-ISA loops do not reach.
    detected=$(build/bin/gearbox --version | sed -n 's/.*(detected: \([a-z0-9]*\).*/\1/p')
    lower=()
    case "$detected" in
      avx512) lower=(avx2 baseline) ;;
      avx2) lower=(baseline) ;;
    esac
    for isa in "${lower[@]}"; do
      stage "gearbox tests: release, forced to $isa (GEARBOX_ISA=$isa; this CPU: $detected)"
      GEARBOX_ISA=$isa bash scripts/gtest-shards.sh "$dir/bin/gearbox_tests" "$jobs" "$dir/tests"
    done
  else
    # The sanitized suite as $jobs gtest shards, one process each: ctest's 2,800 processes cost
    # the ASan runtime's start-up each (9.4 of its 29 minutes in CI). Without the two tests that
    # read the source tree and run none of gearbox's code (the include order, the hand-written
    # mode lists): the Release run above reads the same files.
    # The shards are dealt by the Release run's times, heaviest test first to the lightest shard.
    GTEST_FILTER='-Layering.EveryIncludeGoesDownTheLibraryOrder:ModeTable.NoHandWrittenModeListOutsideTheTable' \
      GTEST_SHARD_WEIGHTS=build/tests/gtest-times.json \
      bash scripts/gtest-shards.sh "$dir/bin/gearbox_tests" "$jobs" "$dir/tests"
  fi
  # ---- package step (issue 13): pytest, install + out-of-tree consumer, shared build ----
  if [ "$flavour" = release ]; then stage "package step"; bash scripts/test-package.sh build; fi
  # ---- end of package step ----
  # The peers bench (issue 23), a smoke run: the MLP at batch 1 in every gearbox mode, ONNX
  # Runtime and PyTorch, threads 1 and 2, one call each; it checks that the three agree and
  # that nothing compiled while timed, and asserts no timing. install-peers.sh fails, not skips,
  # when npm cannot reach the registry (it says why).
  if [ "$flavour" = release ]; then
    stage "peers smoke"
    bash scripts/install-peers.sh
    /usr/bin/python3 bench/peers/peers.py --smoke --build build
  fi
  # The pytest suite against the ASan + UBSan module (issue 22), without the torchvision model
  # runs of test_import_models.py (minutes each in a Debug + ASan build) and test_tutorial.py
  # (the tutorial's CLI commands run one by one, 98 of this stage's 247 s on the Zen 5 VM; the
  # sanitized C++ suite drives the same commands' code, and the Release pytest runs the file).
  # Run them with `bash scripts/test-python-asan.sh`, every file, when the budget allows.
  # The ThreadSanitizer build (below) compiles in the background meanwhile: pytest keeps one
  # core busy, the build takes the other and the idle gaps (CI's time budget). Its output goes
  # to a log, shown when it fails.
  if [ "$flavour" = asan ]; then
    stage "pytest against the ASan + UBSan module (the tsan build in the background)"
    tsan_log=$(mktemp /tmp/gearbox-tsan-build.XXXXXX)
    bash scripts/build.sh tsan >"$tsan_log" 2>&1 &
    tsan_pid=$!
    trap 'kill "$tsan_pid" 2>/dev/null || true' EXIT
    bash scripts/test-python-asan.sh build-asan --ignore=tests/python/test_import_models.py \
      --ignore=tests/python/test_tutorial.py tests/python
  fi
done
# ThreadSanitizer: the tests that touch threads (the sharded kernel cache under concurrent
# lookups, the stream device, kernel_meta, sessions in every mode, the parallel gear compile and
# the bundle precompile). The tsan build runs gearbox's parallelFor on std::threads, not oneTBB:
# Debian's libtbb is not built with TSan (compiler/parallel_for.h, docs/hardening.md).
stage "gearbox tests: tsan (waiting for its build)"
rc=0
wait "$tsan_pid" || rc=$?
trap - EXIT
if [ $rc -ne 0 ]; then cat "$tsan_log" >&2; echo "tsan build failed" >&2; exit 1; fi
tail -n 1 "$tsan_log"
rm -f "$tsan_log"
stage "gearbox tests: tsan built, running the thread tests"
tsan_filter=${TSAN_TEST_FILTER:-ForkJoin*:KernelCache*:BatchTiles*:*Stream*:KernelMeta*:Session*:Modes*:Geared*:Precompile*:Bundle*:Sweep.SameGridSameBytes:Sweep.AFailingPointIsARow}
# The TSan binary holds only some test files (tests/CMakeLists.txt, THREAD_TEST_SRC): the filter
# must select the same tests in it as in the full Release suite, or a thread test was added to a
# file the list does not name.
list_tests() { "$1" --gtest_list_tests --gtest_filter="$tsan_filter" | grep -c '^  '; }
want=$(list_tests build/bin/gearbox_tests)
have=$(TSAN_OPTIONS=report_bugs=0 list_tests build-tsan/bin/gearbox_thread_tests)
if [ "$want" != "$have" ]; then
  echo "tsan: the filter selects $want tests in gearbox_tests but $have in gearbox_thread_tests;" \
    "add the file holding the missing ones to THREAD_TEST_SRC in tests/CMakeLists.txt" >&2
  exit 1
fi
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp"
build-tsan/bin/gearbox_thread_tests --gtest_filter="$tsan_filter"
stage "gearbox fuzz: replay + ${FUZZ_SECONDS:-10}s smoke per target"
bash scripts/fuzz.sh
stage "gearbox tests: all flavours passed"
