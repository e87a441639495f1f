#!/usr/bin/env bash
# The sanitizer build (issue #15, item 13): everything but CUDA built by clang
# with AddressSanitizer + UndefinedBehaviorSanitizer (and libFuzzer coverage),
# then every CPU test suite and the fuzz target over its seed corpus for
# FUZZ_SECONDS (default 60). Any sanitizer report fails the test that hit it.
# scripts/test.sh runs it after the main suites; alone:
#
#   scripts/sanitize.sh                 # build-sanitize/, all CPU suites + 60 s of fuzzing
#   FUZZ_SECONDS=1800 scripts/sanitize.sh -R fuzz_verify_request   # a long fuzz run
#
# Extra arguments go to ctest. Environment: BUILD_DIR (default
# build-sanitize), JOBS, FUZZ_SECONDS.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-sanitize}
JOBS=${JOBS:-$(nproc)}
# Line tables only: a report's stack still names file:line (inlined frames
# too) at less compile and link time than full debug information. The
# suites' own sources at -O0 (the libraries under test keep -O2): clang with
# ASan compiled them in half the time, and they run as fast, but for the
# COMPUTE_BOUND suites, which keep -Og (cmake/SpecverifyHelpers.cmake).
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -gline-tables-only -DNDEBUG" \
    -DCMAKE_CXX_COMPILER=clang++ -DSPECVERIFY_ENABLE_CUDA=OFF \
    -DSPECVERIFY_BUILD_BENCHMARKS=OFF -DSPECVERIFY_SANITIZE=ON -DSPECVERIFY_FUZZ=ON \
    -DSPECVERIFY_TEST_OPTIMIZATION=-O0 \
    -DSPECVERIFY_FUZZ_SECONDS="${FUZZ_SECONDS:-60}" > /dev/null
cmake --build "$BUILD_DIR" -j "$JOBS"
# halt_on_error: a report fails the test. detect_leaks: the servers' and
# gRPC's process-lifetime singletons are not leaks worth a red build; the
# fuzz target keeps leak detection (libFuzzer reports per input).
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=0:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
cd "$BUILD_DIR"
ctest --output-on-failure -j "$JOBS" --timeout 900 "$@"
