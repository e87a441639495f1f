#!/usr/bin/env bash
# Release check at f4350d6 (2026-11-28, H100): the three device calls of this
# folder, in order. Built here first:
#   cmake --build build-gpu -j2 --target greedy_cuda_test greedy_dispatch_test rejection_cuda_test \
#     cuda_executor_test cuda_server_test sampled_server_test specverify-server specverify-loadgen \
#     rejection_bench tree_cuda_test row_copy_cuda_test cuda_region_test cuda_ipc_worker
#   scripts/gpu-bundle.sh build-gpu .gpu-v <the same targets>   # 103 MiB: over its 60 MiB check, so
#   strip .gpu-v/bin/*; tar czf .gpu-pack/bundle.tgz .gpu-v scripts/gpu-verify.sh   # 47 MiB, carried
# Each call: run(carry=[".gpu-pack"], kind="nvidia-h100-x1", command=<one part below>).
set -u
part=${1:?usage: run.sh 1|2|3}
tar xzf .gpu-pack/bundle.tgz
export LD_LIBRARY_PATH=$PWD/.gpu-v/lib
B=.gpu-v/bin
case $part in
  1)  # suites, sanitizers, served check (verify/)
    $B/tree_cuda_test | tail -3; $B/row_copy_cuda_test | tail -3
    (cd .gpu-v/bin && ./cuda_region_test | tail -3)   # finds cuda_ipc_worker beside it
    scripts/gpu-verify.sh .gpu-v "$OUT/verify" | tail -20 ;;
  2)  # issue #17's shapes, each with its read floor in the same process (rejection-bench.txt)
    for spec in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" \
                "logits,1,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16" \
                "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936"; do
      set -- $spec; echo "== $spec"
      $B/rejection_bench --only "$1" "${@:2}" --runs 200 --csv /dev/null 2>&1 | grep -E "median|floor|top-k" | head -6
    done | tee "$OUT/bench.txt" ;;
  3)  # the served spot check three more times (served-rerun*-c64.txt)
    for i in 1 2 3; do
      SKIP_TESTS=1 scripts/gpu-verify.sh .gpu-v "$OUT/served$i" > "$OUT/served$i.log" 2>&1
      grep -A3 "transport ceiling" "$OUT/served$i/served_c64.txt" | tail -1
    done ;;
esac
