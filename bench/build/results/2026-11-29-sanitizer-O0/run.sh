#!/usr/bin/env bash
# scripts/sanitize.sh (its build, every CPU suite under ASan+UBSan and 60 s
# of fuzzing) of two commits from fresh clones, one after the other on this
# machine (nothing else should run beside it), each under /usr/bin/time;
# then the CPU seconds of each build's compile and link edges from its
# .ninja_log (test sources, other objects, the rest), which move with the
# change and not with contention.
#
#   bench/build/results/2026-11-29-sanitizer-O0/run.sh OLD NEW [OUT]
#
# OUT (default a temp dir) gets <commit>-sanitize.{time,log} and
# <commit>-edges.txt.
set -euo pipefail
OLD=${1:?old commit}
NEW=${2:?new commit}
REPO=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
OUT=${3:-$(mktemp -d -t specverify-sanitize-ab.XXXXXX)}
mkdir -p "$OUT"
for rev in "$OLD" "$NEW"; do
  dir=$(mktemp -d -t specverify-clone.XXXXXX)
  git clone -q "$REPO" "$dir"
  git -C "$dir" checkout -q "$rev"
  name=$(git -C "$dir" rev-parse --short HEAD)
  echo "== $name: scripts/sanitize.sh" >&2
  (cd "$dir" && /usr/bin/time -f "$name sanitize wall %e s user %U s sys %S s" -o "$OUT/$name-sanitize.time" \
      env BUILD_DIR=build-sanitize scripts/sanitize.sh > "$OUT/$name-sanitize.log" 2>&1) || true
  awk -v name="$name" 'NR > 1 { t = ($2 - $1) / 1000
        if ($4 ~ /^tests\/.*\.cc\.o$/) tests += t; else if ($4 ~ /\.o$/) objs += t; else rest += t }
      END { printf "%s edges: test sources %.1f s, other objects %.1f s, rest %.1f s, total %.1f s\n",
            name, tests, objs, rest, tests + objs + rest }' "$dir/build-sanitize/.ninja_log" > "$OUT/$name-edges.txt"
  grep -h "tests passed\|Total Test time" "$OUT/$name-sanitize.log" | sed "s/^/$name /" >> "$OUT/$name-edges.txt"
  cat "$OUT/$name-sanitize.time" "$OUT/$name-edges.txt"
  rm -rf "$dir"
done
echo "outputs in $OUT" >&2
