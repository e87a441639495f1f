#!/usr/bin/env bash
# The load generator's resending streams (--resend-unanswered, c5f0090)
# through a restart of a GPU server (until now run against the CPU server
# only: LoadgenStreamRestartTest). Per case: specverify-server
# --device=${DEVICE:-cuda:0} on a fixed port; once it listens, the loadgen (closed
# loop, --rpc=stream, 2 channels, concurrency 8, 5 s, KV inline,
# --max_error_fraction=0: any failed RPC exits 3); 1.5 s in, SIGTERM (the
# server drains and must exit 0), then a new server on the same port. Cases:
# greedy and sampled (fp32 probabilities with draft rows, V=32000) with
# --resend_unanswered=20, and greedy without it (the control: its stream
# ends fail what they left unanswered).
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-t specverify-server specverify-loadgen
# Run: bash bench/server/results/2026-11-29-gpu-restart/run1.sh .gpu-t $OUT/restart
# (The first attempt, 11:04 UTC, lost the servers' exit codes to a subshell and
# gave the sampled case a pool over the loadgen's 2 GiB limit: setup error.)
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; } | tee "$out/machine.txt"
start_server() {  # port, log; sets server_pid once the server listens (a child of this shell, for wait)
  "$bundle/bin/specverify-server" --device=${DEVICE:-cuda:0} --metrics_address= --listen_address="127.0.0.1:$1" > "$2" 2>&1 &
  server_pid=$!
  local waited=0
  until grep -q "listening on port" "$2" 2>/dev/null; do
    sleep 0.1
    waited=$((waited + 1))
    if [ "$waited" -gt 600 ] || ! kill -0 "$server_pid" 2>/dev/null; then
      echo "server did not start: $(tail -3 "$2")" >&2
      break
    fi
  done
}
run_case() {  # name, port, loadgen args...
  local name=$1 port=$2
  shift 2
  start_server "$port" "$out/$name-server1.log"
  local first=$server_pid
  "$bundle/bin/specverify-loadgen" --address="127.0.0.1:$port" --rpc=stream --channels=2 --concurrency=8 \
    --duration=5s --warmup=0s --kv_return=inline --gamma=8 --sequences_per_request=4 --max_error_fraction=0 \
    --deadline=10s --json="$out/$name.json" "$@" > "$out/$name-loadgen.txt" 2>&1 &
  local loadgen=$!
  sleep 1.5
  kill -TERM "$first"
  wait "$first"
  local first_rc=$?
  start_server "$port" "$out/$name-server2.log"
  local second=$server_pid
  wait "$loadgen"
  local loadgen_rc=$?
  kill -TERM "$second"
  wait "$second"
  local second_rc=$?
  echo "$name: loadgen exit $loadgen_rc, first server exit $first_rc, second server exit $second_rc;" \
    "$(grep -E 'ok=|verdict|error' "$out/$name-loadgen.txt" | head -4 | tr '\n' ' ')"
}
run_case greedy-resend 50151 --resend_unanswered=20 --row_bytes=4096
run_case sampled-resend 50152 --resend_unanswered=20 --mode=sampled --vocab=32000 --draft_probs --pool_requests=64
run_case greedy-no-resend 50153 --row_bytes=4096
