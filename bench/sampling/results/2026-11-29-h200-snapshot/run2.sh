#!/usr/bin/env bash
# Second half of run1.sh's snapshot, same bundle, the next call on the same
# machine: the quick sampling bench with PyTorch in the same run
# (scripts/gpu-sampling.sh --quick --no-tests), then greedy_bench --quick
# (item 4: the stress point against the D2D copy of the same bytes).
# Run: bash bench/sampling/results/2026-11-29-h200-snapshot/run2.sh .gpu-h $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
date -u +%Y-%m-%dT%H:%M:%SZ | tee "$out/machine.txt"
timeout 300 bash scripts/gpu-sampling.sh "$bundle" /tmp/s --quick --no-tests --archive "$out/sampling.tgz" 2>&1 |
  tail -14 | tee "$out/sampling-tail.txt"
timeout 200 "$bundle/bin/greedy_bench" --quick --runs 200 > "$out/greedy.txt" 2>&1
echo "greedy_bench: rc=$?"; tail -30 "$out/greedy.txt"
