#!/usr/bin/env bash
# Installs the ONNX Runtime peer of bench/peers/peers.py (issue 23): npm's onnxruntime-node at
# the version bench/peers/package-lock.json pins, into bench/peers/node_modules (git-ignored).
# Its CPU library is inside the package. --ignore-scripts: the package's install script
# downloads GPU parts from a host these machines cannot reach, and the CPU peer needs none.
# Needs node and npm (scripts/install-deps.sh installs them when missing). Safe to run
# repeatedly: an installed tree at the pinned version is kept.
#
# No network, no peer: if the registry cannot be reached this script FAILS (npm's error, exit
# status non-zero) instead of skipping, so CI's smoke run of the bench (scripts/test.sh) never
# passes silently without ONNX Runtime, and a broken install shows up in this step, named,
# rather than as a confusing failure of the bench.
set -euo pipefail
cd "$(dirname "$0")/../bench/peers"
for tool in node npm; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install-peers: '$tool' not found; run scripts/install-deps.sh first" >&2
    exit 1
  fi
done
want=$(node -p "require('./package.json').dependencies['onnxruntime-node']")
have=$(node -p "try { require('./node_modules/onnxruntime-node/package.json').version } catch (e) { '' }")
if [ "$have" = "$want" ] && node -e "require('onnxruntime-node')" 2>/dev/null; then
  echo "install-peers: onnxruntime-node $have already installed in bench/peers/node_modules"
  exit 0
fi
echo "install-peers: installing onnxruntime-node $want (npm ci --ignore-scripts)"
npm ci --ignore-scripts --no-audit --no-fund
node -e "require('onnxruntime-node')"
echo "install-peers: onnxruntime-node $(node -p "require('./node_modules/onnxruntime-node/package.json').version") installed"
