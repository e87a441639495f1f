#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything
# (CUDA sources included when nvcc is present) and runs every test with CTest.
# GPU tests skip visibly where no GPU is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
