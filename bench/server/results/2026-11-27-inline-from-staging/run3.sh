#!/usr/bin/env bash
# Run 3: throughput with inline rows, the host-decided staging answers (new:
# the server binary of 06f6042) against 4365133's (old), alternating, three
# rounds: specverify-loadgen, greedy gamma=8, 4 sequences a request, 4 KiB
# rows inline both ways, c = 1 and 64, 3 s a step, every answer checked.
#
#   scripts/gpu-bundle.sh build-gpu .gpu-ifs3 specverify-loadgen
#   cp <4365133 build>/server/specverify-server .gpu-ifs3/bin/specverify-server-old (stripped)
#   cp <06f6042 build>/server/specverify-server .gpu-ifs3/bin/specverify-server (stripped)
# Run: run(carry=[".gpu-ifs3"]): bash bench/server/results/2026-11-27-inline-from-staging/run3.sh .gpu-ifs3 $OUT
set -u
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib
greedy=(--gamma=8 --sequences-per-request=4 --row-bytes=4096 --pool-requests=256 --kv-return=inline
        --concurrency=1,64)
for round in 1 2 3; do
  for version in old new; do
    server=$bin/specverify-server
    [ "$version" = old ] && server=$bin/specverify-server-old
    "$server" --listen_address=127.0.0.1:50901 --metrics_address= --device=cuda:0 \
        > "$out/server-$version-r$round.stdout" 2> "$out/server-$version-r$round.log" &
    pid=$!
    for _ in $(seq 1 400); do
      grep -q "listening on port" "$out/server-$version-r$round.stdout" 2>/dev/null && break
      sleep 0.05
    done
    "$bin/specverify-loadgen" --address=127.0.0.1:50901 --duration=3s --warmup=0.5s \
        --json="$out/inline-$version-r$round.json" --quiet "${greedy[@]}" \
        > "$out/inline-$version-r$round.txt" 2>&1 || echo "$version r$round: loadgen exit $?"
    grep -E "^closed c=" "$out/inline-$version-r$round.txt" | sed "s/^/$version r$round: /"
    kill -TERM "$pid"; wait "$pid"
  done
done
