#!/bin/bash
# Runs 3 and 4 (the code of each run): decision items first, chunk statistics loaded once per combine;
# run 4 adds the block-wide combine. $1 = bundle.
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
timeout 300 $B/bin/rejection_cuda_test --gtest_filter='*Overlapped*:*TargetShape*:*Graph*:*OwnSequences*:*AcrossTheGrid*:*BadValues*' > $O/tests.txt 2>&1
echo "tests rc=$?"; grep -E "^\[  (FAILED|PASSED)|tests ran" $O/tests.txt | head
for dt in fp32 bf16; do for b in 1 8 32 128; do
  timeout 120 $B/bin/rejection_bench --dtype $dt --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "three-launch" | sed "s/^/$dt: /" >> $O/ab.txt
done; done
sed 's/gamma=8 V=151936 //' $O/ab.txt
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum"
timeout 200 $NCU --launch-skip 300 --launch-count 12 $B/bin/rejection_bench --only logits,8,8,151936 --runs 200 --csv /tmp/x.csv > $O/ncu-overlap.txt 2>&1
grep -E "^  [a-z].*Kernel|gpu__time_duration" $O/ncu-overlap.txt | sed -E 's/^ +//; s/<.*//; s/\(.*//; s/gpu__time_duration.sum +us +//' | paste - - | sort | uniq -c
