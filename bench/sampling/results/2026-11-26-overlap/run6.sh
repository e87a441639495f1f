#!/bin/bash
# Run 6: relaxed polls + one acquire fence, releasing adds in the row pass;
# two items per block (rejection_bench) against one (rb_i1). $1 = bundle.
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
timeout 300 $B/bin/rejection_cuda_test --gtest_filter='*Overlapped*:*TargetShape*:*Graph*' > $O/tests.txt 2>&1
echo "tests rc=$?"; grep -E "^\[  (FAILED|PASSED)|tests ran" $O/tests.txt | head
for v in rejection_bench rb_i1; do for b in 1 8 32 128; do
  timeout 120 $B/bin/$v --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "three-launch" | sed "s/^/$v: /" >> $O/ab.txt
done; done
sed 's/gamma=8 V=151936 //' $O/ab.txt
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum -k regex:Overlapped"
for v in rejection_bench rb_i1; do
timeout 200 $NCU --launch-skip 100 --launch-count 3 $B/bin/$v --only logits,8,8,151936 --runs 200 --csv /tmp/x.csv > $O/ncu-$v.txt 2>&1
echo $v; grep -E "gpu__time_duration" $O/ncu-$v.txt
done
