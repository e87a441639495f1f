#!/usr/bin/env bash
# One confirming run of a release candidate on the GPU machine: every GPU test
# suite (greedy kernels and dispatcher, rejection sampling, CUDA executor,
# served greedy and sampled), compute-sanitizer memcheck and racecheck over
# the greedy paths (fused incl. the sm_90 staged tiles, two-step, graphs) and
# the sampling kernels, and a short served check against the no-op ceiling.
# Prints one line per step, the served report against the ceiling, and
# "verify: N passed, M failed" last; every log is also packed into
# <out>.tgz beside <out> (the run tool brings back only a few files).
# SKIP_TESTS=1 runs only the served check.
#
#   cmake -S . -B build-final -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90
#   cmake --build build-final -j2 --target greedy_cuda_test greedy_dispatch_test \
#       rejection_cuda_test cuda_executor_test cuda_server_test sampled_server_test \
#       specverify-server specverify-loadgen
#   scripts/gpu-bundle.sh build-final .gpu-final greedy_cuda_test greedy_dispatch_test \
#       rejection_cuda_test cuda_executor_test cuda_server_test sampled_server_test \
#       specverify-server specverify-loadgen
#   run(carry=[".gpu-final"]): scripts/gpu-verify.sh .gpu-final $OUT
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: $0 <bundle-dir> <out-dir>" >&2
  exit 2
fi
bundle=$(cd "$1" && pwd)
out=$(mkdir -p "$2" && cd "$2" && pwd)
bin=$bundle/bin
export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
passed=0
failed=0
step() {  # name timeout command...
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1
  local rc=$?
  local summary
  summary=$(grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]|ERROR SUMMARY|RACECHECK SUMMARY|wrong|verdict' "$out/$name.txt" | head -4 | tr '\n' ' ')
  if [ $rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
  echo "$name: rc=$rc $summary"
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/machine.txt"

if [ "${SKIP_TESTS:-0}" != 1 ]; then
step greedy_cuda_test 240 "$bin/greedy_cuda_test"
step greedy_dispatch_test 60 "$bin/greedy_dispatch_test"
step rejection_cuda_test 120 "$bin/rejection_cuda_test"
step cuda_executor_test 120 "$bin/cuda_executor_test"
step cuda_server_test 120 "$bin/cuda_server_test"
step sampled_server_test 120 "$bin/sampled_server_test"

greedy_filter='*/b7_g8_*:*/b33_*:*/b1000_g3_a90_row256_*:*GreedyCudaGraphTest.*'
step memcheck_greedy 240 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/greedy_cuda_test" --gtest_filter="$greedy_filter"
step racecheck_greedy 240 compute-sanitizer --tool racecheck --error-exitcode 1 \
    "$bin/greedy_cuda_test" --gtest_filter='*/b7_g8_*:*/b33_g1to256_a70_row4096*:*GreedyCudaGraphTest.*'
step memcheck_sampling 240 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$bin/rejection_cuda_test" --gtest_filter='RejectionCudaTest.*'
fi

# Served: cuda:0 vs the no-op ceiling, c=64, greedy gamma=8, 4 KiB rows, KV
# staged and packed but not returned (the same wire bytes as the ceiling).
"$bin/specverify-server" --device=cuda:0 --listen_address=127.0.0.1:50061 \
    --metrics_address=127.0.0.1:9461 > "$out/server-gpu.log" 2>&1 &
gpu_pid=$!
"$bin/specverify-server" --device=noop --listen_address=127.0.0.1:50062 \
    --metrics_address= > "$out/server-noop.log" 2>&1 &
noop_pid=$!
step served_c64 120 "$bin/specverify-loadgen" --address=127.0.0.1:50061 \
    --ceiling-address=127.0.0.1:50062 --wait-for-serving=20s --concurrency=64 \
    --gamma=8 --row-bytes=4096 --sequences-per-request=4 --kv-return=none \
    --duration=3s --warmup=1s --json="$out/served_c64.json"
step served_fetch 120 "$bin/specverify-loadgen" --address=127.0.0.1:50061 \
    --wait-for-serving=20s --concurrency=8 --gamma=4:16 --row-bytes=512 \
    --sequences-per-request=4 --kv-return=handle --fetch-kv --duration=2s --warmup=0.5s
kill -TERM "$gpu_pid" "$noop_pid"
wait "$gpu_pid"; gpu_rc=$?
wait "$noop_pid"; noop_rc=$?
echo "servers: gpu exit $gpu_rc, noop exit $noop_rc"
if [ $gpu_rc -eq 0 ] && [ $noop_rc -eq 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
sed -n '/^step/,$p' "$out/served_c64.txt" | grep -v "^closed c=64" | head -16
tar -czf "$out.tgz" -C "$out" .
echo "verify: $passed passed, $failed failed"
