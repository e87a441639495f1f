#!/usr/bin/env bash
# Build and test time of two commits from fresh clones, one after the other
# on this machine (nothing else should run beside it): scripts/build.sh, the
# main CTest run, then scripts/sanitize.sh (its build and its suites), each
# under /usr/bin/time. The CPU seconds (user + sys) are what the change
# moves; wall time also depends on how well two cores are kept busy.
#
#   bench/build/results/2026-11-27-test-build/run.sh OLD NEW [OUT]
#
# OUT (default a temp dir) gets <commit>-{build,ctest,sanitize}.{time,log}.
set -euo pipefail
OLD=${1:?old commit}
NEW=${2:?new commit}
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
OUT=${3:-$(mktemp -d -t specverify-build-ab.XXXXXX)}
mkdir -p "$OUT"
for rev in "$OLD" "$NEW"; do
  dir=$(mktemp -d -t specverify-clone.XXXXXX)
  git clone -q "$REPO" "$dir"
  git -C "$dir" checkout -q "$rev"
  name=$(git -C "$dir" rev-parse --short HEAD)
  echo "== $name: scripts/build.sh" >&2
  (cd "$dir" && /usr/bin/time -f "$name build wall %e s user %U s sys %S s" -o "$OUT/$name-build.time" \
      scripts/build.sh > "$OUT/$name-build.log" 2>&1)
  echo "== $name: ctest" >&2
  (cd "$dir/build" && /usr/bin/time -f "$name ctest wall %e s user %U s sys %S s" -o "$OUT/$name-ctest.time" \
      ctest -j 2 --timeout 600 > "$OUT/$name-ctest.log" 2>&1)
  echo "== $name: scripts/sanitize.sh" >&2
  (cd "$dir" && /usr/bin/time -f "$name sanitize wall %e s user %U s sys %S s" -o "$OUT/$name-sanitize.time" \
      env BUILD_DIR=build-sanitize scripts/sanitize.sh > "$OUT/$name-sanitize.log" 2>&1)
  grep -h "Total Test time" "$OUT/$name-ctest.log" "$OUT/$name-sanitize.log" | sed "s/^/$name /" > "$OUT/$name-tests.txt"
  cat "$OUT/$name"-*.time "$OUT/$name-tests.txt"
  rm -rf "$dir"
done
echo "outputs in $OUT" >&2
