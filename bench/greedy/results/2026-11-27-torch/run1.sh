#!/usr/bin/env bash
# Run 1 (H100): the greedy suite with its PyTorch baselines in the same run
# (scripts/gpu-greedy.sh --quick: tests, greedy_bench incl. the host-decided
# pack, greedy_torch_baseline, the joined report, memcheck and racecheck),
# then the sampling bench with its PyTorch baselines (scripts/gpu-sampling.sh
# --quick --no-tests). Kernels of HEAD (sampling unchanged since d9f7d3e).
#   scripts/gpu-bundle.sh build-gpu .gpu-k greedy_cuda_test greedy_dispatch_test greedy_bench rejection_bench
set -u
scripts/gpu-greedy.sh .gpu-k /tmp/greedy --quick > /dev/null 2>&1; echo "gpu-greedy rc=$?"
cat /tmp/greedy/summary.txt
cp /tmp/greedy/summary.txt "$OUT/greedy-summary.txt"; cp /tmp/greedy/report.txt "$OUT/greedy-report.txt"
cp /tmp/greedy/greedy_table.md "$OUT/greedy-table.md"; tar czf "$OUT/greedy.tgz" -C /tmp greedy
scripts/gpu-sampling.sh .gpu-k /tmp/sampling --quick --no-tests --archive "$OUT/sampling.tgz" > /dev/null 2>&1; echo "gpu-sampling rc=$?"
cat /tmp/sampling/summary.txt
