#!/usr/bin/env bash
# Quick start, command 1: install what is missing, build, and run the main job -- the mode
# comparison on a bundled model.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release
./build/bin/gearbox run examples/seed001_add.gbx --trace examples/seed001_add.trace.jsonl \
  --mode static --explain
