#!/usr/bin/env bash
# Run 8: the race blocks fold their sequence's row normalizers from the
# pass's chunk statistics (max_draft_tokens given; no combine launch),
# against 95b94da, alternating, three rounds; parity, memcheck and
# racecheck of the new test first.
# Build: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   scripts/gpu-bundle.sh build-gpu .gpu-i rejection_bench rejection_cuda_test;
#   95b94da's rejection_bench as .gpu-i/bin/rejection_bench_95b94da.
# Run (H100): carry .gpu-i
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-i/lib
B=.gpu-i/bin
timeout 300 $B/rejection_cuda_test > "$OUT/run8-tests.txt" 2>&1; echo "rc=$?" >> "$OUT/run8-tests.txt"
tail -2 "$OUT/run8-tests.txt"; grep -E "^\[  FAILED|Failure" "$OUT/run8-tests.txt" | head
timeout 300 compute-sanitizer --tool memcheck $B/rejection_cuda_test --gtest_filter='*NormalizersFolded*:*GraphReplays*:*BatchesInARow*' > "$OUT/run8-memcheck.txt" 2>&1; echo "memcheck rc=$?" >> "$OUT/run8-memcheck.txt"
tail -2 "$OUT/run8-memcheck.txt"
timeout 300 compute-sanitizer --tool racecheck $B/rejection_cuda_test --gtest_filter='*NormalizersFolded*:*BatchesInARow*' > "$OUT/run8-racecheck.txt" 2>&1; echo "racecheck rc=$?" >> "$OUT/run8-racecheck.txt"
tail -2 "$OUT/run8-racecheck.txt"
for round in 1 2 3; do
  for spec in "logits,1,8,151936 fp32" "logits,8,8,151936 fp32" "logits,8,8,151936 bf16" "logits,32,8,151936 fp32" "logits,128,8,151936 fp32" "logits,128,8,151936 bf16" "probabilities,8,8,151936 fp32" "logprobs,8,8,151936 fp32"; do
    set -- $spec
    if [ "$round" -gt 2 ] && [ "$1" = "logits,128,8,151936" ]; then continue; fi
    for v in rejection_bench_95b94da rejection_bench; do
      printf '%-25s round %d %-32s ' "$v" "$round" "$spec"
      timeout 120 $B/$v --only "$1" --dtype "$2" --runs 200 --csv /dev/null 2>/dev/null | grep -E "ours median|top-k" | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run8-ab.txt" 2>&1
awk '{m=""; f=""; fl=""; for(i=1;i<=NF;i++){if($i=="median" && m=="") m=$(i+1); else if($i=="median") f=$(i+1); if($i=="floor" && fl=="") fl=$(i+1)}; print $1, $3, $4, $5, "ours", m, "floor", fl, "filtered", f}' "$OUT/run8-ab.txt"
