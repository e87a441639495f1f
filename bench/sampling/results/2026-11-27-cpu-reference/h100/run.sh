#!/usr/bin/env bash
# H100: the kernels' parity suites against the new CPU reference (which runs
# its AVX2 path on this host's CPU), and the reference bench on this CPU.
cd .gpu-ref && export LD_LIBRARY_PATH=$PWD/lib
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/r/device.txt
grep -m1 "model name" /proc/cpuinfo >> $OUT/r/device.txt; grep -o -w "avx2\|fma" /proc/cpuinfo | sort -u | tr '\n' ' ' >> $OUT/r/device.txt
for t in reference_rows_test rejection_reference_test rejection_stats_test rejection_cuda_test tree_cuda_test; do
  ./bin/$t > $OUT/r/$t.txt 2>&1; echo "$t rc=$?" | tee -a $OUT/r/summary.txt
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r/$t.txt | tee -a $OUT/r/summary.txt
done
./bin/reference_bench --runs 5 > $OUT/r/reference_bench.txt 2>&1
cat $OUT/r/reference_bench.txt
cd $OUT && tar czf r.tgz r
