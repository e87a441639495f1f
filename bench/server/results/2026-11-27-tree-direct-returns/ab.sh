#!/usr/bin/env bash
# Token trees whose KV rows are answered into the worker's CUDA region: the
# tree pack writes those requests' rows into their outputs (row
# destinations, new) against packing them into the arena and delivering them
# with a second launch (old: the server of 15b5e72), alternating per round
# in one run on one GPU. Loadgen as the co-located worker (--transport=cuda:
# inputs in its CUDA region), EAGLE-style trees, alpha 0.8, 4 trees a
# request, 4 KiB rows; greedy trees answered into the region and inline (the
# control: unchanged path), sampled trees (fp32 probabilities, V=32,000)
# into the region; c = 1 and 16; every answer checked; server /metrics for
# device time per batch. Before it, tree_bench of d07a9fb (the greedy tree
# kernel before kv_sources) and of this commit, alternating, two rounds:
# staged rows, nothing else changed for them.
# Build and bundle:
#   ninja -C build-gpu specverify-server specverify-loadgen tree_bench
#   scripts/gpu-bundle.sh build-gpu .gpu-tb tree_bench tree_cuda_test
#   cp <d07a9fb's build>/bench/tree_bench .gpu-tb/bin/tree_bench_old
#   cp <15b5e72's build>/bench/tree_bench .gpu-tb/bin/tree_bench_head; strip .gpu-tb/bin/*
#   scripts/gpu-bundle.sh build-gpu .gpu-ab specverify-server specverify-loadgen
#   cp <15b5e72's build>/server/specverify-server .gpu-ab/bin/specverify-server-old; strip .gpu-ab/bin/*
# Run (two calls, one bundle each, on the same warm machine):
#   run(carry=[".gpu-tb"]): bash bench/server/results/2026-11-27-tree-direct-returns/ab.sh .gpu-tb $OUT/tb
#   run(carry=[".gpu-ab"]): bash bench/server/results/2026-11-27-tree-direct-returns/ab.sh .gpu-ab $OUT/ab
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
# tree_bench_old (d07a9fb), tree_bench_head (15b5e72, when bundled) and
# tree_bench (this commit), alternating.
if [ -x "$bin/tree_bench_old" ]; then
  for round in 1 2; do
    for version in old head new; do
      b=$bin/tree_bench_$version; [ "$version" = new ] && b=$bin/tree_bench
      [ -x "$b" ] || continue
      timeout 300 "$b" --csv "$out/tree_bench-$version-r$round.csv" > "$out/tree_bench-$version-r$round.txt" 2>&1 \
        || { echo "tree_bench $version r$round: exit $?"; status=1; }
    done
  done
  [ -x "$bin/tree_cuda_test" ] && { timeout 300 "$bin/tree_cuda_test" --gtest_brief=1 > "$out/tree_cuda_test.txt" 2>&1; \
    echo "tree_cuda_test: rc=$? $(grep -E '^\[  PASSED' "$out/tree_cuda_test.txt")"; }
fi
# The carry limit holds the two servers or the two tree_benches, not both:
# a bundle of the tree_benches alone stops here.
[ -x "$bin/specverify-server" ] || { echo "tree_bench only: exit $status"; exit $status; }
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
    for run in ${RUNS:-greedy:region greedy:inline sampled:region}; do
      mode=${run%%:*}; ret=${run##*:}
      tag=$version-$mode.$ret-r$round
      extra=(); [ "$mode" = sampled ] && extra=(--mode=sampled --vocab=32000)
      "$bin/specverify-loadgen" --address=127.0.0.1:50601 --duration="${duration}s" \
          --warmup=0.5s --json="$out/$tag.json" --quiet "${trees[@]}" "${extra[@]}" --kv-return=$ret \
          --metrics-url=http://127.0.0.1:50602/metrics \
          > "$out/$tag.txt" 2>&1 || { echo "$tag: loadgen exit $?"; tail -3 "$out/$tag.txt"; status=1; }
    done
    kill -TERM "$server_pid"
    wait "$server_pid" || { echo "server $version exited non-zero"; status=1; }
  done
done
python3 - "$out" <<'PY' | tee "$out/ab.md"
import csv, glob, json, os, sys
out = sys.argv[1]
rows = {}
for path in sorted(glob.glob(os.path.join(out, "*-r*.json"))):
    version, run, rnd = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    for step in d["steps"]:
        r = step["result"]
        lat = r["latency_ns"]["intended"]
        srv = r["latency_ns"].get("server_total", {})
        rows.setdefault((run, r.get("concurrency"), version), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, lat["p99"] / 1e3, srv.get("p50", 0) / 1e3,
             r.get("wrong_answers", -1) + r.get("kv_mismatches", 0), r.get("rpc_errors", -1),
             r.get("server_metrics", {}).get("device_time_mean_s", 0) * 1e6))
print("| trees.return | c | version | req/s per round | p50 us per round | p99 us per round | server total p50 us per round | device time mean us/batch per round | wrong | rpc errors |")
print("|---|---:|---|---|---|---|---|---|---:|---:|")
for (run, c, version), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    print(f"| {run} | {c} | {version} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {f(2, '{:.1f}')} | {f(3, '{:.1f}')} | {f(6, '{:.1f}')} | {sum(x[4] for x in v)} | {sum(x[5] for x in v)} |")
# tree_bench: every row of both versions, per round, side by side.
bench = {}
for path in sorted(glob.glob(os.path.join(out, "tree_bench-*.csv"))):
    version, rnd = os.path.basename(path)[len("tree_bench-"):-4].split("-")
    for row in csv.DictReader(open(path)):
        bench.setdefault(version, []).append(row)
if bench:
    print()
    print("tree_bench rows: " + ", ".join(f"{v}: {len(r)}" for v, r in sorted(bench.items())))
PY
echo "ab: exit $status"
exit $status
