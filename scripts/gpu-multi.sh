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
#      so the server is fed the same offered load in both runs. The
#      throughputs of the two loadgens are summed; the ratio is 2 GPUs over 1.
#      With a single GPU the second run is --device=cuda:0,0 (two executors
#      on one GPU, both workers on GPU 0): the same code paths, not the
#      target's measurement, and the report says so.
# Loads: sampled (fp32 probabilities, B=32 per request, gamma=8,
# V=151,936, rows read in place from the regions) and greedy (gamma=8,
# 256 sequences per request, 4 KiB rows in and out of the regions; batches
# of up to 4096 sequences).
# Writes <out>/multi.md and packs everything into <out>/multi-logs.tgz.
#
#   scripts/gpu-bundle.sh build .gpu-multi specverify-server specverify-loadgen \
#       cuda_server_test cuda_region_test cuda_ipc_worker [region_server_test] [tree_server_test]
#   run(carry=[".gpu-multi"]): scripts/gpu-multi.sh .gpu-multi $OUT/multi
#
# Environment: DURATION (s per step, default 4), CONCURRENCY (per loadgen,
# default 8), SKIP_TESTS=1.
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
concurrency=${CONCURRENCY:-8}
status=0
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader 2>/dev/null
  echo "GPUs visible: $gpus"
} | tee "$out/machine.txt"
if [ "$gpus" -ge 2 ]; then
  two=cuda:0,1; second_worker=1; what="2 GPUs (cuda:0,1) vs 1 GPU (cuda:0)"
else
  two=cuda:0,0; second_worker=0; what="ONE GPU: 2 executors (cuda:0,0) vs 1 (cuda:0); not the 2-GPU target"
fi
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
      --max_sequences_per_request=256 --max_queue_sequences=65536 "$@" \
      > "$out/server-$name.stdout" 2> "$out/server-$name.log" &
  pids+=($!)
  for _ in $(seq 1 600); do
    grep -q "listening on port" "$out/server-$name.stdout" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "server $name did not start" >&2; cat "$out/server-$name.log" >&2
  return 1
}
stop_servers() {
  for pid in "${pids[@]}"; do kill -TERM "$pid"; done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "a server exited non-zero"; status=1; }; done
  pids=()
}
# Two workers at once against one server: worker A's rows on GPU 0, worker
# B's on GPU $2. Each loadgen checks every answer.
two_workers() {  # tag b_device args...
  local tag=$1 b_device=$2
  shift 2
  local common=(--address=127.0.0.1:50601 --max-message-bytes=134217728 --duration="${duration}s"
                --warmup=1s --concurrency="$concurrency" --transport=cuda --quiet)
  "$bin/specverify-loadgen" "${common[@]}" --cuda_device=0 --json="$out/$tag-a.json" "$@" \
      > "$out/$tag-a.txt" 2>&1 &
  local a=$!
  "$bin/specverify-loadgen" "${common[@]}" --cuda_device="$b_device" --json="$out/$tag-b.json" "$@" \
      > "$out/$tag-b.txt" 2>&1 &
  local b=$!
  wait $a || { echo "$tag worker A: loadgen exit $? ($(tail -2 "$out/$tag-a.txt" | tr '\n' ' '))"; status=1; }
  wait $b || { echo "$tag worker B: loadgen exit $? ($(tail -2 "$out/$tag-b.txt" | tr '\n' ' '))"; status=1; }
}
sampled=(--mode=sampled --gamma=8 --sequences-per-request=32 --vocab=151936 --row-bytes=0
         --dtype=fp32 --kind=probs --kv-return=none --pool-requests=2)
# Region returns need a pool entry per request in flight.
greedy=(--gamma=8 --sequences-per-request=256 --row-bytes=4096 --kv-return=region
        --pool-requests="$concurrency")
for config in one two; do
  if [ $config = one ]; then device=cuda:0; b=0; else device=$two; b=$second_worker; fi
  start_server "$config" 50601 --device="$device" || exit 1
  two_workers "sampled-$config" "$b" "${sampled[@]}"
  two_workers "greedy-$config" "$b" "${greedy[@]}"
  stop_servers
done

python3 - "$out" "$what" > "$out/multi.md" <<'PY' || { echo "multi: wrong answers, RPC errors or a missing run"; status=1; }
import json, os, sys
out, what = sys.argv[1], sys.argv[2]
def load(tag):
    total, wrong, errors, devices = 0.0, 0, 0, {}
    seq = 0.0
    for w in "ab":
        d = json.load(open(os.path.join(out, f"{tag}-{w}.json")))
        for step in d["steps"]:
            r = step["result"]
            total += r["requests_per_s"]
            seq += r.get("sequences_per_s", 0)
            wrong += r.get("wrong_answers", 0) + r.get("kv_mismatches", 0)
            errors += r.get("rpc_errors", 0)
            for k, n in r.get("answers_by_device", {}).items():
                devices[k] = devices.get(k, 0) + n
    return total, seq, wrong, errors, devices
print(f"Scaling: {what}\n")
print("| load | executors | req/s (2 workers) | seq/s | answers by device | wrong | rpc errors | ratio |")
print("|---|---|---:|---:|---|---:|---:|---:|")
bad = False
for load_name in ("sampled", "greedy"):
    base = None
    for config in ("one", "two"):
        try:
            total, seq, wrong, errors, devices = load(f"{load_name}-{config}")
        except (OSError, KeyError, ValueError) as e:
            print(f"| {load_name} | {config} | missing ({e}) | | | | | |")
            bad = True
            continue
        if config == "one":
            base = total
        ratio = f"{total / base:.2f}x" if base and config == "two" else ""
        dev = " ".join(f"{k}:{v}" for k, v in sorted(devices.items()))
        print(f"| {load_name} | {config} | {total:.0f} | {seq:.0f} | {dev} | {wrong} | {errors} | {ratio} |")
        bad = bad or wrong > 0 or errors > 0 or total == 0
sys.exit(1 if bad else 0)
PY
cat "$out/multi.md"
tar -C "$out" -czf "$out/../multi-logs.tgz" . && mv "$out/../multi-logs.tgz" "$out/"
echo "multi: exit $status"
exit $status
