#!/usr/bin/env bash
# Host-decided greedy batches whose inline answers are copied from the staged
# rows (new: no pack and no D2H for them; a batch of inline requests leaves
# the GPU idle) against the pack into the arena, the D2H of the packed rows
# and the copy from that pinned copy (old: the server binary of 4365133,
# the commit before this change). Concurrency 1,
# specverify-latency-breakdown, greedy gamma=8, 4 sequences a request,
# 4 KiB rows; KV inline (the change), handle (a control: its rows are
# packed as before) and none; old, new, old, new. Every answer checked
# (inline bytes against the oracle; handles fetched and compared).
#
# Build here (Release, sm_90) and bundle:
#   cmake --build build-gpu --target specverify-server specverify-latency-breakdown
#   scripts/gpu-bundle.sh build-gpu .gpu-ifs specverify-server specverify-latency-breakdown
#   cp <4365133 build>/server/specverify-server .gpu-ifs/bin/specverify-server-old (stripped)
# Run: run(carry=[".gpu-ifs"]): bash bench/server/results/2026-11-27-inline-from-staging/run1.sh .gpu-ifs $OUT
set -u
CONFIGS="old-a:@specverify-server-old --device=cuda:0;new-a:--device=cuda:0;old-b:@specverify-server-old --device=cuda:0;new-b:--device=cuda:0" \
KVS="inline handle none" REQUESTS=${REQUESTS:-3000} scripts/gpu-latency.sh "$1" "$2/latency" > "$2/run1-latency.txt" 2>&1
echo "latency rc=$?"
cat "$2/latency/latency.md"
