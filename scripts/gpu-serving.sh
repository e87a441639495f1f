#!/usr/bin/env bash
# The serving report of issue #12, in one command on the GPU machine: servers
# on loopback -- --device=cuda:0, --device=cpu and --device=noop (the no-op
# ceiling), all with default flags -- then
#   1. concurrency 1, stage by stage: specverify-latency-breakdown alternates
#      Verify and VerifyCeiling (the raw-gRPC ceiling) on one connection, for
#      rows of 512 B and 4 KiB and KV none / inline / handle;
#   2. the sweep: specverify-loadgen, closed loop at c = 1, 8, 64, 256,
#      greedy gamma=8, 4 sequences per request, rows 512 B and 4 KiB, KV none /
#      inline / handle (+ every handle's rows fetched and compared), the GPU
#      server against the no-op server (and, when this loadgen has
#      --raw-ceiling / --compare-address, the raw ceiling and the CPU server
#      in the same invocation).
# Every answer is checked. Writes <out>/serving.md (the tables for
# docs/PERFORMANCE.md), every JSON report and log.
#
#   scripts/gpu-bundle.sh build .gpu-serving specverify-server specverify-loadgen \
#       specverify-latency-breakdown
#   run(carry=[".gpu-serving"]): scripts/gpu-serving.sh .gpu-serving $OUT/serving
#
# Environment: DURATION (s per step, default 2), WARMUP (default 0.5),
# CONCURRENCY (default 1,8,64,256), REQUESTS (c=1 pairs, default 2000),
# GPU_FLAGS (extra flags for the GPU server), GPU_DEVICE (default cuda:0; cpu
# to try the script on a machine without a GPU).
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 <bundle-dir> <out-dir>" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
duration=${DURATION:-2}
warmup=${WARMUP:-0.5}
concurrency=${CONCURRENCY:-1,8,64,256}
requests=${REQUESTS:-2000}
status=0

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  nproc
} > "$out/machine.txt"
cat "$out/machine.txt"

pids=()
start_server() {  # name port flags...
  local name=$1 port=$2
  shift 2
  "$bin/specverify-server" --listen_address=127.0.0.1:"$port" --metrics_address= "$@" \
      > "$out/server-$name.stdout" 2> "$out/server-$name.log" &
  pids+=($!)
  for _ in $(seq 1 300); do
    grep -q "listening on port" "$out/server-$name.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $name did not start" >&2
  cat "$out/server-$name.log" >&2
  return 1
}
# shellcheck disable=SC2086
start_server gpu 50401 --device="${GPU_DEVICE:-cuda:0}" ${GPU_FLAGS:-} || exit 1
start_server cpu 50402 --device=cpu --cpu_threads=8 || exit 1
start_server noop 50403 --device=noop || exit 1

# ---- 1. concurrency 1, stage by stage -------------------------------------
echo "| server | row B | kv | raw p50 | verify p50 | added p50 | verify p99 | queue p50 | submit p50 | complete p50 | server p50 |" > "$out/c1.md"
echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|" >> "$out/c1.md"
for target in gpu:50401 cpu:50402 noop:50403; do
  name=${target%%:*}
  port=${target#*:}
  for rows in 512 4096; do
    for kv in none inline handle; do
      tag=c1-$name-$rows-$kv
      "$bin/specverify-latency-breakdown" --address=127.0.0.1:$port --row_bytes=$rows \
          --kv_return=$kv --requests="$requests" --label="$name" --json="$out/$tag.json" \
          > "$out/$tag.txt" 2>&1 || { echo "$tag failed"; status=1; }
      python3 - "$out/$tag.json" "$name" "$rows" "$kv" >> "$out/c1.md" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
s = d["series"]
us = lambda k, q="p50_ns": f'{s[k][q] / 1e3:.1f}'
print(f'| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {us("raw gRPC round trip (VerifyCeiling)")} | '
      f'{us("verify round trip")} | {d["added_p50_ns"] / 1e3:.1f} | {us("verify round trip", "p99_ns")} | '
      f'{us("server queue")} | {us("server submit")} | {us("server complete")} | {us("server total")} |')
PY
    done
  done
done
cat "$out/c1.md"

# ---- 2. the sweep -----------------------------------------------------------
extra=()
# --help exits non-zero: read it first (pipefail would fail a pipeline).
loadgen_help=$("$bin/specverify-loadgen" --help 2>&1 || true)
if grep -q -- "raw_ceiling" <<< "$loadgen_help"; then
  extra+=(--raw-ceiling)
fi
if grep -q -- "compare_address" <<< "$loadgen_help"; then
  extra+=(--compare-address=cpu=127.0.0.1:50402)
fi
echo "loadgen comparisons: noop ${extra[*]}"
for rows in 512 4096; do
  for kv in none inline handle; do
    tag=sweep-$rows-$kv
    fetch=0
    [ "$kv" = handle ] && fetch=1
    "$bin/specverify-loadgen" --address=127.0.0.1:50401 --ceiling-address=127.0.0.1:50403 \
        "${extra[@]}" --concurrency="$concurrency" --gamma=8 --sequences-per-request=4 \
        --row-bytes=$rows --kv-return=$kv --fetch-kv-fraction=$fetch --duration="${duration}s" \
        --warmup="${warmup}s" --json="$out/$tag.json" --quiet > "$out/$tag.txt" 2>&1 \
        || { echo "$tag: loadgen exit $?"; status=1; }
    grep -E "^closed|verdict" "$out/$tag.txt" | head -20
  done
done

python3 - "$out" > "$out/sweep.md" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| row B | kv | c | target | req/s | p50 us | p99 us | server queue p50 us | vs noop req/s | p99 - noop p99 us | p50 - raw p50 us |")
print("|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|")
for rows in (512, 4096):
    for kv in ("none", "inline", "handle"):
        path = os.path.join(out, f"sweep-{rows}-{kv}.json")
        if not os.path.exists(path):
            continue
        d = json.load(open(path))
        for step in d["steps"]:
            noop = step.get("ceiling")
            raw = step.get("raw") if isinstance(step.get("raw"), dict) else None
            entries = [("gpu", step["result"])]
            if noop: entries.append(("noop", noop))
            if isinstance(step.get("raw"), dict): entries.append(("raw", step["raw"]))
            for c in step.get("compare", []) or []:
                entries.append((c.get("target", "compare"), c))
            for name, r in entries:
                lat = r["latency_ns"]
                rps = r["requests_per_s"]
                ratio = f'{rps / noop["requests_per_s"]:.2f}' if noop and noop["requests_per_s"] else ""
                added = f'{(lat["intended"]["p99"] - noop["latency_ns"]["intended"]["p99"]) / 1e3:.0f}' if noop else ""
                over_raw = (f'{(lat["intended"]["p50"] - raw["latency_ns"]["intended"]["p50"]) / 1e3:.1f}'
                            if raw and name != "raw" else "")
                print(f'| {rows} | {kv} | {r.get("concurrency")} | {name} | {rps:.0f} | '
                      f'{lat["intended"]["p50"] / 1e3:.1f} | {lat["intended"]["p99"] / 1e3:.1f} | '
                      f'{lat["server_queue"]["p50"] / 1e3:.1f} | {ratio} | {added} | {over_raw} |')
PY
{
  echo "## concurrency 1"
  cat "$out/c1.md"
  echo
  echo "## sweep"
  cat "$out/sweep.md"
} > "$out/serving.md"
cat "$out/sweep.md"

for pid in "${pids[@]}"; do kill -TERM "$pid"; done
for pid in "${pids[@]}"; do wait "$pid" || { echo "a server exited non-zero"; status=1; }; done
echo "serving: exit $status"
exit $status
