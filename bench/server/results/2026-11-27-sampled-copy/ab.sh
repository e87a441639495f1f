#!/usr/bin/env bash
# Runs 1, 2 and 4. Sampled batches whose KV rows are in the worker's CUDA region: one copy of
# the accepted rows after the sampler (new) against gathering every row, the
# greedy pack and, for region returns, a delivery (old: the server of
# fc3148d, whose server code is e963a40's), alternating per round in one run
# on one GPU. Loadgen as the co-located worker (--transport=cuda: KV rows and
# distributions in its cudaMalloc'd region, by CUDA IPC), fp32
# probabilities, gamma=8, V=151,936, 4 sequences a request, 4 KiB rows; KV
# returned into the region, inline and as handles; c = 1 and 16; every
# answer checked (region rows read back, 5% of handles fetched). Run 2 adds
# the server's /metrics (--metrics-url): device time per batch (CUDA events
# around the batch's kernels), the figure this change moves.
# Build and bundle:
#   git stash; ninja -C build-gpu specverify-server; cp build-gpu/server/specverify-server /tmp/old-bin/specverify-server-old; git stash pop
#   ninja -C build-gpu specverify-server specverify-loadgen
#   scripts/gpu-bundle.sh build-gpu .gpu-sb specverify-server specverify-loadgen
#   cp /tmp/old-bin/specverify-server-old .gpu-sb/bin/; strip .gpu-sb/bin/*
# Run: run(carry=[".gpu-sb"]): bash bench/server/results/2026-11-27-sampled-copy/ab.sh .gpu-sb $OUT
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
duration=${DURATION:-3}
rounds=${ROUNDS:-3}
returns=${RETURNS:-region inline handle}
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
sampled=(--mode=sampled --gamma=8 --sequences-per-request=4 --vocab=151936 --dtype=fp32
         --kind=probs --row-bytes=4096 --pool-requests=16 --concurrency=1,16
         --max-message-bytes=134217728 --transport=cuda)
for round in $(seq 1 "$rounds"); do
  for version in old new; do
    server=$bin/specverify-server
    [ "$version" = old ] && server=$bin/specverify-server-old
    start_server "$server" "$version-r$round" 50601 || exit 1
    for ret in $returns; do
      tag=$version-$ret-r$round
      "$bin/specverify-loadgen" --address=127.0.0.1:50601 --duration="${duration}s" \
          --warmup=0.5s --json="$out/$tag.json" --quiet "${sampled[@]}" --kv-return=$ret \
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
