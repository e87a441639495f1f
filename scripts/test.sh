#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything
# (CUDA sources included when nvcc is present) and runs every test with CTest.
# GPU tests skip visibly where no GPU is visible. Then the sanitizer build
# (scripts/sanitize.sh): every CPU suite again under AddressSanitizer +
# UndefinedBehaviorSanitizer, and the request-path fuzz target for
# FUZZ_SECONDS (default 60). SKIP_SANITIZE=1 skips that second half.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600)
if [ "${SKIP_SANITIZE:-0}" != 1 ]; then
  BUILD_DIR=build-sanitize scripts/sanitize.sh
fi
