#!/usr/bin/env bash
# Run 2 (NOT KEPT; the patch measured is run2-device-paths.patch): inline answers from the staging on the device paths too (old: the
# server binary of 06f6042, which did it on the host-decided path only; new:
# also the device-decided greedy path and sampled batches). Two parts:
#  1. specverify-latency-breakdown, greedy gamma=8, 4 sequences, 4 KiB rows,
#     KV inline, c=1, with --cuda_host_decision_max_rows=0 (the device path
#     that batches over the host-decision limit take); old, new, old, new;
#  2. specverify-loadgen, sampled B=8, gamma=8, V=151,936 fp32 probabilities
#     with draft rows read in place from the loadgen's CUDA region, 4 KiB KV
#     rows inline both ways, c=1; old then new, three rounds.
# Every answer checked (greedy oracle, sampled CPU reference).
#
# Build here (Release, sm_90) and bundle:
#   cmake --build build-gpu --target specverify-server specverify-loadgen specverify-latency-breakdown
#   scripts/gpu-bundle.sh build-gpu .gpu-ifs2 specverify-server specverify-loadgen specverify-latency-breakdown
#   cp <06f6042 build>/server/specverify-server .gpu-ifs2/bin/specverify-server-old (stripped)
# Run: run(carry=[".gpu-ifs2"]): bash bench/server/results/2026-11-27-inline-from-staging/run2.sh .gpu-ifs2 $OUT
set -u
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
CONFIGS="old-a:@specverify-server-old --device=cuda:0 --cuda_host_decision_max_rows=0;new-a:--device=cuda:0 --cuda_host_decision_max_rows=0;old-b:@specverify-server-old --device=cuda:0 --cuda_host_decision_max_rows=0;new-b:--device=cuda:0 --cuda_host_decision_max_rows=0" \
KVS="inline" REQUESTS=${REQUESTS:-3000} scripts/gpu-latency.sh "$bundle" "$out/latency" > "$out/run2-latency.txt" 2>&1
echo "latency rc=$?"
cat "$out/latency/latency.md"

bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib
sampled=(--mode=sampled --gamma=8 --sequences-per-request=8 --vocab=151936 --row-bytes=4096
         --kv-return=inline --pool-requests=2 --concurrency=1 --transport=cuda --dtype=fp32 --kind=probs)
for round in 1 2 3; do
  for version in old new; do
    server=$bin/specverify-server
    [ "$version" = old ] && server=$bin/specverify-server-old
    "$server" --listen_address=127.0.0.1:50801 --metrics_address= --device=cuda:0 \
        > "$out/server-sampled-$version-r$round.stdout" 2> "$out/server-sampled-$version-r$round.log" &
    pid=$!
    for _ in $(seq 1 400); do
      grep -q "listening on port" "$out/server-sampled-$version-r$round.stdout" 2>/dev/null && break
      sleep 0.05
    done
    "$bin/specverify-loadgen" --address=127.0.0.1:50801 --duration=3s --warmup=0.5s \
        --json="$out/sampled-$version-r$round.json" --quiet "${sampled[@]}" \
        > "$out/sampled-$version-r$round.txt" 2>&1 || echo "sampled $version r$round: loadgen exit $?"
    grep -E "closed c=1 +[0-9]|server total" "$out/sampled-$version-r$round.txt" | sed "s/^/sampled $version r$round: /"
    kill -TERM "$pid"; wait "$pid"
  done
done
