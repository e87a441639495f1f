#!/usr/bin/env bash
# Soak (issue #15, item 14): one CPU server on loopback under everything an
# unlucky operator sees at once, for a bounded time, then checks that it
# recovers to empty. The server drives two CPU executors (DEVICE, default
# cpu:0,1: the multi-device paths of issue #16, handles on both arenas).
# Concurrently:
#   * a checked client: closed loop, KV by handle, 10% fetched and compared,
#     every answer checked against the oracle (a wrong answer fails the soak);
#   * a canceller: 2 ms deadlines, so requests expire in the queue and calls
#     are cancelled mid-flight;
#   * a handle leaker: 64 KiB rows by handle, never released, filling the
#     small arena until requests are refused (RESOURCE_EXHAUSTED) and the TTL
#     reclaims it;
#   * a killed client: a load generator SIGKILLed every few seconds, its
#     streams and unary calls abandoned mid-flight, then restarted.
# Afterwards, once the handle TTL and reap interval have passed: no wrong
# answers, no request refused as invalid (all are valid), and /metrics shows
# 0 arena bytes used, 0 live handles, 0 queued and 0 in-flight sequences;
# SIGTERM exits 0. CTest runs a 2-minute variant (label "soak").
#
#   scripts/soak.sh [seconds]          # default 120; loopback only, bounded
#
# Environment: BUILD_DIR (default build), OUT (logs; default a temp dir),
# DEVICE (the server's --device, default cpu:0,1).
set -uo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-120}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-$(mktemp -d -t specverify-soak.XXXXXX)}
mkdir -p "$OUT"
SERVER_BIN="$BUILD_DIR/server/specverify-server"
LOADGEN_BIN="$BUILD_DIR/client/specverify-loadgen"
for bin in "$SERVER_BIN" "$LOADGEN_BIN"; do
  [ -x "$bin" ] || { echo "soak: $bin not built (scripts/build.sh)" >&2; exit 2; }
done
TTL_MS=2000

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
PORT=$(free_port)
METRICS_PORT=$(free_port)
pids=()
victim=""
cleanup() {
  for pid in "${pids[@]}" ${victim:-} ${SERVER_PID:-}; do kill -KILL "$pid" 2>/dev/null || true; done
}
# Interrupted or killed: take every child along (a soak must not outlive itself).
trap cleanup EXIT
trap 'exit 130' INT TERM

"$SERVER_BIN" --device="${DEVICE:-cpu:0,1}" --listen_address=127.0.0.1:$PORT \
    --metrics_address=127.0.0.1:$METRICS_PORT --kv_arena_bytes=$((16 << 20)) \
    --kv_handle_ttl_ms=$TTL_MS --max_queue_sequences=4096 \
    > "$OUT/server.stdout" 2> "$OUT/server.log" &
SERVER_PID=$!
for _ in $(seq 1 200); do
  grep -q "listening on port" "$OUT/server.stdout" 2>/dev/null && break
  sleep 0.05
done
echo "soak: server pid $SERVER_PID on 127.0.0.1:$PORT for ${DURATION}s; logs in $OUT"

common=(--address=127.0.0.1:$PORT --wait_for_serving=20s --warmup=0s --quiet
        --gamma=4:12 --sequences_per_request=4 --pool_requests=256)
# Checked client: wrong answers fail the soak (exit 1); RPC errors from the
# arena being full are expected and allowed.
"$LOADGEN_BIN" "${common[@]}" --concurrency=8 --duration=${DURATION}s --row_bytes=512 \
    --kv_return=handle --fetch_kv_fraction=0.1 --deadline=2s \
    --json="$OUT/checked.json" > "$OUT/checked.txt" 2>&1 &
checked_pid=$!
pids+=($checked_pid)
# Canceller: 2 ms deadlines.
"$LOADGEN_BIN" "${common[@]}" --concurrency=16 --duration=${DURATION}s --row_bytes=512 \
    --kv_return=inline --deadline=2ms > "$OUT/canceller.txt" 2>&1 &
pids+=($!)
# Handle leaker: big rows, never released.
"$LOADGEN_BIN" "${common[@]}" --concurrency=4 --duration=${DURATION}s --row_bytes=65536 \
    --kv_return=handle --release_kv=false --deadline=2s > "$OUT/leaker.txt" 2>&1 &
pids+=($!)
# Killed client: SIGKILLed every 3 s, mid-flight, over a stream.
end=$((SECONDS + DURATION))
kills=0
while [ $SECONDS -lt $end ]; do
  "$LOADGEN_BIN" "${common[@]}" --concurrency=16 --duration=60s --rpc=stream \
      --row_bytes=4096 --kv_return=inline > /dev/null 2>&1 &
  victim=$!
  sleep 3
  kill -KILL "$victim" 2>/dev/null && kills=$((kills + 1))
  wait "$victim" 2>/dev/null
  victim=""
done

status=0
wait "$checked_pid"
checked_rc=$?
for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null; done
pids=()
grep -E "^closed|verdict" "$OUT/checked.txt" | tail -3
if [ "$checked_rc" -eq 1 ]; then
  echo "soak: FAILED: the checked client saw wrong answers" >&2
  status=1
fi
echo "soak: killed $kills clients mid-flight"

# After the TTL and a reap interval, everything must be back to zero.
sleep $(( (TTL_MS + 1500) / 1000 ))
python3 - "$METRICS_PORT" "$OUT/metrics.txt" <<'PY' || status=1
import sys, urllib.request
port, path = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
open(path, "w").write(text)
values = {}
for line in text.splitlines():
    if line.startswith("#") or not line.strip():
        continue
    name, _, value = line.rpartition(" ")
    values[name] = float(value)
    # Per-device series (device="cpu:0", ...) also add up under the bare name.
    if "{" in name and 'device="' in name:
        base = name.split("{")[0]
        values[base] = values.get(base, 0.0) + float(value)
want_zero = ["specverify_kv_arena_used_bytes", "specverify_kv_live_handles",
             "specverify_queued_sequences", "specverify_in_flight_sequences"]
bad = [f"{n}={values.get(n)}" for n in want_zero if values.get(n) != 0.0]
# Every request the soak sends is valid: none may be refused as invalid
# (cancelled calls used to be miscounted as undecodable).
invalid = values.get('specverify_requests_total{code="INVALID_ARGUMENT",rpc="Verify"}', 0)
if invalid:
    bad.append(f"INVALID_ARGUMENT answers={int(invalid)}")
print("soak: after the TTL: " + ", ".join(f"{n}={values.get(n)}" for n in want_zero))
print("soak: served: " + ", ".join(
    f'{k.split("code=")[1].rstrip("}")}={int(v)}' for k, v in sorted(values.items())
    if k.startswith('specverify_requests_total{') and 'rpc="Verify"' in k and v > 0))
expired = values.get("specverify_kv_handles_expired_total", 0)
print(f"soak: handles expired by TTL: {int(expired)}")
if bad:
    print("soak: FAILED: not back to zero: " + ", ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
kill -TERM "$SERVER_PID"
wait "$SERVER_PID"
server_rc=$?
SERVER_PID=""
if [ "$server_rc" -ne 0 ]; then
  echo "soak: FAILED: the server exited $server_rc on SIGTERM" >&2
  status=1
fi
echo "soak: $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
