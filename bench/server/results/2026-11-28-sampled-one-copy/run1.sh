#!/usr/bin/env bash
# A sampled batch's section (per-sequence parameters, row tables, staged
# rows) staged right after its inputs and carried by the inputs' H2D copy
# (new) against its own second H2D copy (old: the server of 530342e, the
# commit before), alternating old/new per round in one run on one GPU,
# fresh server each time, at concurrency 1 and 64.
#
# loadgen as the co-located worker (--transport=cuda: rows read in place
# from its CUDA IPC region), every answer checked against the CPU
# reference; server stages from each answer's ServerTiming; device time per
# batch from the server's metrics (start -> stop events around the kernels):
#   sampled: B = 8 sequences a request, gamma = 8, V = 151,936, KV none:
#            fp32 probabilities with draft rows, bf16 logits without;
#   greedy:  4 sequences, gamma = 8, 4 KiB rows, KV handle (unchanged path:
#            a control for the machine's drift between rounds).
#
# Build here (Release, sm_90) and bundle:
#   cmake --build build-gpu --target specverify-server specverify-loadgen
#   scripts/gpu-bundle.sh build-gpu .gpu-oc specverify-server specverify-loadgen
#   cp <530342e build>/server/specverify-server .gpu-oc/bin/specverify-server-old (stripped)
# Run 1: ROUNDS=3 bash bench/server/results/2026-11-28-sampled-one-copy/run1.sh .gpu-oc $OUT/run1
#   (its sampled steps at c = 64 stopped at the loadgen's 2 GiB pool limit);
# run 2: CONCURRENCIES=64 KINDS="fp32-probs bf16-logits" POOL=8 ROUNDS=3 ... $OUT/run2
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

start_server() {  # server-binary tag
  "$1" --listen_address=127.0.0.1:50701 --metrics_address=127.0.0.1:50702 \
      --device=cuda:0 > "$out/server-$2.stdout" 2> "$out/server-$2.log" &
  server_pid=$!
  for _ in $(seq 1 400); do
    grep -q "listening on port" "$out/server-$2.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $2 did not start" >&2
  cat "$out/server-$2.log" >&2
  return 1
}

for round in $(seq 1 "$rounds"); do
  for version in old new; do
    server=$bin/specverify-server
    [ "$version" = old ] && server=$bin/specverify-server-old
    start_server "$server" "$version-r$round" || exit 1
    for conc in ${CONCURRENCIES:-1 64}; do
    common=(--address=127.0.0.1:50701 --metrics_url=http://127.0.0.1:50702/metrics --duration="${duration}s"
            --warmup=0.5s --quiet --concurrency="$conc" --transport=cuda --pool-requests="${POOL:-$((conc < 2 ? 2 : conc))}")
    for kind in ${KINDS:-fp32-probs bf16-logits greedy-4k}; do
      tag=$version-$kind-c$conc-r$round
      if [ "$kind" = greedy-4k ]; then
        args=(--mode=greedy --gamma=8 --sequences-per-request=4 --row-bytes=4096 --kv-return=handle)
      else
        dtype=${kind%%-*}; k=${kind#*-}
        args=(--mode=sampled --gamma=8 --sequences-per-request=8 --vocab=151936 --row-bytes=0
              --kv-return=none --dtype="$dtype" --kind="$k")
      fi
      "$bin/specverify-loadgen" "${common[@]}" "${args[@]}" --json="$out/$tag.json" \
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
    version, a, b, conc, rnd = os.path.basename(path)[:-5].split("-")
    d = json.load(open(path))
    for step in d["steps"]:
        r = step["result"]
        lat = r["latency_ns"]["intended"]
        srv = r["latency_ns"].get("server_total", {})
        m = r.get("server_metrics", {})
        p50 = lambda key: r["latency_ns"].get(key, {}).get("p50", 0) / 1e3
        rows.setdefault((f"{a}-{b} {conc}", version), []).append(
            (r["requests_per_s"], lat["p50"] / 1e3, srv.get("p50", 0) / 1e3,
             m.get("device_time_mean_s", 0) * 1e6, r.get("wrong_answers", -1) + r.get("kv_mismatches", 0),
             r.get("rpc_errors", -1), p50("server_queue"), p50("server_submit"), p50("server_complete"),
             (r["latency_ns"].get("server_complete", {}).get("mean", 0) - r["latency_ns"].get("server_submit", {}).get("mean", 0)) / 1e3))
print("| workload | version | req/s per round | client p50 us | server queue / submit / complete / total p50 us | backend part (complete - submit) mean us | device us per batch (mean) | wrong | rpc errors |")
print("|---|---|---|---|---|---|---|---:|---:|")
for (w, version), v in sorted(rows.items()):
    f = lambda i, fmt: " / ".join(fmt.format(x[i]) for x in v)
    stages = " ; ".join(f"{x[6]:.1f} / {x[7]:.1f} / {x[8]:.1f} / {x[2]:.1f}" for x in v)
    print(f"| {w} | {version} | {f(0, '{:.0f}')} | {f(1, '{:.1f}')} | {stages} | {f(9, '{:.1f}')} | {f(3, '{:.2f}')} | {sum(x[4] for x in v)} | {sum(x[5] for x in v)} |")
PY
echo "run1: exit $status"
exit $status
