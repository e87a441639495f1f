#!/usr/bin/env bash
# One server driving several GPUs (issue #16), on the GPU machine, in one
# command:
#   1. the multi-device GPU suites: two CUDA executors on one GPU sharing the
#      load with a fault armed on one (cuda_server_test), CUDA-region requests
#      on the executors of their GPU (cuda_region_test, with a worker
#      process), the region and tree suites on --device=cuda:0,0 (whichever
#      of these binaries the bundle holds);
#   2. the scaling run: 1 GPU vs 2 GPUs at a GPU-bound load, every answer
#      checked. Two specverify-loadgen processes play two co-located workers,
#      each holding its rows in a CUDA region on "its" GPU, against
#        one executor:  --device=cuda:0    (both workers' rows on GPU 0)
#        two executors: --device=cuda:0,1  (one worker's rows on each GPU)
#      so the server is fed the same offered load in both runs, one step per
#      CONCURRENCY value. The throughputs of the two loadgens are summed; a
#      configuration's throughput is its best step (more requests in flight
#      stop adding throughput once its GPUs are the limit); the ratio is
#      2 GPUs over 1.
#      With a single GPU the second run is --device=cuda:0,0 (two executors
#      on one GPU, both workers on GPU 0): the same code paths, not the
#      target's measurement, and the report says so.
# Loads (rows read in place from the regions, gamma=8):
#   logits  the GPU-bound load the target is judged on: fp32 logits, B=64
#           per request, V=151,936 (every target and draft row is read by
#           the normalizer: ~0.66 GB per request, ~0.3 ms of one GPU; one
#           pooled request, as more would pass the loadgen's 2 GiB limit,
#           laid out REGION_COPIES times so requests in flight read
#           different memory);
#   sampled fp32 probabilities, B=32 per request, V=151,936 (host-bound:
#           only the rows at the rejection are read);
#   greedy  256 sequences per request, 4 KiB rows in and out of the regions,
#           batches of up to 4096 sequences (host-bound: the loadgens spend
#           cores checking every answer).
# The GPUs' utilization (nvidia-smi) and the server's batches (/metrics) are
# read around every step, so the report shows which loads kept the GPUs busy
# and with what batches.
# Writes <out>/multi.md and packs everything into <out>/multi-logs.tgz.
#
#   scripts/gpu-bundle.sh build .gpu-multi specverify-server specverify-loadgen \
#       cuda_server_test cuda_region_test cuda_ipc_worker [region_server_test] [tree_server_test]
#   run(carry=[".gpu-multi"]): scripts/gpu-multi.sh .gpu-multi $OUT/multi
#
# Every step waits START_DELAY (25 s) for both loadgens to set up, so all
# three loads (18 steps) take about 10 minutes, more than one run call
# allows: SKIP_TESTS=1 LOADS=logits gives the verdict in about 4.
#
# Environment: DURATION (s per step, default 4), CONCURRENCY (requests in
# flight per loadgen, a list: one step each, default 16,32,64), LOADS
# (default "logits sampled greedy"), REGION_COPIES (copies of each sampled
# loadgen's rows in its region, default the largest CONCURRENCY), CONFIGS
# ("one two"; "one" alone measures the baseline), SERVER_FLAGS (more server
# flags, e.g. --cuda_slots=3), START_DELAY (s from launching the two
# loadgens to their common start, default 25: longer than their set-up,
# which took 13-16 s for the logits load with 32 region copies on an H200),
# SKIP_TESTS=1.
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 <bundle-dir> <out-dir>" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
duration=${DURATION:-4}
concurrencies=$(echo "${CONCURRENCY:-16,32,64}" | tr ',' ' ')
max_concurrency=$(echo $concurrencies | tr ' ' '\n' | sort -n | tail -1)
loads=${LOADS:-logits sampled greedy}
start_delay=${START_DELAY:-25}
configs=${CONFIGS:-one two}
status=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  echo "GPUs visible: $gpus"
} | tee "$out/machine.txt"
# Region copies per loadgen for the sampled loads: one per request in flight
# at the largest step, as far as GPU 0 holds them: both loadgens' copies
# (0.66 GB each for the logits load) share it in the one-GPU run, so at most
# a third of its memory goes to each loadgen (64 copies on an H200, 42 on an
# 80 GB H100).
gpu0_mib=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits -i 0 2>/dev/null | head -1)
fit=$(( ${gpu0_mib:-0} / 3 / 640 ))  # MiB of one copy of the logits load, rounded up
copies=${REGION_COPIES:-$(( max_concurrency < fit ? max_concurrency : (fit > 0 ? fit : 1) ))}
if [ "$gpus" -ge 2 ]; then
  two=cuda:0,1; second_worker=1; what="2 GPUs (cuda:0,1) vs 1 GPU (cuda:0)"
else
  two=cuda:0,0; second_worker=0; what="ONE GPU: 2 executors (cuda:0,0) vs 1 (cuda:0); not the 2-GPU target"
fi
what="$what; $concurrencies requests in flight per loadgen, ${duration} s per step"
echo "scaling run: $what" | tee -a "$out/machine.txt"

# ---- 1. tests -----------------------------------------------------------------
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  run_test() {  # name filter
    local name=$1 filter=$2
    [ -x "$bin/$name" ] || { echo "SKIP $name (not in the bundle)"; return; }
    if "$bin/$name" --gtest_filter="$filter" > "$out/test-$name.log" 2>&1; then
      echo "PASS $name $(grep -E '^\[  PASSED  \]' "$out/test-$name.log")"
    else
      echo "FAIL $name"; tail -30 "$out/test-$name.log"; status=1
    fi
    grep -E "SKIPPED \]" "$out/test-$name.log" | head -3
  }
  run_test cuda_server_test '*'
  run_test cuda_region_test '*'
  run_test region_server_test '*cuda*'
  run_test tree_server_test '*cuda*'
fi

# ---- 2. scaling -----------------------------------------------------------------
pids=()
start_server() {  # name port flags...
  local name=$1 port=$2
  shift 2
  "$bin/specverify-server" --listen_address=127.0.0.1:"$port" --metrics_address= \
      --max_message_bytes=134217728 --kv_arena_bytes=2147483648 --max_batch_sequences=4096 \
      --max_sequences_per_request=256 --max_queue_sequences=65536 \
      --metrics_address=127.0.0.1:50602 ${SERVER_FLAGS:-} "$@" \
      > "$out/server-$name.stdout" 2> "$out/server-$name.log" &
  pids+=($!)
  for _ in $(seq 1 600); do
    grep -q "listening on port" "$out/server-$name.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $name did not start" >&2; cat "$out/server-$name.log" >&2
  return 1
}
# The server's /metrics page, saved for the report's batch columns.
scrape() {  # file
  python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen("http://127.0.0.1:50602/metrics", timeout=5).read().decode())' \
      > "$1" 2>/dev/null || echo "metrics scrape failed: $1"
}
stop_servers() {
  for pid in "${pids[@]}"; do kill -TERM "$pid"; done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "a server exited non-zero"; status=1; }; done
  pids=()
}
# Two workers at once against one server: worker A's rows on GPU 0, worker
# B's on GPU $2, $3 requests in flight each. Each loadgen checks every answer.
two_workers() {  # tag b_device concurrency args...
  local tag=$1 b_device=$2 c=$3
  shift 3
  # Both start their first step at the same wall-clock time, whatever their
  # set-up takes: a loadgen measuring while the other still sets up has the
  # GPU to itself, and the sum over-counts (seen: 4.3k "one-GPU" req/s).
  local start_at=$(( $(date +%s) + start_delay ))
  local common=(--address=127.0.0.1:50601 --max-message-bytes=134217728 --duration="${duration}s"
                --warmup=1s --concurrency="$c" --transport=cuda --quiet --start-at-unix="$start_at")
  "$bin/specverify-loadgen" "${common[@]}" --cuda_device=0 --json="$out/$tag-a.json" "$@" \
      > "$out/$tag-a.txt" 2>&1 &
  local a=$!
  "$bin/specverify-loadgen" "${common[@]}" --cuda_device="$b_device" --json="$out/$tag-b.json" "$@" \
      > "$out/$tag-b.txt" 2>&1 &
  local b=$!
  wait $a || { echo "$tag worker A: loadgen exit $? ($(tail -2 "$out/$tag-a.txt" | tr '\n' ' '))"; status=1; }
  wait $b || { echo "$tag worker B: loadgen exit $? ($(tail -2 "$out/$tag-b.txt" | tr '\n' ' '))"; status=1; }
}
logits=(--mode=sampled --gamma=8 --sequences-per-request=64 --vocab=151936 --row-bytes=0
        --dtype=fp32 --kind=logits --kv-return=none --pool-requests=1)
sampled=(--mode=sampled --gamma=8 --sequences-per-request=32 --vocab=151936 --row-bytes=0
         --dtype=fp32 --kind=probs --kv-return=none --pool-requests=2)
# Region returns need a pool entry per request in flight (added per step).
greedy=(--gamma=8 --sequences-per-request=256 --row-bytes=4096 --kv-return=region)
for config in $configs; do
  if [ $config = one ]; then device=cuda:0; b=0; else device=$two; b=$second_worker; fi
  start_server "$config" 50601 --device="$device" || exit 1
  for load in $loads; do
    declare -n load_args=$load
    for c in $concurrencies; do
      tag=$load-$config-c$c
      step_args=("${load_args[@]}")
      if [ "$load" = greedy ]; then
        step_args+=(--pool-requests="$c")
      else
        # Every request in flight reads its own copy of the rows, as a
        # worker's requests do, not one pooled request's rows. (This did
        # not steady the one-GPU rate: on one H200 it still moved between
        # 3.1k and 3.7k req/s from step to step, copies or not.)
        step_args+=(--region-copies="$copies")
      fi
      nvidia-smi --query-gpu=index,utilization.gpu --format=csv,noheader,nounits -lms 250 \
          > "$out/$tag.gpu-util.csv" 2>/dev/null &
      sampler=$!
      scrape "$out/$tag.metrics-before.txt"
      two_workers "$tag" "$b" "$c" "${step_args[@]}"
      scrape "$out/$tag.metrics-after.txt"
      kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
    done
  done
  stop_servers
done

python3 - "$out" "$what" "$loads" "$concurrencies" "$configs" > "$out/multi.md" <<'PY' || { echo "multi: wrong answers, RPC errors or a missing run"; status=1; }
import json, os, sys
out, what = sys.argv[1], sys.argv[2]
def load(tag):
    total, wrong, errors, devices = 0.0, 0, 0, {}
    seq = 0.0
    windows = []
    for w in "ab":
        d = json.load(open(os.path.join(out, f"{tag}-{w}.json")))
        for step in d["steps"]:
            r = step["result"]
            total += r["requests_per_s"]
            seq += r.get("sequences_per_s", 0)
            wrong += r.get("wrong_answers", 0) + r.get("kv_mismatches", 0)
            errors += r.get("rpc_errors", 0)
            start = r.get("window_start_unix_s", 0)
            windows.append((start, start + r["window_s"]))
            for k, n in r.get("answers_by_device", {}).items():
                devices[k] = devices.get(k, 0) + n
    return total, seq, wrong, errors, devices, windows
def utilization(tag):
    # Busy samples only (the warm-up and the gap between the loadgens'
    # start and their first request read 0): the median per GPU.
    per_gpu = {}
    try:
        for line in open(os.path.join(out, f"{tag}.gpu-util.csv")):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) == 2 and parts[1].isdigit() and int(parts[1]) > 0:
                per_gpu.setdefault(parts[0], []).append(int(parts[1]))
    except OSError:
        return "n/a"
    if not per_gpu:
        return "idle"
    return " ".join(f"{g}:{sorted(v)[len(v) // 2]}%" for g, v in sorted(per_gpu.items()))
def metrics(path):
    samples = {}
    try:
        for line in open(path):
            if line.startswith("#") or not line.strip():
                continue
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    except (OSError, ValueError):
        pass
    return samples
def batches(tag):
    # From the server's metrics around the load (warm-up included): batches
    # per device, mean sequences per batch, mean device time per batch.
    before = metrics(os.path.join(out, f"{tag}.metrics-before.txt"))
    after = metrics(os.path.join(out, f"{tag}.metrics-after.txt"))
    if not after:
        return "n/a"
    def delta(prefix):
        return sum(v - before.get(k, 0.0) for k, v in after.items() if k.startswith(prefix))
    count = delta("specverify_batch_size_sequences_count")
    if count <= 0:
        return "none"
    seqs = delta("specverify_batch_size_sequences_sum") / count
    device_s = delta("specverify_batch_device_seconds_sum") / max(delta("specverify_batch_device_seconds_count"), 1)
    return f"{count:.0f} x {seqs:.0f} seq, {device_s * 1e3:.2f} ms"
print(f"Scaling: {what}\n")
print("A configuration's throughput is its highest rate over the steps (the GPU")
print("is the limit once more requests in flight stop adding throughput). The")
print("target (>= 1.9x) is judged on the GPU-bound load, `logits`; `sampled` and")
print("`greedy` are host-bound and show the paths, not the scaling.\n")
print("| load | in flight / loadgen | executors | req/s (2 workers) | seq/s | answers by device | GPU busy (median) | batches x mean size, device time | wrong | rpc errors | ratio |")
print("|---|---:|---|---:|---:|---|---|---|---:|---:|---:|")
bad = False
verdicts = []
for load_name in sys.argv[3].split():
    best = {}
    for c in sys.argv[4].split():
        base = None
        for config in sys.argv[5].split():
            tag = f"{load_name}-{config}-c{c}"
            try:
                total, seq, wrong, errors, devices, windows = load(tag)
            except (OSError, KeyError, ValueError) as e:
                print(f"| {load_name} | {c} | {config} | missing ({e}) | | | | | | | |")
                bad = True
                continue
            # The two rates add up only over a common window: a loadgen
            # measuring alone had the server to itself. A step whose windows
            # overlap by less than 90% is reported, not used.
            overlap = min(w[1] for w in windows) - max(w[0] for w in windows)
            shorter = min(w[1] - w[0] for w in windows)
            aligned = shorter > 0 and overlap >= 0.9 * shorter
            note = "" if aligned else f" (windows overlap {max(overlap, 0):.1f} of {shorter:.1f} s; not used)"
            if config == "one":
                base = total if aligned else None
            if aligned:
                best[config] = max(best.get(config, 0.0), total)
            ratio = f"{total / base:.2f}x" if base and aligned and config == "two" else ""
            dev = " ".join(f"{k}:{v}" for k, v in sorted(devices.items()))
            print(f"| {load_name} | {c} | {config} | {total:.0f}{note} | {seq:.0f} | {dev} | {utilization(tag)} "
                  f"| {batches(tag)} | {wrong} | {errors} | {ratio} |")
            bad = bad or wrong > 0 or errors > 0 or total == 0
    if best.get("one") and best.get("two"):
        ratio = best["two"] / best["one"]
        verdicts.append(f"* {load_name}: {best['two']:.0f} vs {best['one']:.0f} req/s at the best step "
                        f"of each, **{ratio:.2f}x**"
                        + ((" (target >= 1.9x: " + ("met" if ratio >= 1.9 else "missed") + ")")
                           if load_name == "logits" else " (host-bound)"))
print()
print("\n".join(verdicts))
sys.exit(1 if bad else 0)
PY
cat "$out/multi.md"
tar -C "$out" -czf "$out/../multi-logs.tgz" . && mv "$out/../multi-logs.tgz" "$out/"
echo "multi: exit $status"
exit $status
