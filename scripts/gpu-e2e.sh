#!/usr/bin/env bash
# Superseded for serving numbers by scripts/gpu-serving.sh (issue #12: raw
# gRPC, no-op and CPU side by side with the latency-first batcher); kept to
# repeat the issue #5 runs of docs/PERFORMANCE_LOG.md. Its servers' old
# --max_queue_delay_us=200 now applies only below --preferred_batch_sequences
# (0), i.e. never.
#
# End to end on the GPU machine (issue #5), in one command: the CUDA executor
# tests, then three servers on loopback -- --device=cuda:0, --device=cpu and
# --device=noop (the transport ceiling) -- each driven by specverify-loadgen
# with every answer checked against the workload oracle (KV bytes fetched
# back through FetchKv included). Greedy, gamma=8, 4 sequences per request,
# rows of 512 B and 4 KiB, closed loop at concurrency 1, 8, 64, 256; then the
# target check at concurrency 64 with KV returned inline (no second RPC).
# Around each step the server's /metrics is scraped for batch sizes, the
# path mix and GPU time per batch. Writes <out>/e2e.md (the table for
# docs/PERFORMANCE.md), the loadgen JSON reports and every log.
#
# Build and bundle on the build machine (no GPU there), then run:
#   cmake -S . -B build-executor -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-executor -j2 --target specverify-server specverify-loadgen \
#       cuda_executor_test cuda_server_test
#   scripts/gpu-bundle.sh build-executor .gpu-executor specverify-server specverify-loadgen \
#       cuda_executor_test cuda_server_test
#   run(carry=[".gpu-executor"]): scripts/gpu-e2e.sh .gpu-executor $OUT
#
# Environment: DURATION (measured s per step, default 2), WARMUP (default 0.5),
# SKIP_TESTS=1 to go straight to the load runs.
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
status=0

{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  nproc
} > "$out/machine.txt"

# ---- 1. tests ----
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  for t in cuda_executor_test cuda_server_test; do
    timeout 150 "$bin/$t" > "$out/$t.txt" 2>&1
    rc=$?
    echo "$t: rc=$rc; $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/$t.txt" | tr '\n' ' ')"
    [ $rc -eq 0 ] || status=1
  done
fi

# ---- 2. servers ----
pids=()
start_server() {  # name device port metrics_port extra...
  local name=$1 device=$2 port=$3 mport=$4
  shift 4
  "$bin/specverify-server" --device="$device" --listen_address=127.0.0.1:"$port" \
      --metrics_address=127.0.0.1:"$mport" --max_batch_sequences=256 \
      --max_queue_delay_us=200 --kv_arena_bytes=$((512 << 20)) "$@" \
      > "$out/server-$name.stdout" 2> "$out/server-$name.log" &
  pids+=($!)
  for _ in $(seq 1 200); do
    grep -q "listening on port" "$out/server-$name.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $name did not start:" >&2
  cat "$out/server-$name.log" >&2
  return 1
}
start_server gpu cuda:0 50161 9461 || status=1
start_server cpu cpu 50162 9462 --cpu_threads=8 || status=1
start_server noop noop 50163 9463 || status=1
start_server gpu4 cuda:0 50164 9464 --cuda_slots=4 || status=1
head -3 "$out"/server-*.log

scrape() {  # metrics_port file
  python3 - "$1" "$2" <<'PY'
import sys, urllib.request
port, path = sys.argv[1], sys.argv[2]
text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
keep = ("specverify_batches_total", "specverify_batch_device_seconds_sum",
        "specverify_batch_device_seconds_count", "specverify_batch_size_sequences_sum",
        "specverify_batch_size_sequences_count", "specverify_requests_total")
with open(path, "w") as f:
    for line in text.splitlines():
        if line.startswith(keep):
            f.write(line + "\n")
PY
}

# ---- 3. load ----
step() {  # name port mport rows concurrency kv_mode
  local name=$1 port=$2 mport=$3 rows=$4 c=$5 kv=$6
  local tag=$name-$rows-$kv-c$c
  local fetch=()
  [ "$kv" = handle ] && fetch=(--fetch_kv)
  scrape "$mport" "$out/m-$tag.before" 2>/dev/null
  timeout 60 "$bin/specverify-loadgen" --address=127.0.0.1:"$port" --concurrency="$c" \
      --duration="${duration}s" --warmup="${warmup}s" --gamma=8 --alpha=0.6 \
      --sequences_per_request=4 --row_bytes="$rows" --kv_return="$kv" "${fetch[@]}" \
      --pool_requests=512 --quiet --json="$out/lg-$tag.json" > "$out/lg-$tag.txt" 2>&1
  local rc=$?
  scrape "$mport" "$out/m-$tag.after" 2>/dev/null
  # The no-op server answers verified=false, which the loadgen reports with
  # exit 1 although every answer matched the no-op oracle.
  if [ $rc -eq 1 ] && [ "$name" = noop ] &&
     grep -q "every checked answer matched the oracle" "$out/lg-$tag.txt"; then
    rc=0
  fi
  [ $rc -eq 0 ] || { echo "loadgen $tag: rc=$rc" >&2; tail -5 "$out/lg-$tag.txt" >&2; status=1; }
}
for rows in 512 4096; do
  for c in 1 8 64 256; do
    step gpu 50161 9461 $rows $c handle
    step cpu 50162 9462 $rows $c handle
    step noop 50163 9463 $rows $c handle
  done
  for kv in inline none; do
    step gpu 50161 9461 $rows 64 $kv
    step gpu4 50164 9464 $rows 64 $kv
    step noop 50163 9463 $rows 64 $kv
  done
done

# ---- 4. stop (the exit code must be 0 after a clean drain) ----
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null; done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}"
  rc=$?
  echo "server ${i}: exit $rc"
  [ $rc -eq 0 ] || status=1
done

# ---- 5. report ----
python3 - "$out" <<'PY' > "$out/e2e.md"
import glob, json, os, re, sys
out = sys.argv[1]

def metrics(path):
    vals = {}
    if not os.path.exists(path):
        return vals
    for line in open(path):
        m = re.match(r'(\w+)(\{[^}]*\})?\s+([0-9.eE+-]+)', line)
        if m:
            vals[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return vals

def delta(tag):
    a, b = metrics(f"{out}/m-{tag}.before"), metrics(f"{out}/m-{tag}.after")
    d = {k: v - a.get(k, 0.0) for k, v in b.items()}
    def total(prefix):
        return sum(v for k, v in d.items() if k.startswith(prefix))
    batches = total("specverify_batch_size_sequences_count")
    seqs = total("specverify_batch_size_sequences_sum")
    fused = total('specverify_batches_total{path="fused"')
    two = total('specverify_batches_total{path="two_step"')
    host = total('specverify_batches_total{path="host_decided"')
    dev_s = total("specverify_batch_device_seconds_sum")
    dev_n = total("specverify_batch_device_seconds_count")
    return dict(batch_seqs=seqs / batches if batches else float("nan"),
                mix=f"{host:.0f}/{fused:.0f}/{two:.0f}" if host + fused + two else "-",
                dev_us=1e6 * dev_s / dev_n if dev_n else float("nan"))

def load(tag):
    path = f"{out}/lg-{tag}.json"
    if not os.path.exists(path):
        return None
    r = json.load(open(path))["steps"][0]["result"]
    lat = r["latency_ns"]["intended"]
    return dict(rps=r["requests_per_s"], p50=lat["p50"] / 1e3, p99=lat["p99"] / 1e3,
                ok=r["ok"], wrong=r["wrong_answers"], kvbad=r["kv_mismatches"],
                fetches=r["kv_fetches"], errors=r["rpc_errors"])

def row(name, rows, c, kv):
    tag = f"{name}-{rows}-{kv}-c{c}"
    l = load(tag)
    if l is None:
        return f"| {rows} | {c} | {name} | (no result) |||||||||"
    m = delta(tag)
    return (f"| {rows} | {c} | {name} | {l['rps']:.0f} | {l['p50']:.0f} | {l['p99']:.0f} | "
            f"{m['batch_seqs']:.1f} | {m['mix']} | {m['dev_us']:.1f} | {l['ok']} | "
            f"{l['fetches']} | {l['wrong']}/{l['kvbad']}/{l['errors']} |"), l

print("| row B | conc | backend | req/s | p50 µs | p99 µs | seqs/batch | host-decided/fused/two-step batches | device µs/batch | answers checked | KV fetched+checked | wrong/KV-bad/RPC-err |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for rows in (512, 4096):
    for c in (1, 8, 64, 256):
        for name in ("gpu", "cpu", "noop"):
            r = row(name, rows, c, "handle")
            print(r[0] if isinstance(r, tuple) else r)
print()
print("Target check, concurrency 64, one RPC per answer: KV inline (the packed rows travel in")
print("the answer and are checked) and KV none (rows staged and packed on the device, not")
print("returned: the same bytes on the wire as the no-op ceiling). gpu4 = --cuda_slots=4.")
print()
print("| row B | KV | backend | req/s | p50 µs | p99 µs | seqs/batch | host/fused/two-step | GPU µs/batch | wrong/KV-bad/RPC-err |")
print("|---|---|---|---|---|---|---|---|---|---|")
for rows in (512, 4096):
    for kv in ("inline", "none"):
        for name in ("gpu", "gpu4", "noop"):
            tag = f"{name}-{rows}-{kv}-c64"
            l, m = load(tag), delta(tag)
            if l:
                print(f"| {rows} | {kv} | {name} | {l['rps']:.0f} | {l['p50']:.0f} | {l['p99']:.0f} | "
                      f"{m['batch_seqs']:.1f} | {m['mix']} | {m['dev_us']:.1f} | "
                      f"{l['wrong']}/{l['kvbad']}/{l['errors']} |")
print()
for kv in ("handle", "inline", "none"):
    for rows in (512, 4096):
      for gname in ("gpu", "gpu4"):
        g, n = load(f"{gname}-{rows}-{kv}-c64"), load(f"noop-{rows}-{kv}-c64")
        if g and n:
            ratio = g["rps"] / n["rps"] if n["rps"] else float("nan")
            budget = n["p99"] + 200 + 100
            print(f"- c=64, {rows} B rows, KV {kv}, {gname}: GPU/ceiling throughput = {ratio:.3f} "
                  f"({'met' if ratio >= 0.9 else 'MISSED'} >= 0.90); GPU p99 {g['p99']:.0f} µs vs "
                  f"ceiling p99 + 300 µs = {budget:.0f} µs ({'met' if g['p99'] <= budget else 'MISSED'})")
PY
cat "$out/e2e.md"
echo "gpu-e2e: status $status"
exit $status
