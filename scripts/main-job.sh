#!/usr/bin/env bash
# Quick start, command 1: install what is missing, build, and run the main job -- the mode
# comparison on a bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release
# Every mode -- eager, static, dynamic, automatic dynamic and geared (with pad-up) -- over the
# same trace and data, side by side.
./build/bin/gearbox compare examples/four_ops.gbx --trace examples/four_ops.trace.jsonl \
  --gears '{"x": {"0": [1, 2, 4, 8]}, "y": {"0": [1, 2, 4, 8]}}' --gear-fallback pad
