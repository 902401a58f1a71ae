#!/usr/bin/env bash
# Installs the Debian 12 packages gearbox needs, only those that are missing.
# Run as root (or with sudo available). Safe to run repeatedly.
set -euo pipefail

pkgs=(cmake g++ make libeigen3-dev libtbb-dev libspdlog-dev libfmt-dev libgtest-dev libgmock-dev
      libbenchmark-dev nlohmann-json3-dev libcli11-dev)
# scripts/fuzz.sh: clang with libFuzzer and the sanitizer runtimes.
pkgs+=(clang libfuzzer-14-dev libclang-rt-14-dev)
# scripts/build.sh links with lld: the sanitized test binary (~450 MB with line tables) links in
# half the time of GNU ld, and CI links about 30 binaries.
pkgs+=(lld)
# The Python module, its tests and `gearbox import` (docs/python.md, docs/import.md); pkg-config
# for the installed-package check.
pkgs+=(python3 python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest python3-onnx
       pkg-config)
# The importer's structure-aware fuzz test (tests/python/test_onnx_fuzz.py) builds ONNX protos
# with hypothesis.
pkgs+=(python3-hypothesis)
# Real networks (issue 20): scripts/export_models.py exports torchvision's ShuffleNetV2,
# ResNet-18 and MobileNetV2 with seeded random weights, and the tests compare gearbox with
# torch; ONNX's own backend node tests come from libonnx-testdata.
pkgs+=(python3-torch python3-torchvision libonnx-testdata)
# The HTML report's browser test (tests/python/test_html_report.py): headless Chromium loads the
# page, checks its DOM and takes a screenshot.
pkgs+=(chromium)
# Bench-only peers (issue 23): bench/kernels_bench.cpp times oneDNN's and OpenBLAS's sgemm in
# the same run as gearbox's MatMul. CMake finds them optionally; the libraries never need them.
pkgs+=(libdnnl-dev libopenblas-dev)
# The ONNX Runtime peer of bench/peers/peers.py (issue 23) is npm's onnxruntime-node
# (scripts/install-peers.sh), which needs node and npm. Only when the commands are missing: a
# NodeSource nodejs already ships npm, and Debian's npm package would conflict with it.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  pkgs+=(nodejs npm)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
