#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/r6; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
timeout 200 $B/bin/rejection_cuda_test --gtest_filter='*Filtered*:*TargetShape*:*TopP*:*Graph*' > $O/parity_filter.txt 2>&1; echo "parity_filter rc=$?" >> $O/summary.txt; tail -n 3 $O/parity_filter.txt >> $O/summary.txt
grep -E "Failure|FAILED|sequence [0-9]+:|Which is|slices" $O/parity_filter.txt | head -30 >> $O/summary.txt
cat $O/summary.txt
for round in 1 2; do
  for v in new prev; do
    bin=$B/bin/rejection_bench; [ $v = prev ] && bin=$B/bin/rejection_bench_prev
    for d in fp32 bf16; do
      $bin --dtype $d --only logits,8,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "top-k" | sed "s/^/$v r$round $d: /" >> $O/ab.txt
    done
  done
done
cat $O/ab.txt
ncu --section SourceCounters --section SpeedOfLight -k regex:FilterKernel --launch-skip 20 -c 1 -o $O/filter $B/bin/rejection_bench --only logits,8,8,151936 --csv /tmp/x.csv > /dev/null 2>&1
ncu -i $O/filter.ncu-rep --page source --csv --print-source sass > $O/filter_sass.csv 2>/dev/null
ncu -i $O/filter.ncu-rep --section SpeedOfLight | grep -E "Duration|Throughput"
gzip $O/filter_sass.csv; rm -f $O/filter.ncu-rep
