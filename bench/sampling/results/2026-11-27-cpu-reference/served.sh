#!/usr/bin/env bash
# The CPU backend serving sampled logits before and after the reference's row
# loops: two servers (OLD_SERVER built at 23bf67a, NEW_SERVER at this commit)
# alternating under the same load generator, every answer checked against
# the CPU reference.
#   OLD_SERVER=/tmp/old-ref/build/server/specverify-server \
#   bench/sampling/results/2026-11-27-cpu-reference/served.sh > served.txt
set -euo pipefail
cd "$(dirname "$0")/../../../.."
OLD_SERVER=${OLD_SERVER:?build specverify-server at 23bf67a and name it here}
NEW_SERVER=${NEW_SERVER:-build/server/specverify-server}
LOADGEN=${LOADGEN:-build/client/specverify-loadgen}
ROUNDS=${ROUNDS:-2}
PORT=${PORT:-51551}
echo "# $(date -u +%FT%TZ) $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2) ($(nproc) cores)"
echo "# servers: --device=cpu --cpu_threads=2; load: fp32 logits V=151936, gamma 8, 4 sequences a request, draft rows"
for round in $(seq "$ROUNDS"); do
  for which in old new; do
    server=$OLD_SERVER; [[ $which == new ]] && server=$NEW_SERVER
    "$server" --device=cpu --cpu_threads=2 --listen_address=127.0.0.1:$PORT --metrics_address= \
      > /tmp/served-$which.log 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' EXIT
    for _ in $(seq 100); do grep -q "listening on port" /tmp/served-$which.log 2>/dev/null && break; sleep 0.1; done
    echo "## round $round: $which"
    "$LOADGEN" --address=127.0.0.1:$PORT --mode=sampled --kind=logits --dtype=fp32 --vocab=151936 --gamma=8 \
      --sequences_per_request=4 --pool_requests=8 --concurrency=1,4 --duration=10s --warmup=2s --row_bytes=512 --wait_for_serving=10s
    kill -TERM $pid; wait $pid || true
    trap - EXIT
  done
done
