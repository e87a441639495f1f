#!/bin/bash
# Run 2: where the overlapped path's time goes. $1 = bundle with bin/rejection_bench
# (fence 1 = __threadfence), bin/rb_f0 (no fence: timing only), rb_f2 (fence.acq_rel),
# rb_f3 (red.release), rb_r1 (row pass only, fence 1), rb_r0 (row pass only, no fence).
set -u
B=$(cd "$1" && pwd); O=$OUT; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
for b in 8 128 1; do
  for v in rejection_bench rb_f0 rb_f2 rb_f3 rb_r1 rb_r0; do
    timeout 120 $B/bin/$v --only logits,$b,8,151936 --csv /tmp/x.csv 2>&1 | grep -E "ours|three-launch" | sed "s/^/$v: /" >> $O/var.txt
  done
done
sed 's/gamma=8 V=151936 //; s/| launch.*//; s/copies=[0-9]* *//' $O/var.txt
NCU="ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum"
timeout 200 $NCU --launch-skip 300 --launch-count 12 $B/bin/rejection_bench --only logits,8,8,151936 --runs 200 --csv /tmp/x.csv > $O/ncu-overlap.txt 2>&1
timeout 200 $NCU --launch-skip 300 --launch-count 12 $B/bin/rejection_bench --no-overlap --only logits,8,8,151936 --runs 200 --csv /tmp/x.csv > $O/ncu-three.txt 2>&1
for f in ncu-overlap ncu-three; do echo "== $f"; grep -E "Kernel|gpu__time_duration" $O/$f.txt | sed -E 's/^ +//; s/<.*//; s/gpu__time_duration.sum +us +//' | paste - - | sort | uniq -c | head -20; done
