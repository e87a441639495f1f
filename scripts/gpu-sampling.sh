#!/usr/bin/env bash
# The one command for issue #8 on the GPU machine: the sampling tests (CPU
# suites and GPU parity/statistics), compute-sanitizer memcheck and racecheck
# on a reduced filter, the rejection-sampling benchmark, the PyTorch
# baselines and the joined report. Everything goes under <out-dir>; a summary
# is printed last.
#
#   scripts/gpu-sampling.sh <bundle-dir> <out-dir> [--quick] [--no-tests] [--no-bench]
#                           [--archive <file.tgz>] [--ab] [--logprobs-ab]
#
# --logprobs-ab: issue #17's target (fp32 log-probabilities within 10% of
# fp32 probabilities at B=8, gamma=8, V=151,936): bin/rejection_bench --only
# at that shape, probabilities and logprobs alternating for 3 rounds (so
# drift hits both), medians and the ratio in logprobs_ab.txt and the summary.
# (The plain bench run also prints a "headline ... logprobs / probabilities"
# line from one pass.)
#
# --ab: A/B of kernel builds in one run. Every extra bench binary in the
# bundle, bin/rejection_bench_<name> (e.g. the current HEAD's kernel, built
# from `git archive HEAD`), runs beside bin/rejection_bench over the
# fp32-probabilities shapes B in {1, 8, 32, 128}, gamma 8, V 151936 plus the
# logits headline, in alternating order (new, old..., new again) so drift
# shows; CSVs ab_<name>_<round>.csv and a table in ab.txt.
#
# The device tool returns at most a few files from $OUT (the PyTorch CSV of
# one earlier run never came back): write <out-dir> outside $OUT and let
# --archive pack all of it into one file there, e.g.
#   run(command="scripts/gpu-sampling.sh .gpu-sampling /tmp/s --archive $OUT/sampling.tgz")
# The summary and the joined report are also copied beside the archive.
#
# <bundle-dir> comes from (build dir configured with -DCMAKE_CUDA_ARCHITECTURES=90):
#   scripts/gpu-bundle.sh build-sampling .gpu-sampling tests/kernels/rejection_cuda_test \
#     tests/kernels/rejection_stats_test tests/kernels/rejection_reference_test \
#     tests/kernels/sampling_math_test bench/rejection_bench [tests/server/sampled_server_test]
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 <bundle-dir> <out-dir> [--quick] [--no-tests] [--no-bench]" >&2
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
ab=0
logprobs_ab=0
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=--quick ;;
    --no-tests) tests=0 ;;
    --no-bench) bench=0 ;;
    --archive) archive=${2:?--archive needs a file}; shift ;;
    --ab) ab=1 ;;
    --logprobs-ab) logprobs_ab=1 ;;
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
  # sampled_server_test (the served path, CPU and cuda:0 backends) runs when
  # the bundle has it.
  suites="sampling_math_test rejection_reference_test rejection_stats_test rejection_cuda_test"
  [ -x "$bin/sampled_server_test" ] && suites="$suites sampled_server_test"
  for t in $suites; do
    "$bin/$t" --gtest_brief=1 > "$out/$t.txt" 2>&1
    note "$t: rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests? from .* ran' "$out/$t.txt" | tr '\n' ' ')"
    grep -E "^\[  FAILED  \]|Failure|sequence [0-9]+: gpu" "$out/$t.txt" | head -20 | tee -a "$summary"
  done
  note "tests took $(( $(date +%s) - start )) s"
  if command -v compute-sanitizer > /dev/null; then
    start=$(date +%s)
    filter='RejectionCudaTest.BadValues*:RejectionCudaTest.GreedyFiltered*:RejectionCudaTest.GraphReplays*:RejectionCudaTest.TargetShape*'
    compute-sanitizer --tool memcheck --error-exitcode 3 "$bin/rejection_cuda_test" --gtest_brief=1 \
      --gtest_filter="$filter" > "$out/memcheck.txt" 2>&1
    note "memcheck: rc=$? $(grep -E 'ERROR SUMMARY' "$out/memcheck.txt" | tail -1)"
    compute-sanitizer --tool racecheck --error-exitcode 3 "$bin/rejection_cuda_test" --gtest_brief=1 \
      --gtest_filter='RejectionCudaTest.GraphReplays*:RejectionCudaTest.BadValues*:RejectionCudaTest.TargetShape*:RejectionCudaTest.GreedyFilteredAndSigmoidLogitsMatch' > "$out/racecheck.txt" 2>&1
    note "racecheck: rc=$? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' "$out/racecheck.txt" | tail -1)"
    note "sanitizers took $(( $(date +%s) - start )) s"
  fi
fi

if [ "$bench" = 1 ]; then
  start=$(date +%s)
  "$bin/rejection_bench" --csv "$out/rejection_bench.csv" $quick > "$out/bench.txt" 2>&1
  note "rejection_bench: rc=$? ($(( $(date +%s) - start )) s)"
  grep -E "^device|^empty|B=8 +gamma=8 V=151936|top-k|^headline" "$out/bench.txt" | tee -a "$summary"
  start=$(date +%s)
  python3 "$repo/bench/python/sampling_torch_baseline.py" --csv "$out/sampling_torch.csv" $quick \
    > "$out/torch.txt" 2>&1
  note "sampling_torch_baseline: rc=$? ($(( $(date +%s) - start )) s) $(head -1 "$out/torch.txt")"
  grep -E "B=8 +gamma=8 V=151936" "$out/torch.txt" | tee -a "$summary"
  python3 "$repo/bench/python/sampling_report.py" --cuda "$out/rejection_bench.csv" \
    --torch "$out/sampling_torch.csv" > "$out/report.md" 2>&1
  note "sampling_report: rc=$?"
fi
if [ "$ab" = 1 ]; then
  start=$(date +%s)
  ab_shapes="probabilities,1,8,151936 probabilities,8,8,151936 probabilities,32,8,151936 probabilities,128,8,151936 logits,8,8,151936"
  ab_run() {  # <name> <binary> <round>
    for shape in $ab_shapes; do
      "$2" --only "$shape" --csv "$out/ab_$1_$3_${shape//,/_}.csv" >> "$out/ab_$1.txt" 2>&1 || note "ab $1 $shape: failed"
    done
  }
  variants=$(cd "$bin" && ls rejection_bench_* 2>/dev/null)
  ab_run new "$bin/rejection_bench" 1
  for v in $variants; do ab_run "${v#rejection_bench_}" "$bin/$v" 1; done
  ab_run new "$bin/rejection_bench" 2
  for v in $variants; do ab_run "${v#rejection_bench_}" "$bin/$v" 2; done
  echo "variant round kind B gamma V median_us p95_us" > "$out/ab.txt"
  {
    for f in "$out"/ab_*_[12]_*.csv; do
      name=$(basename "$f" .csv | sed -E 's/^ab_(.*)_([12])_(probabilities|logits)_.*/\1 \2/')
      awk -F, -v n="$name" '$2 == "cuda_rejection" {print n, $1, $3, $4, $5, $9, $10}' "$f"
    done
  } | sort -k3,3 -k4,4n -k1,1 -k2,2n >> "$out/ab.txt"
  note "ab: $(( $(date +%s) - start )) s"
  cat "$out/ab.txt" | tee -a "$summary"
fi
if [ "$logprobs_ab" = 1 ]; then
  start=$(date +%s)
  : > "$out/logprobs_ab.txt"
  for round in 1 2 3; do
    for kind in probabilities logprobs; do
      "$bin/rejection_bench" --only "$kind,8,8,151936" --csv "$out/logprobs_ab_${kind}_${round}.csv" \
        >> "$out/logprobs_ab_runs.txt" 2>&1 || note "logprobs-ab $kind round $round: failed"
      awk -F, -v k="$kind" -v r="$round" '$2 == "cuda_rejection" {print "round", r, k, "median_us", $9, "p95_us", $10}' \
        "$out/logprobs_ab_${kind}_${round}.csv" >> "$out/logprobs_ab.txt"
    done
  done
  verdict=$(awk '{sum[$3] += $5; n[$3]++} END {
         p = sum["probabilities"] / n["probabilities"]; l = sum["logprobs"] / n["logprobs"];
         printf "mean of round medians: probabilities %.2f us, logprobs %.2f us, ratio %.3f (target <= 1.10: %s)",
                p, l, l / p, (l / p <= 1.10 ? "met" : "NOT met") }' "$out/logprobs_ab.txt")
  echo "$verdict" >> "$out/logprobs_ab.txt"
  note "logprobs-ab: $(( $(date +%s) - start )) s"
  tee -a "$summary" < "$out/logprobs_ab.txt"
fi
if [ -n "$archive" ]; then
  mkdir -p "$(dirname "$archive")"
  tar czf "$archive" -C "$(dirname "$out")" "$(basename "$out")"
  note "archive: $archive ($(du -k "$archive" | cut -f1) KiB, $(tar tzf "$archive" | wc -l) entries)"
  cp "$summary" "$(dirname "$archive")/summary.txt"
  [ -f "$out/report.md" ] && cp "$out/report.md" "$(dirname "$archive")/report.md"
fi
echo "----- summary -----"
cat "$summary"
