#!/usr/bin/env bash
# Run 3: would every sampled chain batch with KV rows be better off with the
# one accepted-row copy, also with its rows staged inline and returned
# inline or as handles (today: sampler + greedy pack)? "all": the committed
# server with SampledChainCopiesAcceptedRows() true for every sampled chain
# with KV rows (all-sampled.patch) against "new" (4e14a2d's server),
# alternating per round; rows in the messages (--transport=inline).
#   b4:  fp32 probabilities, V=151,936, 4 sequences a request, c = 1, 16
#   b64: fp32 probabilities, V=8,192, 64 sequences a request, c = 1, 8
#        (the copy's per-block prefix reads every earlier k of its output)
# gamma=8, 4 KiB rows, KV inline and handle, every answer checked, server
# /metrics for device time per batch.
# Build and bundle: as ab.sh, plus (with all-sampled.patch applied)
#   ninja -C build-gpu specverify-server; cp build-gpu/server/specverify-server .gpu-sb/bin/specverify-server-all
# Run: run(carry=[".gpu-sb"]): bash bench/server/results/2026-11-27-sampled-copy/ab2.sh .gpu-sb $OUT/ab3
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
common=(--mode=sampled --gamma=8 --dtype=fp32 --kind=probs --row-bytes=4096
        --max-message-bytes=134217728 --transport=inline)
b4=(--sequences-per-request=4 --vocab=151936 --pool-requests=8 --concurrency=1,16)
b64=(--sequences-per-request=64 --vocab=8192 --pool-requests=4 --concurrency=1,8)
for round in $(seq 1 "$rounds"); do
  for version in new all; do
    server=$bin/specverify-server
    [ "$version" = all ] && server=$bin/specverify-server-all
    start_server "$server" "$version-r$round" 50601 || exit 1
    for load in b4 b64; do
      declare -n load_args=$load
      for ret in inline handle; do
        tag=$version-$load.$ret-r$round
        "$bin/specverify-loadgen" --address=127.0.0.1:50601 --duration="${duration}s" \
            --warmup=0.5s --json="$out/$tag.json" --quiet "${common[@]}" "${load_args[@]}" \
            --kv-return=$ret --metrics-url=http://127.0.0.1:50602/metrics \
            > "$out/$tag.txt" 2>&1 || { echo "$tag: loadgen exit $?"; tail -3 "$out/$tag.txt"; status=1; }
      done
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
    version, load, rnd = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    for step in d["steps"]:
        r = step["result"]
        lat = r["latency_ns"]["intended"]
        srv = r["latency_ns"].get("server_total", {})
        rows.setdefault((load, r.get("concurrency"), version), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, srv.get("p50", 0) / 1e3,
             r.get("server_metrics", {}).get("device_time_mean_s", 0) * 1e6,
             r.get("wrong_answers", -1) + r.get("kv_mismatches", 0), r.get("rpc_errors", -1)))
print("| load.return | c | version | req/s per round | p50 us per round | server total p50 us per round | device time mean us/batch per round | wrong | rpc errors |")
print("|---|---:|---|---|---|---|---|---:|---:|")
for (load, c, version), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    print(f"| {load} | {c} | {version} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {f(2, '{:.1f}')} | {f(3, '{:.1f}')} | {sum(x[4] for x in v)} | {sum(x[5] for x in v)} |")
PY
echo "ab2: exit $status"
exit $status
