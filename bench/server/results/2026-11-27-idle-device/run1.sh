#!/usr/bin/env bash
# Host-decided greedy batches that leave the GPU nothing to do (KV none, or
# rows but none accepted): nothing enqueued, the completion thread answers at
# once (new), against the H2D copy, the events and the wait on them (old: the
# server binary of bb51a53, the commit before this change). Concurrency 1,
# specverify-latency-breakdown (Verify and VerifyCeiling alternated on one
# connection, every answer checked), greedy gamma=8, 4 sequences a request,
# 4 KiB rows; KV none (the change) and inline (a control: its batches still
# copy rows); old, new, old, new.
#
# Build here (Release, sm_90) and bundle:
#   cmake --build build-gpu --target specverify-server specverify-latency-breakdown
#   scripts/gpu-bundle.sh build-gpu .gpu-idle specverify-server specverify-latency-breakdown
#   cp <bb51a53 build>/server/specverify-server .gpu-idle/bin/specverify-server-old (stripped)
# Run: run(carry=[".gpu-idle"]): bash bench/server/results/2026-11-27-idle-device/run1.sh .gpu-idle $OUT
set -u
CONFIGS="old-a:@specverify-server-old --device=cuda:0;new-a:--device=cuda:0;old-b:@specverify-server-old --device=cuda:0;new-b:--device=cuda:0" \
KVS="none inline" scripts/gpu-latency.sh "$1" "$2/latency" > "$2/run1-latency.txt" 2>&1
echo "latency rc=$?"
cat "$2/latency/latency.md"
