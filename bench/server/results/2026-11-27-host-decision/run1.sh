#!/usr/bin/env bash
# Run 1 (H100): concurrency-1 latency of greedy chains decided on the host
# (default, --cuda_host_decision_max_rows=32768) against the device paths
# (--cuda_host_decision_max_rows=0), alternating host, device, host, device;
# then cuda_server_test on the same binaries.
#   scripts/gpu-bundle.sh build-gpu .gpu-sv specverify-server specverify-latency-breakdown cuda_server_test
set -u
CONFIGS="host:--device=cuda:0;device:--device=cuda:0 --cuda_host_decision_max_rows=0;host-b:--device=cuda:0;device-b:--device=cuda:0 --cuda_host_decision_max_rows=0" \
  scripts/gpu-latency.sh .gpu-sv "$OUT/latency" > "$OUT/run1-latency.txt" 2>&1
echo "latency rc=$?"; cat "$OUT/latency/latency.md"
export LD_LIBRARY_PATH=$PWD/.gpu-sv/lib
timeout 300 .gpu-sv/bin/cuda_server_test > "$OUT/run1-cuda_server_test.txt" 2>&1; echo "cuda_server_test rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED|OK \]" "$OUT/run1-cuda_server_test.txt" | head -20
