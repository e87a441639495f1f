#!/usr/bin/env bash
# The CPU reference before (23bf67a) and after the typed, eight-wide row
# loops, same machine, same run, alternating. Builds the old libraries in a
# git worktree and links this commit's bench/sampling/reference_bench.cc
# against them (the benchmark is new; the reference's API is unchanged).
#   bench/sampling/results/2026-11-27-cpu-reference/run.sh [OLD_COMMIT] > out.txt
set -euo pipefail
cd "$(dirname "$0")/../../../.."
OLD=${1:-23bf67a}
WT=$(mktemp -d /tmp/reference-old.XXXXXX)
trap 'git worktree remove --force "$WT" >/dev/null 2>&1 || true' EXIT
git worktree add --detach "$WT" "$OLD" >/dev/null
cmake -S "$WT" -B "$WT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECVERIFY_ENABLE_CUDA=OFF >/dev/null
ninja -C "$WT/build" specverify_sampling_workload >/dev/null
ABSL=$(ls /usr/lib/x86_64-linux-gnu/libabsl_*.so | sed 's|.*/lib\(.*\)\.so|-l\1|' | tr '\n' ' ')
g++ -std=c++20 -O3 -DNDEBUG -I"$WT" bench/sampling/reference_bench.cc "$WT/build/kernels/libspecverify_sampling_workload.a" \
  "$WT/build/kernels/libspecverify_sampling_cpu.a" "$WT/build/kernels/libspecverify_kernels_cpu.a" $ABSL -o "$WT/reference_bench-old"
ninja -C build reference_bench >/dev/null
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cores)"
echo "# old: $OLD, new: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- kernels || echo ' + uncommitted kernels/ changes')"
for round in 1 2; do
  echo "## round $round: old"; "$WT/reference_bench-old" --runs 5
  echo "## round $round: new"; build/bench/reference_bench --runs 5
done
