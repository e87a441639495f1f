#!/usr/bin/env bash
# greedy-floor device run: tests, old/new quick benches interleaved, sanitizers.
set -u
tag=${1:-r1}
here=$(pwd)
o=$OUT/$tag; mkdir -p "$o"
export LD_LIBRARY_PATH=$here/lib
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv; } > "$o/environment.txt" 2>&1
s=$(date +%s)
timeout 90 bin/greedy_dispatch_test > "$o/dispatch_test.txt" 2>&1; echo "dispatch_test rc=$? $(grep -E '^\[  (PASSED|FAILED) ' $o/dispatch_test.txt | tr '\n' ' ')"
grep -E "tau=" "$o/dispatch_test.txt" | head -3
timeout 150 bin/greedy_cuda_test --gtest_brief=1 > "$o/cuda_test.txt" 2>&1; echo "cuda_test rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED) |tests from .* ran' $o/cuda_test.txt | tr '\n' ' ')"
grep -E "^\[  FAILED  \]" "$o/cuda_test.txt" | head -10
echo "tests $(( $(date +%s) - s )) s"
for i in 1 2; do
  for v in new old; do
    b=bin/greedy_bench; [ $v = old ] && b=bin/greedy_bench_old
    s=$(date +%s)
    timeout 100 $b --quick --csv "$o/${v}_$i.csv" > "$o/${v}_$i.txt" 2>&1; echo "bench $v $i rc=$? $(( $(date +%s) - s )) s"
    grep -E "^dispatch" "$o/${v}_$i.txt"
    grep -E "^ +32 +(8|128) +0.9  4096 " "$o/${v}_$i.txt"
  done
done
if [ "${SAN:-1}" = 1 ]; then
mf='*/b7_*:*/b33_*:*/b1000_g3_a90_row256_*:*/b4096_g8_a30_row256_*:*/b4096_g1_*_row4096_*:*GreedyCudaGraphTest.*:StagedTiles/*:GreedyCudaVerifyOnlyTest.*:GreedyCudaScratchTest.*'
rf='*/b7_g8_*:*/b7_g256_*:*/b33_*:*/b1000_g3_a90_row256_*:*GreedyCudaGraphTest.*:StagedTiles/*'
for tool in memcheck racecheck; do
  f=$mf; [ $tool = racecheck ] && f=$rf
  s=$(date +%s)
  timeout 150 compute-sanitizer --tool $tool --error-exitcode 3 bin/greedy_cuda_test --gtest_brief=1 --gtest_filter="$f" > "$o/sanitizer_$tool.txt" 2>&1
  echo "sanitizer $tool rc=$? $(( $(date +%s) - s )) s $(grep -E '^\[  (PASSED|FAILED) |ERROR SUMMARY|RACECHECK SUMMARY|tests from .* ran' $o/sanitizer_$tool.txt | tr '\n' ' ')"
  grep -m5 -E '^========= +(Error|Warning|Invalid|Race|.*hazard)' "$o/sanitizer_$tool.txt"
done
fi
if [ "${VAR:-1}" = 1 ]; then for a in 0.9 0.6; do ./bin/lib_variants 32 128 $a > "$o/lib_variants_$a.txt" 2>&1; done; grep -E "variant|memcpy|empty|b2spec_16_alone |V2.b2spec_16_pdl_start|lib" "$o/lib_variants_0.9.txt"; fi
cd "$OUT" && tar czf "$tag.tgz" "$tag"
