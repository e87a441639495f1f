#!/usr/bin/env bash
# The one command for issue #14 (token trees) on the GPU machine: the tree
# tests (CPU suites and the GPU parity/statistics suite), compute-sanitizer
# memcheck and racecheck on a reduced filter, the tree benchmark, the
# PyTorch baseline and the joined report with the target verdicts.
# Everything goes under <out-dir>; a short table is printed last. Every step
# has a timeout (rc 124), so a hung kernel costs minutes, not the lease.
#
#   scripts/gpu-tree.sh <bundle-dir> <out-dir> [--quick] [--no-tests] [--no-bench] [--archive <file.tgz>]
#
# <bundle-dir> comes from (build dir configured with -DCMAKE_CUDA_ARCHITECTURES=90):
#   cmake --build build -j2 --target tree_cuda_test tree_reference_test tree_stats_test tree_bench
#   scripts/gpu-bundle.sh build .gpu-tree tests/kernels/tree_cuda_test \
#     tests/kernels/tree_reference_test tests/kernels/tree_stats_test bench/tree_bench
# and on the device (the repo's bench/python and scripts travel with the tree):
#   scripts/gpu-tree.sh .gpu-tree /tmp/tree --archive $OUT/tree.tgz
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 <bundle-dir> <out-dir> [--quick] [--no-tests] [--no-bench] [--archive <file.tgz>]" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(cd "$1" && pwd)
out=$2
shift 2
quick=""
tests=1
bench=1
archive=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick ;;
    --no-tests) tests=0 ;;
    --no-bench) bench=0 ;;
    --archive) archive=${2:?--archive needs a file}; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin=$bundle/bin
summary=$out/summary.txt
: > "$summary"
note() { echo "$*" | tee -a "$summary"; }
{
  date -u
  git -C "$repo" rev-parse HEAD 2>/dev/null || echo "commit: (no git on this machine)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
} > "$out/environment.txt" 2>&1

if [ "$tests" = 1 ]; then
  start=$(date +%s)
  for t in tree_reference_test tree_stats_test tree_cuda_test; do
    timeout 300 "$bin/$t" --gtest_brief=1 > "$out/$t.txt" 2>&1
    note "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? from .* ran' "$out/$t.txt" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \]|Failure|tree [0-9]+: gpu" "$out/$t.txt" | head -20 | tee -a "$summary"
  done
  note "tests took $(( $(date +%s) - start )) s"
  if command -v compute-sanitizer > /dev/null; then
    # Sanitizers slow kernels 10-100x: greedy on every shape (small and
    # 4096-tree batches, graphs), sampled on small vocabularies, every
    # cluster size, bad values, the pack of sampled paths.
    start=$(date +%s)
    memcheck_filter='TreeCudaTest.Greedy*:TreeCudaTest.SampledBadValues*:TreeCudaTest.SampledClusterSizes*'
    racecheck_filter='TreeCudaTest.GreedyGraph*:TreeCudaTest.SampledBadValues*:TreeCudaTest.SampledClusterSizes*'
    timeout 300 compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/tree_cuda_test" --gtest_brief=1 \
      --gtest_filter="$memcheck_filter" > "$out/memcheck.txt" 2>&1
    note "memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck.txt" | tail -1)"
    timeout 300 compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/tree_cuda_test" --gtest_brief=1 \
      --gtest_filter="$racecheck_filter" > "$out/racecheck.txt" 2>&1
    note "racecheck: rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck.txt" | tail -1)"
    note "sanitizers took $(( $(date +%s) - start )) s"
  else
    note "compute-sanitizer: not found, skipped"
  fi
fi

if [ "$bench" = 1 ]; then
  start=$(date +%s)
  timeout 300 "$bin/tree_bench" --csv "$out/tree_bench.csv" $quick > "$out/bench.txt" 2>&1
  note "tree_bench: rc=$? ($(( $(date +%s) - start )) s)"
  start=$(date +%s)
  timeout 300 python3 "$repo/bench/python/tree_torch_baseline.py" --csv "$out/tree_torch.csv" $quick \
    > "$out/torch.txt" 2>&1
  note "tree_torch_baseline: rc=$? ($(( $(date +%s) - start )) s) $(head -1 "$out/torch.txt")"
  python3 "$repo/bench/python/tree_report.py" --cuda "$out/tree_bench.csv" --torch "$out/tree_torch.csv" \
    > "$out/report.md" 2>&1
  note "tree_report: rc=$?"
fi
if [ -n "$archive" ]; then
  mkdir -p "$(dirname "$archive")"
  tar czf "$archive" -C "$(dirname "$out")" "$(basename "$out")"
  note "archive: $archive ($(du -k "$archive" | cut -f1) KiB)"
  cp "$summary" "$(dirname "$archive")/summary.txt"
  [ -f "$out/report.md" ] && cp "$out/report.md" "$(dirname "$archive")/report.md"
fi
echo "----- summary -----"
cat "$summary"
if [ -f "$out/bench.txt" ]; then
  echo "----- tree_bench -----"
  cat "$out/bench.txt"
fi
if [ -f "$out/report.md" ]; then
  echo "----- report -----"
  grep -E "^\* |cuda_greedy \| 32 \| 64|cuda_sample \| 8 \| 64" "$out/report.md"
fi
