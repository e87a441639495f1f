#!/usr/bin/env bash
# Closing run (H100): b2468ea (NOW, the head) against 84ebeee (BASE, the
# session's start), alternating per shape, every issue-17 shape, two rounds
# (the item-2 pair four). Floors from NOW's binary (distinct rows since
# 847bee7; BASE's binary still prints the old floor). rejection_cuda_test,
# memcheck, racecheck (logits tests), sampled_server_test on the GPU;
# PyTorch (bench/python/sampling_torch_baseline.py --quick).
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test
#   sampled_server_test; scripts/gpu-bundle.sh build-gpu .gpu-now
#   rejection_bench rejection_cuda_test; scripts/gpu-bundle.sh build-gpu
#   .gpu-srv sampled_server_test; .gpu-now/bin/
#   rejection_bench_base is 84ebeee's (stripped, built in a worktree).
# Run (H100): carry .gpu-now; then "bash run6.sh server", carry .gpu-srv
set -u
if [ "${1:-}" = server ]; then
  # Part two ran at 95b94da (the prefetch compiled for exact logits only):
  # .gpu-srv also holds that commit's rejection_cuda_test.
  export LD_LIBRARY_PATH=$PWD/.gpu-srv/lib
  .gpu-srv/bin/rejection_cuda_test > "$OUT/run6-tests-final.txt" 2>&1; echo "rejection_cuda_test rc=$?" >> "$OUT/run6-tests-final.txt"
  tail -2 "$OUT/run6-tests-final.txt"
  timeout 200 .gpu-srv/bin/sampled_server_test > "$OUT/run6-sampled-server.txt" 2>&1; echo "sampled_server_test rc=$?" >> "$OUT/run6-sampled-server.txt"
  tail -3 "$OUT/run6-sampled-server.txt"
  timeout 300 python3 bench/python/sampling_torch_baseline.py --quick --csv "$OUT/run6-torch.csv" > "$OUT/run6-torch.txt" 2>&1
  echo "torch rc=$?" >> "$OUT/run6-torch.txt"
  grep -E "B=8 +gamma=8 V=151936|rc=" "$OUT/run6-torch.txt"
  exit 0
fi
export LD_LIBRARY_PATH=$PWD/.gpu-now/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > "$OUT/run6-environment.txt"
.gpu-now/bin/rejection_cuda_test > "$OUT/run6-tests.txt" 2>&1; echo "rejection_cuda_test rc=$?" >> "$OUT/run6-tests.txt"
tail -2 "$OUT/run6-tests.txt"
timeout 300 compute-sanitizer --tool memcheck .gpu-now/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.*' > "$OUT/run6-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run6-memcheck.txt"
tail -2 "$OUT/run6-memcheck.txt"
timeout 300 compute-sanitizer --tool racecheck .gpu-now/bin/rejection_cuda_test --gtest_filter='RejectionCudaTest.GreedyFiltered*:RejectionCudaTest.RowPass*:RejectionCudaTest.BatchesInARow*' > "$OUT/run6-racecheck.txt" 2>&1; echo "racecheck rc=$?" >> "$OUT/run6-racecheck.txt"
tail -2 "$OUT/run6-racecheck.txt"
for round in 1 2 3 4; do
  for spec in "probabilities,8" "logprobs,8" "probabilities,128" "logits,1" "logits,8" "logits,32" "logits,128" "logits,8 --dtype bf16" "logits,128 --dtype bf16"; do
    set -- $spec
    if [ "$round" -gt 2 ] && [ "$1" != "probabilities,8" ] && [ "$1" != "logprobs,8" ]; then continue; fi
    for v in base now; do bin=rejection_bench; [ $v = base ] && bin=rejection_bench_base
      printf '%-4s round %d %-6s ' "$v" "$round" "${3:-fp32}"
      .gpu-now/bin/$bin --only "$1,8,151936" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k"
    done
  done
done > "$OUT/run6-ab.txt" 2>&1
grep "ours median" "$OUT/run6-ab.txt" | awk '{for(i=1;i<=NF;i++){if($i=="median" && !m) m=$(i+1); if($i=="floor") f=$(i+1)}; printf "%s %s %s %s %s %s floor %s\n", $1,$3,$4,$5,$6,m,f; m=""}'
grep "top-k" "$OUT/run6-ab.txt" | awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, "filtered", m}'
# Part two (a second call; the carry limit): bash run6.sh server, carry .gpu-srv.
