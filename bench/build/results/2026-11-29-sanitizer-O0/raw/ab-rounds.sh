#!/usr/bin/env bash
# Build both sanitizer trees (no tests), then alternate their ctest runs.
set -uo pipefail
for d in /tmp/abA /tmp/abB; do
  (cd $d && BUILD_DIR=build-sanitize scripts/sanitize.sh -R NOTHING_MATCHES_THIS > /tmp/$(basename $d)-build.log 2>&1)
  echo "built $d rc=$?"
done
export ASAN_OPTIONS=halt_on_error=1:detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
for round in 1 2; do
  for d in /tmp/abA /tmp/abB; do
    (cd $d/build-sanitize && ctest -j 2 --timeout 900 > /tmp/$(basename $d)-ctest$round.log 2>&1)
    echo "$d round $round: $(grep 'Total Test time' /tmp/$(basename $d)-ctest$round.log) $(grep 'tests passed' /tmp/$(basename $d)-ctest$round.log)"
  done
done
