#!/usr/bin/env bash
# Host-decided greedy batches whose requests return their rows into the
# worker's region (KV_RETURN_REGION): one row gather straight into kv_output
# (new) against a gather into the arena and a delivery kernel after it (old:
# the server binary of d837c1e, the last server change before this one),
# alternating old/new per round in one run on one GPU.
#
# Tests first (the same bundle's binaries), then the A/B:
#   loadgen as the co-located worker, --transport=cuda (its cudaMalloc'd
#   region by CUDA IPC) and shm, gamma=8, 4 sequences a request, 4 KiB rows,
#   --kv-return=region, c = 1 and 64, every answer checked.
#
# Build here (Release, sm_90) and bundle:
#   cmake --build build-gpu --target specverify-server specverify-loadgen row_copy_cuda_test \
#       cuda_executor_test region_server_test cuda_region_test cuda_ipc_worker
#   scripts/gpu-bundle.sh build-gpu .gpu-dr specverify-server specverify-loadgen
#   cp <d837c1e build>/server/specverify-server .gpu-dr/bin/specverify-server-old (stripped)
# Run: run(carry=[".gpu-dr"]): bash bench/server/results/2026-11-27-direct-region/run1.sh .gpu-dr $OUT
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
duration=${DURATION:-3}
rounds=${ROUNDS:-3}
status=0
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} | tee "$out/machine.txt"

start_server() {  # server-binary tag port
  "$1" --listen_address=127.0.0.1:"$3" --metrics_address= --device=cuda:0 \
      > "$out/server-$2.stdout" 2> "$out/server-$2.log" &
  server_pid=$!
  for _ in $(seq 1 400); do
    grep -q "listening on port" "$out/server-$2.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $2 did not start" >&2
  cat "$out/server-$2.log" >&2
  return 1
}

greedy=(--gamma=8 --sequences-per-request=4 --row-bytes=4096 --pool-requests=256
        --kv-return=region --concurrency=1,64)
for round in $(seq 1 "$rounds"); do
  for version in old new; do
    server=$bin/specverify-server
    [ "$version" = old ] && server=$bin/specverify-server-old
    start_server "$server" "$version-r$round" 50601 || exit 1
    for transport in cuda shm; do
      tag=$version-$transport-r$round
      "$bin/specverify-loadgen" --address=127.0.0.1:50601 --duration="${duration}s" \
          --warmup=0.5s --json="$out/$tag.json" --quiet "${greedy[@]}" --transport=$transport \
          > "$out/$tag.txt" 2>&1 || { echo "$tag: loadgen exit $?"; tail -3 "$out/$tag.txt"; status=1; }
    done
    kill -TERM "$server_pid"
    wait "$server_pid" || { echo "server $version exited non-zero"; status=1; }
  done
done

python3 - "$out" <<'PY' | tee "$out/ab.md"
import glob, json, os, sys, statistics
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*-r*.json"))):
    version, transport, rnd = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    for step in d["steps"]:
        r = step["result"]
        c = r.get("concurrency")
        lat = r["latency_ns"]["intended"]
        srv = r["latency_ns"].get("server_total", {})
        rows.setdefault((transport, c, version), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, lat["p99"] / 1e3,
             srv.get("p50", 0) / 1e3, r.get("wrong_answers", -1)))
print("| transport | c | version | req/s per round | p50 us per round | p99 us per round | server total p50 us per round | wrong |")
print("|---|---:|---|---|---|---|---|---:|")
for (transport, c, version), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    print(f"| {transport} | {c} | {version} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {f(2, '{:.1f}')} | {f(3, '{:.1f}')} | {sum(x[4] for x in v)} |")
PY
echo "run1: exit $status"
exit $status
