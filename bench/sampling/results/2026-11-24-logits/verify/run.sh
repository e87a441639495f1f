#!/bin/bash
# logits helper, verification of the last commit: all sampling suites (incl. the served path on cuda:0), sanitizers, headline bench new vs main.
set -u
B=$(cd "$(dirname "$0")" && pwd); O=/tmp/lgverify; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
cd "$B/.."
bash scripts/gpu-sampling.sh "$B" $O/tests --no-bench > $O/tests.log 2>&1
cat $O/tests/summary.txt
for round in 1 2; do for v in new main; do
  bin=$B/bin/rejection_bench; [ $v = main ] && bin=$B/bin/rejection_bench_main
  for d in fp32 bf16; do
    $bin --dtype $d --only logits,8,8,151936 --csv $O/h_${v}_${d}_$round.csv > /dev/null 2>&1
    awk -F, -v v=$v -v r=$round 'NR>1 && $2 ~ /cuda_rejection$|topk|floor/ {print v, r, $1, $2, $3, $9}' $O/h_${v}_${d}_$round.csv
  done
done; done
tar czf $OUT/lgverify.tgz -C /tmp lgverify
