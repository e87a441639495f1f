#!/usr/bin/env bash
# The README's test command: installs what is missing, builds everything
# (CUDA sources included when nvcc is present) and runs every test with CTest.
# GPU tests skip visibly where no GPU is visible. Then the sanitizer build
# (scripts/sanitize.sh): every CPU suite again under AddressSanitizer +
# UndefinedBehaviorSanitizer, and the request-path fuzz target for
# FUZZ_SECONDS (default 60). SKIP_SANITIZE=1 skips that second half.
#
# The 2-minute soak (label "soak") runs alone among the suites, so that its
# load skews no other suite's timing; with the sanitizer half it runs beside
# the sanitizer *build*, which has nothing timing-sensitive, instead of on its
# own (about 2 of CI's minutes), and the sanitizer suites start once both are
# done. Its output follows the build's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
build_dir=${BUILD_DIR:-build}
jobs=${JOBS:-$(nproc)}
if [ "${SKIP_SANITIZE:-0}" = 1 ]; then
  (cd "$build_dir" && ctest --output-on-failure -j "$jobs" --timeout 600)
  exit 0
fi
(cd "$build_dir" && ctest --output-on-failure -j "$jobs" --timeout 600 -LE soak)
soak_log=$(mktemp -t specverify-soak-ctest.XXXXXX)
(cd "$build_dir" && ctest --output-on-failure --timeout 600 -L soak) > "$soak_log" 2>&1 &
soak_pid=$!
# Never leave the soak (and the servers it started) behind: a failed build
# still waits for it, and it ends by itself.
trap 'wait "$soak_pid" 2>/dev/null || true' EXIT
BUILD_DIR=build-sanitize SANITIZE_BUILD_ONLY=1 scripts/sanitize.sh
soak_rc=0
wait "$soak_pid" || soak_rc=$?
trap - EXIT
cat "$soak_log"
rm -f "$soak_log"
if [ "$soak_rc" -ne 0 ]; then
  echo "test.sh: the soak failed (exit $soak_rc)" >&2
  exit 1
fi
BUILD_DIR=build-sanitize scripts/sanitize.sh
