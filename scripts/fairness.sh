#!/usr/bin/env bash
# Per-client fairness (issue #15, item 12): what a flooding client does to a
# well-behaved one. One CPU server on loopback; a well-behaved client (closed
# loop, concurrency 1) is measured alone, then again while a flooding client
# runs at FLOOD_FACTOR times its load; prints both p50/p99 and their ratio.
# Two load generator processes, so each has its own connection (without
# mutual TLS a connection is a client, docs/SERVER.md).
#
#   scripts/fairness.sh [OUT_DIR]
#
# Environment:
#   BUILD_DIR     build folder (default build)
#   SERVER_BIN    server binary (default $BUILD_DIR/server/specverify-server;
#                 another build's, to compare before/after)
#   SERVER_FLAGS  extra server flags, e.g.
#                 "--max_queued_sequences_per_client=256 --grpc_args=grpc.max_concurrent_streams=64"
#   DURATION      measured seconds per phase (default 10)
#   FLOOD_FACTOR  flood load / well-behaved load (default 10)
#   FLOOD         rate: open loop at FLOOD_FACTOR x the well-behaved client's
#                 measured requests/s, at most FLOOD_OUTSTANDING in flight
#                 (default); concurrency: closed loop at FLOOD_FACTOR requests
#                 in flight
#   FLOOD_OUTSTANDING  open-loop flood's in-flight bound (default 4096)
#   PIN           1: the server on the first half of the CPUs, the load
#                 generators on the other half (taskset), so the clients do
#                 not take the server's cores (2 CPUs: one each)
#   MAX_RATIO     exit 1 when the p99 ratio exceeds it (default: report only)
# Writes calm-alone.json, calm-flood.json, flood.json, server.log and
# summary.txt under OUT_DIR (default a temp dir).
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
OUT=${1:-$(mktemp -d -t specverify-fairness.XXXXXX)}
mkdir -p "$OUT"
SERVER_BIN=${SERVER_BIN:-$BUILD_DIR/server/specverify-server}
LOADGEN_BIN="$BUILD_DIR/client/specverify-loadgen"
DURATION=${DURATION:-10}
FLOOD_FACTOR=${FLOOD_FACTOR:-10}
FLOOD=${FLOOD:-rate}
FLOOD_OUTSTANDING=${FLOOD_OUTSTANDING:-4096}
SERVER_FLAGS=${SERVER_FLAGS:-}
PIN=${PIN:-0}
MAX_RATIO=${MAX_RATIO:-}
PY=/usr/bin/python3
for bin in "$SERVER_BIN" "$LOADGEN_BIN"; do
  [ -x "$bin" ] || { echo "fairness: $bin not built (scripts/build.sh)" >&2; exit 2; }
done
server_pin=()
client_pin=()
if [ "$PIN" = 1 ]; then
  cpus=$(nproc)
  [ "$cpus" -ge 2 ] || { echo "fairness: PIN=1 needs 2 CPUs" >&2; exit 2; }
  half=$((cpus / 2))
  server_pin=(taskset -c 0-$((half - 1)))
  client_pin=(taskset -c $half-$((cpus - 1)))
fi

flood_pid=""
cleanup() {
  for pid in ${flood_pid:-} ${SERVER_PID:-}; do kill -KILL "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# shellcheck disable=SC2086  # SERVER_FLAGS is a list of flags
"${server_pin[@]}" "$SERVER_BIN" --device=cpu --listen_address=127.0.0.1:0 --metrics_address= \
    $SERVER_FLAGS > "$OUT/server.stdout" 2> "$OUT/server.log" &
SERVER_PID=$!
PORT=""
for _ in $(seq 1 200); do
  PORT=$(sed -n 's/^listening on port \([0-9]*\)$/\1/p' "$OUT/server.stdout" 2>/dev/null)
  [ -n "$PORT" ] && break
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.05
done
[ -n "$PORT" ] || { echo "fairness: the server did not start:" >&2; cat "$OUT/server.log" >&2; exit 2; }
ADDRESS=127.0.0.1:$PORT

# One batch key for both clients (same gamma, rows, vocab, KV return), so the
# flood competes with the well-behaved client inside the batcher too.
workload=(--gamma=8 --sequences_per_request=4 --row_bytes=512 --kv_return=handle --quiet)
calm() {  # $1: JSON file
  "${client_pin[@]}" "$LOADGEN_BIN" --address="$ADDRESS" "${workload[@]}" --concurrency=1 \
      --duration=${DURATION}s --warmup=1s --seed=1 --json="$1" > "${1%.json}.txt" 2>&1
}
field() {  # $1: JSON file, $2: python expression over the step result `r`
  "$PY" -c "import json,sys; r=json.load(open(sys.argv[1]))['steps'][0]['result']; print($2)" "$1"
}

echo "fairness: server pid $SERVER_PID on $ADDRESS (flags: ${SERVER_FLAGS:-none}); output in $OUT"
calm "$OUT/calm-alone.json" || { echo "fairness: the well-behaved client failed alone" >&2; exit 1; }
calm_rate=$(field "$OUT/calm-alone.json" "r['requests_per_s']")

if [ "$FLOOD" = rate ]; then
  flood_rate=$("$PY" -c "print(int(round($calm_rate * $FLOOD_FACTOR)))")
  flood_load=(--rate=$flood_rate --max_outstanding=$FLOOD_OUTSTANDING)
  flood_desc="open loop ${flood_rate}/s (${FLOOD_FACTOR}x the well-behaved client's ${calm_rate%.*}/s), at most $FLOOD_OUTSTANDING in flight"
else
  flood_load=(--concurrency=$FLOOD_FACTOR)
  flood_desc="closed loop, $FLOOD_FACTOR in flight (${FLOOD_FACTOR}x the well-behaved client's 1)"
fi
# The flood covers the measured phase: it starts 2 s before (the well-behaved
# client then warms up 1 s) and is due to end with it.
"${client_pin[@]}" "$LOADGEN_BIN" --address="$ADDRESS" "${workload[@]}" "${flood_load[@]}" \
    --duration=$((DURATION + 3))s --warmup=0s --seed=7 --deadline=10s \
    --json="$OUT/flood.json" > "$OUT/flood.txt" 2>&1 &
flood_pid=$!
sleep 2
calm "$OUT/calm-flood.json" || { echo "fairness: the well-behaved client failed under the flood" >&2; exit 1; }
# An open-loop flood the server cannot absorb drains after its duration; it
# does not change the figures above, so it is stopped.
for _ in $(seq 1 300); do kill -0 "$flood_pid" 2>/dev/null || break; sleep 0.1; done
kill -INT "$flood_pid" 2>/dev/null; sleep 1; kill -KILL "$flood_pid" 2>/dev/null
wait "$flood_pid" 2>/dev/null
flood_pid=""

summary() {
  "$PY" - "$OUT" "$flood_desc" "${SERVER_FLAGS:-none}" "$MAX_RATIO" <<'PY'
import json, os, sys
out, flood_desc, flags, max_ratio = sys.argv[1:5]
def step(name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    return json.load(open(path))['steps'][0]['result']
alone, flooded, flood = step('calm-alone.json'), step('calm-flood.json'), step('flood.json')
us = lambda r, p: r['latency_ns']['intended'][p] / 1000.0
print(f"server flags: {flags}")
print(f"flood: {flood_desc}")
print(f"{'well-behaved client (c=1)':30s} {'req/s':>8s} {'p50 us':>9s} {'p99 us':>9s} {'p99.9 us':>9s} {'srv queue p99 us':>17s} {'errors':>7s}")
for label, r in (('alone', alone), ('under the flood', flooded)):
    q = r['latency_ns']['server_queue']['p99'] / 1000.0
    print(f"{label:30s} {r['requests_per_s']:8.0f} {us(r, 'p50'):9.1f} {us(r, 'p99'):9.1f} {us(r, 'p99.9'):9.1f} {q:17.1f} {r['rpc_errors']:7d}")
ratio50 = us(flooded, 'p50') / us(alone, 'p50')
ratio99 = us(flooded, 'p99') / us(alone, 'p99')
print(f"ratio (flood / alone): p50 {ratio50:.2f}x, p99 {ratio99:.2f}x")
if flood is not None:
    errors = ' '.join(f"{k}:{v}" for k, v in sorted(flood.get('errors_by_code', {}).items())) or 'none'
    print(f"flooder: sent {flood['sent']}, ok {flood['ok']} ({flood['requests_per_s']:.0f} req/s), errors {errors}")
else:
    print("flooder: no report (stopped before it wrote one)")
if max_ratio:
    ok = ratio99 <= float(max_ratio)
    print(f"verdict: p99 ratio {ratio99:.2f} {'<=' if ok else '>'} {max_ratio}")
    sys.exit(0 if ok else 1)
PY
}
summary | tee "$OUT/summary.txt"
exit "${PIPESTATUS[0]}"
