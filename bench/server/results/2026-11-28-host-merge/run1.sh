#!/usr/bin/env bash
# Sampled chain batches served with the host-finished race merge (new: the
# race blocks leave their winners in slots the completion folds, 444a2bb and
# after) against the device merge (old: the server binary of aa36a4b, the
# commit before), alternating old/new per round in one run on one GPU.
#
# loadgen as the co-located worker (--transport=cuda: distribution rows read
# in place from its CUDA IPC region), B = 8 sequences a request, gamma = 8,
# V = 151,936, c = 1, every answer checked against the CPU reference:
#   fp32 probabilities with draft rows, bf16 logits without.
# The server's mean device time per batch (its histogram, scraped before and
# after each step) is the figure the change moves; the round trip is
# gRPC-bound.
#
# Build here (Release, sm_90) and bundle:
#   cmake --build build-gpu --target specverify-server specverify-loadgen
#   scripts/gpu-bundle.sh build-gpu .gpu-pack specverify-server specverify-loadgen
#   cp <aa36a4b build>/server/specverify-server .gpu-pack/bin/specverify-server-old (stripped)
# Run: run(carry=[".gpu-pack"]): bash bench/server/results/2026-11-28-host-merge/run1.sh .gpu-pack $OUT
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
duration=${DURATION:-3}
rounds=${ROUNDS:-4}
status=0
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
} | tee "$out/machine.txt"

start_server() {  # server-binary tag port
  "$1" --listen_address=127.0.0.1:"$3" --metrics_address=127.0.0.1:9471 --device=cuda:0 \
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

sampled=(--mode=sampled --gamma=8 --sequences-per-request=8 --vocab=151936 --row-bytes=0
         --kv-return=none --pool-requests=2 --concurrency=1 --transport=cuda)
for round in $(seq 1 "$rounds"); do
  for version in old new; do
    server=$bin/specverify-server
    [ "$version" = old ] && server=$bin/specverify-server-old
    start_server "$server" "$version-r$round" 50701 || exit 1
    for kind in fp32-probs bf16-logits; do
      dtype=${kind%%-*}; k=${kind#*-}
      tag=$version-$kind-r$round
      "$bin/specverify-loadgen" --address=127.0.0.1:50701 --duration="${duration}s" \
          --warmup=0.5s --json="$out/$tag.json" --quiet "${sampled[@]}" --dtype="$dtype" --kind="$k" \
          --metrics-url=http://127.0.0.1:9471/metrics \
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
    version, dtype, kind, rnd = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    for step in d["steps"]:
        r = step["result"]
        lat = r["latency_ns"]["intended"]
        srv = r["latency_ns"].get("server_total", {})
        device = step.get("server_metrics", r.get("server_metrics", {})).get("device_time_mean_s", 0)
        rows.setdefault((f"{dtype} {kind}", version), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, lat["p99"] / 1e3,
             srv.get("p50", 0) / 1e3, device * 1e6, r.get("wrong_answers", -1)))
print("| workload | version | req/s per round | p50 us per round | p99 us per round | server total p50 us per round | device time mean us per round | wrong |")
print("|---|---|---|---|---|---|---|---:|")
for (w, version), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    print(f"| {w} | {version} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {f(2, '{:.1f}')} | {f(3, '{:.1f}')} | {f(4, '{:.2f}')} | {sum(x[5] for x in v)} |")
PY
echo "run1: exit $status"
exit $status
