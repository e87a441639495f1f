#!/usr/bin/env bash
# Served sampled batches before and after the two-phase race sweep (47b06ee):
# the server of 499af6a's kernels (bin/specverify-server) and of 47b06ee
# (bin/specverify-server-new), alternating per round, a fresh server each
# time on a unix socket, specverify-loadgen as the co-located worker: B = 8
# sequences a request of the loadgen's mixed rows (peaked, flat, disjoint,
# identical), gamma 8, V = 151,936 fp32 probabilities with draft rows read in
# place from its CUDA region, KV none, every answer checked; c = 64 (pool 8)
# and c = 1 (pool 2).
#
# Bundle: scripts/gpu-bundle.sh build-gpu .gpu-sh specverify-server specverify-loadgen
#   (built before 47b06ee), plus build-gpu's server after it as bin/specverify-server-new.
# Run: ROUNDS=3 bash bench/server/results/2026-11-28-sampled-shapes/run.sh .gpu-sh $OUT/served
set -uo pipefail
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
socket_dir=$(mktemp -d /tmp/specverify-ss-XXXXXX)
address=unix:$socket_dir/verifier.sock
status=0
{ date -u +%Y-%m-%dT%H:%M:%SZ; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; nproc; } |
  tee "$out/machine.txt"
for round in $(seq 1 "${ROUNDS:-3}"); do
  for server in old new; do
    binary=$bin/specverify-server
    [ "$server" = new ] && binary=$bin/specverify-server-new
    "$binary" --listen_address="$address" --metrics_address=127.0.0.1:50722 --device=cuda:0 \
        > "$out/server-$server-r$round.stdout" 2> "$out/server-$server-r$round.log" &
    pid=$!
    for _ in $(seq 1 400); do grep -q "listening on" "$out/server-$server-r$round.stdout" 2>/dev/null && break; sleep 0.05; done
    for conc in 64 1; do
      tag=$server-c$conc-r$round
      "$bin/specverify-loadgen" --address="$address" --metrics_url=http://127.0.0.1:50722/metrics \
          --duration="${DURATION:-4}s" --warmup=0.5s --quiet --concurrency="$conc" \
          --pool-requests="$((conc < 2 ? 2 : 8))" --transport=cuda --mode=sampled --gamma=8 \
          --sequences-per-request=8 --vocab=151936 --row-bytes=0 --kv-return=none --dtype=fp32 --kind=probs \
          --json="$out/$tag.json" > "$out/$tag.txt" 2>&1 || { echo "$tag: loadgen exit $?"; status=1; }
    done
    kill -TERM "$pid"; wait "$pid" || { echo "$server server exit $?"; status=1; }
  done
done
rm -rf "$socket_dir"
python3 - "$out" <<'PY' | tee "$out/ab.md"
import glob, json, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*-c*-r*.json"))):
    server, conc, rnd = os.path.basename(path)[:-5].split("-")
    for step in json.load(open(path))["steps"]:
        r = step["result"]
        m = r.get("server_metrics", {})
        lat = r["latency_ns"]["intended"]
        batches = m.get("batches", 0) or 0
        seqs = r["sequences"] / batches if batches else 0
        rows.setdefault((conc, server), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, m.get("device_time_mean_s", 0) * 1e6, seqs,
             r.get("wrong_answers", -1), r.get("rpc_errors", -1)))
print("| c | server | req/s per round | client p50 us | device time per batch us (mean) | sequences per batch | wrong | rpc errors |")
print("|---|---|---|---|---|---|---:|---:|")
for (conc, server), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    print(f"| {conc} | {server} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {f(2, '{:.1f}')} | {f(3, '{:.1f}')} | {sum(x[4] for x in v)} | {sum(x[5] for x in v)} |")
PY
echo "run: exit $status"
exit $status
