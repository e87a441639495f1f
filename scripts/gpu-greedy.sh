#!/usr/bin/env bash
# The one command for issue #4 on the GPU machine: parity tests, the greedy
# benchmark with its PyTorch baselines, the joined report, then
# compute-sanitizer memcheck and racecheck on a reduced test filter.
# Everything goes under <out-dir>; a summary is printed last. Every step has a
# timeout (rc 124), so a hung kernel costs minutes, not the whole lease.
#
#   scripts/gpu-greedy.sh <bundle-dir> <out-dir> [--quick]
#
# <bundle-dir> comes from:
#   scripts/gpu-bundle.sh build-kernels .gpu-kernels \
#     tests/kernels/greedy_cuda_test tests/kernels/greedy_dispatch_test bench/greedy_bench
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 <bundle-dir> <out-dir> [--quick]" >&2
  exit 2
fi
repo=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(cd "$1" && pwd)
out=$2
quick=${3:-}
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

# Reduced filters for the sanitizers (they slow kernels 10-100x): every path
# and runner still runs, on small and medium batches, odd and 16-byte rows,
# ragged gammas, graphs, and one multi-hundred-tile batch each.
memcheck_filter='*/b7_*:*/b33_*:*/b1000_g3_a90_row256_*:*/b4096_g8_a30_row256_*:*GreedyCudaGraphTest.*:StagedTiles/*:GreedyCudaVerifyOnlyTest.*:GreedyCudaScratchTest.*'
racecheck_filter='*/b7_g8_*:*/b7_g256_*:*/b33_*:*/b1000_g3_a90_row256_*:*GreedyCudaGraphTest.*:StagedTiles/*'

start=$(date +%s)
timeout 120 "$bin/greedy_dispatch_test" > "$out/dispatch_test.txt" 2>&1
note "greedy_dispatch_test: rc=$? $(grep -E '^\[  (PASSED|FAILED) ' "$out/dispatch_test.txt" | tr '\n' ' ')"
grep -E "tau=|pack_bytes=" "$out/dispatch_test.txt" | tee -a "$summary"
timeout 180 "$bin/greedy_cuda_test" --gtest_brief=1 > "$out/cuda_test.txt" 2>&1
note "greedy_cuda_test: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran' "$out/cuda_test.txt" | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$out/cuda_test.txt" | head -20 | tee -a "$summary"
note "tests took $(( $(date +%s) - start )) s"

start=$(date +%s)
timeout 240 "$bin/greedy_bench" --csv "$out/greedy_bench.csv" $quick > "$out/bench.txt" 2>&1
note "greedy_bench: rc=$? ($(( $(date +%s) - start )) s)"
grep -E "^device|^dispatch" "$out/bench.txt" | tee -a "$summary"
start=$(date +%s)
timeout 180 python3 "$repo/bench/python/greedy_torch_baseline.py" --csv "$out/greedy_torch.csv" $quick > "$out/torch.txt" 2>&1
note "greedy_torch_baseline: rc=$? ($(( $(date +%s) - start )) s) $(head -1 "$out/torch.txt")"
python3 "$repo/bench/python/greedy_report.py" --cuda "$out/greedy_bench.csv" \
  --torch "$out/greedy_torch.csv" --out "$out" > "$out/report.txt" 2>&1
note "greedy_report: rc=$?"

if command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    filter=$memcheck_filter
    [ "$tool" = racecheck ] && filter=$racecheck_filter
    start=$(date +%s)
    timeout 150 compute-sanitizer --tool "$tool" --error-exitcode 3 \
      "$bin/greedy_cuda_test" --gtest_brief=1 --gtest_filter="$filter" \
      > "$out/sanitizer_$tool.txt" 2>&1
    note "compute-sanitizer $tool: rc=$? ($(( $(date +%s) - start )) s) $(grep -E '^\[  (PASSED|FAILED) |ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.txt" | tr '\n' ' ')"
    grep -m8 -E '^========= +(Error|Warning|Invalid|Race|.*hazard)' "$out/sanitizer_$tool.txt" | tee -a "$summary"
  done
else
  note "compute-sanitizer not found: sanitizer runs skipped"
fi

# The run tool returns at most 8 files: logs travel as one tarball.
(cd "$out" && tar czf logs.tgz ./*.txt && rm -f bench.txt cuda_test.txt dispatch_test.txt \
  torch.txt sanitizer_*.txt environment.txt)

echo
echo "================ bench table (medians, us) ================"
tar xzf "$out/logs.tgz" -O ./bench.txt | sed -n '/packedKB/,$p' | grep -E '^ +(1|32|1024|4096) +(8|128|256) ' | head -60
echo
cat "$out/report.txt"
echo
echo "================ summary ================"
cat "$summary"
