#!/usr/bin/env bash
# The co-located worker's gRPC connection over a UNIX-domain socket
# (--listen_address=unix:PATH) against loopback TCP (127.0.0.1:PORT): the
# same server binary, alternating TCP / unix per round, a fresh server each
# time, the loadgen as the worker on the same host.
#
#   noop:        --device=noop (gRPC and the RPC layer alone), greedy
#                requests of 4 sequences, gamma 8, tokens only, c = 1
#   greedy-4k:   cuda:0, 4 sequences, gamma 8, 4 KiB rows from the worker's
#                CUDA region, KV kept as a handle
#   fp32-probs:  cuda:0, 8 sequences, gamma 8, V = 151,936 fp32
#                probabilities with draft rows read in place from the
#                worker's CUDA region, KV none
# at concurrency 1 and 64 (noop: 1), every answer checked against the CPU
# reference.
#
# Build here (Release, sm_90) and bundle:
#   cmake --build build-gpu --target specverify-server specverify-loadgen
#   scripts/gpu-bundle.sh build-gpu .gpu-us specverify-server specverify-loadgen
# Run 1: ROUNDS=3 bash bench/server/results/2026-11-28-unix-socket/run.sh .gpu-us $OUT/run1
#   (its sampled c = 64 steps asked for a pool of 64 requests and were refused);
# run 2: ROUNDS=3 CONCURRENCIES=64 KINDS=fp32probs ... $OUT/run2
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
duration=${DURATION:-3}
rounds=${ROUNDS:-3}
socket_dir=$(mktemp -d /tmp/specverify-us-XXXXXX)
status=0
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  nproc
} | tee "$out/machine.txt"

start_server() {  # address device tag
  "$bin/specverify-server" --listen_address="$1" --metrics_address=127.0.0.1:50712 \
      --device="$2" > "$out/server-$3.stdout" 2> "$out/server-$3.log" &
  server_pid=$!
  for _ in $(seq 1 400); do
    grep -q "listening on" "$out/server-$3.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $3 did not start" >&2
  cat "$out/server-$3.log" >&2
  return 1
}

run_loadgen() {  # address tag conc pool args...
  local address=$1 tag=$2 conc=$3 pool=$4
  shift 4
  "$bin/specverify-loadgen" --address="$address" --metrics_url=http://127.0.0.1:50712/metrics \
      --duration="${duration}s" --warmup=0.5s --quiet --concurrency="$conc" \
      --pool-requests="$pool" "$@" --json="$out/$tag.json" \
      > "$out/$tag.txt" 2>&1 || { echo "$tag: loadgen exit $?"; tail -3 "$out/$tag.txt"; status=1; }
}

for round in $(seq 1 "$rounds"); do
  for transport in tcp unix; do
    address=127.0.0.1:50711
    [ "$transport" = unix ] && address=unix:$socket_dir/verifier.sock
    if [[ " ${KINDS:-noop greedy4k fp32probs} " == *" noop "* ]]; then
      start_server "$address" noop "$transport-noop-r$round" || exit 1
      run_loadgen "$address" "$transport-noop-c1-r$round" 1 2 --mode=greedy --gamma=8 \
          --sequences-per-request=4 --row-bytes=0 --kv-return=none
      kill -TERM "$server_pid"; wait "$server_pid" || { echo "noop server exit $?"; status=1; }
    fi

    start_server "$address" cuda:0 "$transport-cuda-r$round" || exit 1
    for conc in ${CONCURRENCIES:-1 64}; do
      if [[ " ${KINDS:-noop greedy4k fp32probs} " == *" greedy4k "* ]]; then
        run_loadgen "$address" "$transport-greedy4k-c$conc-r$round" "$conc" "$((conc < 2 ? 2 : conc))" \
            --transport=cuda --mode=greedy --gamma=8 --sequences-per-request=4 --row-bytes=4096 \
            --kv-return=handle
      fi
      # Sampled pools stop at 8 requests: 64 would be 10.6 GB of rows, over
      # the loadgen's 2 GiB limit.
      if [[ " ${KINDS:-noop greedy4k fp32probs} " == *" fp32probs "* ]]; then
        run_loadgen "$address" "$transport-fp32probs-c$conc-r$round" "$conc" "$((conc < 2 ? 2 : 8))" \
            --transport=cuda --mode=sampled --gamma=8 --sequences-per-request=8 --vocab=151936 \
            --row-bytes=0 --kv-return=none --dtype=fp32 --kind=probs
      fi
    done
    kill -TERM "$server_pid"; wait "$server_pid" || { echo "cuda server exit $?"; status=1; }
  done
done
rm -rf "$socket_dir"

python3 - "$out" <<'PY' | tee "$out/ab.md"
import glob, json, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*-r*.json"))):
    transport, workload, conc, rnd = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    for step in d["steps"]:
        r = step["result"]
        lat = r["latency_ns"]["intended"]
        srv = r["latency_ns"].get("server_total", {}).get("p50", 0) / 1e3
        rows.setdefault((f"{workload} {conc}", transport), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, lat["p99"] / 1e3, srv,
             r.get("wrong_answers", -1) + r.get("kv_mismatches", 0), r.get("rpc_errors", -1)))
print("| workload | transport | req/s per round | client p50 us | client p99 us | server total p50 us | wrong | rpc errors |")
print("|---|---|---|---|---|---|---:|---:|")
for (w, transport), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    print(f"| {w} | {transport} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {f(2, '{:.1f}')} | {f(3, '{:.1f}')} | {sum(x[4] for x in v)} | {sum(x[5] for x in v)} |")
PY
echo "run: exit $status"
exit $status
