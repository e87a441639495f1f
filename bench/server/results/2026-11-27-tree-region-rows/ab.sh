#!/usr/bin/env bash
# Greedy token trees whose KV rows are in the worker's CUDA region: the tree
# pack reads each tree's accepted rows where they are (kv_sources, new)
# against gathering every node's row into the staging first (old: the server
# of fc3148d, whose tree path is the one before this change), alternating per
# round in one run on one GPU. Loadgen as the co-located worker
# (--transport=cuda), EAGLE-style trees, alpha 0.8, 4 trees a request, 4 KiB
# rows; KV returned into the region and inline; c = 1 and 16; every answer
# checked against the oracle; server /metrics for device time per batch.
# Build and bundle:
#   ninja -C build-gpu specverify-server specverify-loadgen
#   scripts/gpu-bundle.sh build-gpu .gpu-tr specverify-server specverify-loadgen
#   cp <fc3148d's build>/server/specverify-server .gpu-tr/bin/specverify-server-old; strip .gpu-tr/bin/*
# Run: run(carry=[".gpu-tr"]): bash bench/server/results/2026-11-27-tree-region-rows/ab.sh .gpu-tr $OUT/ab
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
duration=${DURATION:-3}
rounds=${ROUNDS:-3}
returns=${RETURNS:-region inline}
status=0
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} | tee "$out/machine.txt"
start_server() {  # server-binary tag port
  "$1" --listen_address=127.0.0.1:"$3" --metrics_address=127.0.0.1:50602 --device=cuda:0 \
      --max_message_bytes=134217728 > "$out/server-$2.stdout" 2> "$out/server-$2.log" &
  server_pid=$!
  for _ in $(seq 1 400); do
    grep -q "listening on port" "$out/server-$2.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $2 did not start" >&2; cat "$out/server-$2.log" >&2
  return 1
}
trees=(--tree=eagle --alpha=0.8 --sequences-per-request=4 --row-bytes=4096 --pool-requests=32
       --concurrency=1,16 --transport=cuda)
for round in $(seq 1 "$rounds"); do
  for version in old new; do
    server=$bin/specverify-server
    [ "$version" = old ] && server=$bin/specverify-server-old
    start_server "$server" "$version-r$round" 50601 || exit 1
    for ret in $returns; do
      tag=$version-$ret-r$round
      "$bin/specverify-loadgen" --address=127.0.0.1:50601 --duration="${duration}s" \
          --warmup=0.5s --json="$out/$tag.json" --quiet "${trees[@]}" --kv-return=$ret \
          --metrics-url=http://127.0.0.1:50602/metrics \
          > "$out/$tag.txt" 2>&1 || { echo "$tag: loadgen exit $?"; tail -3 "$out/$tag.txt"; status=1; }
    done
    kill -TERM "$server_pid"
    wait "$server_pid" || { echo "server $version exited non-zero"; status=1; }
  done
done
python3 - "$out" <<'PY' | tee "$out/ab.md"
import glob, json, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*-r*.json"))):
    version, ret, rnd = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    for step in d["steps"]:
        r = step["result"]
        lat = r["latency_ns"]["intended"]
        srv = r["latency_ns"].get("server_total", {})
        rows.setdefault((ret, r.get("concurrency"), version), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, lat["p99"] / 1e3, srv.get("p50", 0) / 1e3,
             r.get("wrong_answers", -1) + r.get("kv_mismatches", 0), r.get("rpc_errors", -1),
             r.get("server_metrics", {}).get("device_time_mean_s", 0) * 1e6))
print("| KV return | c | version | req/s per round | p50 us per round | p99 us per round | server total p50 us per round | device time mean us/batch per round | wrong | rpc errors |")
print("|---|---:|---|---|---|---|---|---|---:|---:|")
for (ret, c, version), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    print(f"| {ret} | {c} | {version} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {f(2, '{:.1f}')} | {f(3, '{:.1f}')} | {f(6, '{:.1f}')} | {sum(x[4] for x in v)} | {sum(x[5] for x in v)} |")
PY
echo "ab: exit $status"
exit $status
