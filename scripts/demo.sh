#!/usr/bin/env bash
# The README's run command. Installs what is missing, builds the server and
# the load generator, starts specverify-server --device=auto (CUDA when a GPU
# is visible, else the CPU backend) and a --device=noop server (the transport
# ceiling) on free loopback ports, waits until both answer health SERVING,
# drives a short closed-loop sweep with every answer checked against the
# workload's oracle (and a sample of KV handles fetched and compared byte for
# byte), prints the report, and stops both servers with SIGTERM.
#
# Exit status: non-zero when any answer was wrong, a server failed to start,
# or a server did not exit 0 after SIGTERM.
#
# Environment: BUILD_DIR (default build), JOBS (build parallelism),
# DEMO_CONCURRENCY (default 1,8,64), DEMO_DURATION (default 3s per step),
# DEMO_OUT (where the JSON/CSV reports and server logs go; default a new
# temporary directory), DEMO_FULL_BUILD=1 to build everything with
# scripts/build.sh instead of only the two executables.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
CONCURRENCY=${DEMO_CONCURRENCY:-1,8,64}
DURATION=${DEMO_DURATION:-3s}
OUT=${DEMO_OUT:-$(mktemp -d -t specverify-demo.XXXXXX)}
mkdir -p "$OUT"

say() { printf '\n== %s\n' "$*"; }

say "dependencies"
scripts/install-deps.sh

say "build (${BUILD_DIR})"
if [ "${DEMO_FULL_BUILD:-0}" = 1 ]; then
  BUILD_DIR="$BUILD_DIR" JOBS="$JOBS" scripts/build.sh
else
  # Same configuration as scripts/build.sh; only the two executables the demo
  # runs are built, so a fresh machine does not compile every test first.
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS" --target specverify-server specverify-loadgen
fi
SERVER_BIN="$BUILD_DIR/server/specverify-server"
LOADGEN_BIN="$BUILD_DIR/client/specverify-loadgen"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

SERVER_PID=""
NOOP_PID=""
cleanup() {
  for pid in $SERVER_PID $NOOP_PID; do
    if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
  done
}
trap cleanup EXIT

# Starts a server in the background; sets STARTED_PID and STARTED_PORT (read
# from its "listening on port N" line; start-up includes CUDA initialization
# and the dispatch calibration on a GPU, hence the generous wait).
start_server() {
  local name=$1
  shift
  "$SERVER_BIN" --listen_address=127.0.0.1:0 "$@" \
    >"$OUT/$name.stdout" 2>"$OUT/$name.log" &
  STARTED_PID=$!
  STARTED_PORT=""
  for _ in $(seq 1 1200); do
    STARTED_PORT=$(sed -n 's/^listening on port \([0-9]*\)$/\1/p' "$OUT/$name.stdout")
    if [ -n "$STARTED_PORT" ]; then break; fi
    if ! kill -0 "$STARTED_PID" 2>/dev/null; then
      echo "demo: $name server exited during start-up:" >&2
      cat "$OUT/$name.log" >&2
      exit 1
    fi
    sleep 0.1
  done
  if [ -z "$STARTED_PORT" ]; then
    echo "demo: $name server did not report its port within 120 s:" >&2
    cat "$OUT/$name.log" >&2
    exit 1
  fi
  sed -n '1p' "$OUT/$name.log"
}

say "servers"
METRICS_PORT=$(free_port)
start_server verifier --device=auto --metrics_address="127.0.0.1:$METRICS_PORT"
SERVER_PID=$STARTED_PID
SERVER_PORT=$STARTED_PORT
start_server noop --device=noop --metrics_address=
NOOP_PID=$STARTED_PID
NOOP_PORT=$STARTED_PORT
echo "verifier on 127.0.0.1:$SERVER_PORT (metrics http://127.0.0.1:$METRICS_PORT/metrics)," \
     "no-op ceiling on 127.0.0.1:$NOOP_PORT"

say "load: closed loop, concurrency $CONCURRENCY, $DURATION per step, greedy gamma=8, 512 B rows"
set +e
"$LOADGEN_BIN" \
  --address="127.0.0.1:$SERVER_PORT" \
  --ceiling_address="127.0.0.1:$NOOP_PORT" --raw_ceiling \
  --wait_for_serving=120s \
  --concurrency="$CONCURRENCY" --duration="$DURATION" --warmup=1s \
  --gamma=8 --alpha=0.6 --sequences_per_request=4 --row_bytes=512 \
  --kv_return=handle --fetch_kv_fraction=0.05 \
  --metrics_url="http://127.0.0.1:$METRICS_PORT/metrics" \
  --json="$OUT/loadgen.json" --csv="$OUT/loadgen.csv"
LOADGEN_STATUS=$?
set -e
cat <<'NOTE'

How to read the tables: [noop] is the no-op server (same RPCs, every draft
row kept: its handles are fetched and released like the server's), [raw] is
VerifyCeiling, a plain gRPC round trip of the same size answered on the
server's RPC thread. "p50 added" is what verification costs beyond that
round trip. Client, servers and checking share this machine's cores, so this
is a smoke test of the whole path; the targets are measured like for like on
the GPU (docs/PERFORMANCE.md, "Serving latency").
NOTE

say "shutdown"
status=0
for entry in "verifier:$SERVER_PID" "noop:$NOOP_PID"; do
  name=${entry%%:*}
  pid=${entry#*:}
  kill -TERM "$pid"
  set +e
  wait "$pid"
  code=$?
  set -e
  if [ "$code" -eq 0 ]; then
    echo "$name server: drained, exit code 0"
  else
    echo "demo: $name server exited with $code after SIGTERM (log: $OUT/$name.log)" >&2
    status=1
  fi
done
SERVER_PID=""
NOOP_PID=""

echo "reports: $OUT/loadgen.json, $OUT/loadgen.csv; server logs: $OUT/*.log"
if [ "$LOADGEN_STATUS" -ne 0 ]; then
  echo "demo: specverify-loadgen exited with $LOADGEN_STATUS (1 = wrong answers, 2 = setup error, 3 = too many RPC errors)" >&2
  exit "$LOADGEN_STATUS"
fi
exit "$status"
