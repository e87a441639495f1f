#!/usr/bin/env bash
# The data plane on the GPU machine (issue #13), in one command:
#   1. the GPU suites of the data plane: row copies and row tables against
#      the CPU reference, regions over the wire on the CUDA backend, CUDA IPC
#      from a separate worker process (incl. the worker killed while queued),
#      the executor and served suites again; compute-sanitizer memcheck on
#      the row copies and the CUDA region test;
#   2. the report: specverify-loadgen as a co-located worker against a
#      --device=cuda:0 server and the no-op ceiling, transport inline vs shm vs
#      cuda, for greedy gamma=8 with 4 KiB rows (KV returned inline / into the
#      worker's region) at c = 1 and 64, and sampled B=8, gamma=8,
#      V=151,936 (fp32 probabilities with draft rows, bf16 logits) at c = 1;
#      raw gRPC (VerifyCeiling) beside the inline runs. Every answer checked.
# Writes <out>/dataplane.md (tables for docs/PERFORMANCE.md), logs and JSON.
#
#   scripts/gpu-bundle.sh build .gpu-dp specverify-server specverify-loadgen \
#       row_copy_cuda_test rejection_cuda_test region_server_test cuda_region_test \
#       cuda_ipc_worker cuda_executor_test cuda_server_test sampled_server_test
#   run(carry=[".gpu-dp"]): scripts/gpu-dataplane.sh .gpu-dp $OUT/dp
#
# Environment: DURATION (s per step, default 2), SKIP_TESTS=1, SKIP_REPORT=1,
# GPU_DEVICE (default cuda:0; cpu to try the report on a machine without a GPU).
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
status=0
{
  date -u +%Y-%m-%dT%H:%M:%SZ
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
} | tee "$out/machine.txt"

# ---- 1. tests -----------------------------------------------------------------
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  run_test() {  # name [gtest filter]; binaries missing from the bundle are skipped
    local name=$1 filter=${2:-*}
    [ -x "$bin/$name" ] || { echo "SKIP $name (not in the bundle)"; return; }
    if "$bin/$name" --gtest_filter="$filter" > "$out/test-$name.log" 2>&1; then
      echo "PASS $name $(grep -E '^\[  PASSED  \]' "$out/test-$name.log")"
    else
      echo "FAIL $name"; tail -30 "$out/test-$name.log"; status=1
    fi
    grep -E "SKIPPED \]" "$out/test-$name.log" | head -3
  }
  run_test row_copy_cuda_test
  run_test rejection_cuda_test '*RowTables*:*MatchesTheCpuReferenceAcrossTheGrid*'
  run_test region_server_test
  run_test cuda_region_test
  run_test cuda_executor_test
  run_test cuda_server_test
  run_test sampled_server_test
  run_test tree_server_test
  grep -h "answer after the worker died" "$out/test-cuda_region_test.log"
  if command -v compute-sanitizer > /dev/null; then
    for t in row_copy_cuda_test cuda_region_test; do
      # API errors are expected: the tests provoke refused IPC handles.
      if compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 "$bin/$t" \
          > "$out/memcheck-$t.log" 2>&1; then
        echo "memcheck clean: $t ($(grep -c '^\[       OK' "$out/memcheck-$t.log") tests)"
      else
        echo "memcheck FAILED: $t"; tail -20 "$out/memcheck-$t.log"; status=1
      fi
    done
  fi
fi

# ---- 2. report ------------------------------------------------------------------
if [ "${SKIP_REPORT:-0}" != 1 ]; then
  pids=()
  start_server() {  # name port flags...
    local name=$1 port=$2
    shift 2
    "$bin/specverify-server" --listen_address=127.0.0.1:"$port" --metrics_address= \
        --max_message_bytes=134217728 "$@" > "$out/server-$name.stdout" 2> "$out/server-$name.log" &
    pids+=($!)
    for _ in $(seq 1 400); do
      grep -q "listening on port" "$out/server-$name.stdout" 2>/dev/null && return 0
      sleep 0.05
    done
    echo "server $name did not start" >&2; cat "$out/server-$name.log" >&2
    return 1
  }
  start_server gpu 50501 --device="${GPU_DEVICE:-cuda:0}" || exit 1
  start_server noop 50503 --device=noop || exit 1
  lg() {  # tag args...
    local tag=$1
    shift
    "$bin/specverify-loadgen" --address=127.0.0.1:50501 --ceiling-address=127.0.0.1:50503 \
        --max-message-bytes=134217728 --duration="${duration}s" --warmup=0.5s \
        --json="$out/$tag.json" --quiet "$@" > "$out/$tag.txt" 2>&1 \
        || { echo "$tag: loadgen exit $? ($(tail -2 "$out/$tag.txt" | tr '\n' ' '))"; status=1; }
  }
  greedy=(--gamma=8 --sequences-per-request=4 --row-bytes=4096 --pool-requests=256)
  lg greedy-inline "${greedy[@]}" --concurrency=1,64 --kv-return=inline
  lg greedy-inline-raw "${greedy[@]}" --concurrency=1,64 --kv-return=inline --raw-ceiling
  lg greedy-shm "${greedy[@]}" --concurrency=1,64 --kv-return=region --transport=shm
  lg greedy-cuda "${greedy[@]}" --concurrency=1,64 --kv-return=region --transport=cuda
  # Raw gRPC with the region requests' own (small) messages: VerifyCeiling.
  lg greedy-cuda-raw "${greedy[@]}" --concurrency=1 --kv-return=region --transport=cuda --raw-ceiling
  sampled=(--mode=sampled --gamma=8 --sequences-per-request=8 --vocab=151936 --row-bytes=0
           --kv-return=none --pool-requests=2 --concurrency=1)
  for kind in fp32-probs bf16-logits; do
    dtype=${kind%%-*}; k=${kind#*-}
    for t in inline shm cuda; do
      lg "sampled-$kind-$t" "${sampled[@]}" --dtype="$dtype" --kind="$k" --transport=$t
    done
  done
  lg sampled-fp32-probs-inline-raw "${sampled[@]}" --dtype=fp32 --kind=probs --raw-ceiling
  lg sampled-fp32-probs-cuda-raw "${sampled[@]}" --dtype=fp32 --kind=probs --transport=cuda --raw-ceiling
  for pid in "${pids[@]}"; do kill -TERM "$pid"; done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "a server exited non-zero"; status=1; }; done

  python3 - "$out" > "$out/dataplane.md" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
print("| run | transport | kv | c | target | req/s | p50 us | p99 us | wire B/request | vs noop req/s | wrong |")
print("|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    d = json.load(open(path))
    w = d["config"]["workload"] if "config" in d else d.get("workload", {})
    tag = os.path.basename(path)[:-5]
    for step in d["steps"]:
        noop = step.get("ceiling")
        entries = [("gpu", step["result"])]
        if noop: entries.append(("noop", noop))
        if isinstance(step.get("raw"), dict): entries.append(("raw gRPC", step["raw"]))
        for name, r in entries:
            lat = r["latency_ns"]["intended"]
            ratio = f'{r["requests_per_s"] / noop["requests_per_s"]:.2f}' if noop and noop["requests_per_s"] and name == "gpu" else ""
            print(f'| {tag} | {w.get("transport", "?")} | {w.get("kv_return", "?")} | {r.get("concurrency")} | {name} | '
                  f'{r["requests_per_s"]:.0f} | {lat["p50"] / 1e3:.1f} | {lat["p99"] / 1e3:.1f} | '
                  f'{w.get("request_wire_bytes", "")} | {ratio} | {r.get("wrong_answers", "")} |')
PY
  cat "$out/dataplane.md"
fi
# Everything in one archive: the run tool brings back at most 8 files.
tar -C "$out" -czf "$out/../dataplane-logs.tgz" . && mv "$out/../dataplane-logs.tgz" "$out/"
echo "dataplane: exit $status"
exit $status
