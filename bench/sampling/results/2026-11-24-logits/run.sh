#!/bin/bash
# logits helper, final: tests + sanitizers, A/B main (a983d03) vs new, 2 rounds, PyTorch quick.
set -u
B=$(cd "$(dirname "$0")" && pwd); O=/tmp/lgfinal; rm -rf $O; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
cd "$B/.."
T0=$(date +%s)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; } > $O/environment.txt 2>&1
bash scripts/gpu-sampling.sh "$B" $O/tests --no-bench > $O/tests.log 2>&1
cat $O/tests/summary.txt
ab() { # variant dtype shape round
  local bin=$B/bin/rejection_bench; [ "$1" = main ] && bin=$B/bin/rejection_bench_main
  echo "$bin --dtype $2 --only $3" >> $O/commands.txt
  $bin --dtype $2 --only $3 --csv $O/ab_$1_$2_$4_${3//,/_}.csv >> $O/ab_$1.txt 2>&1 || echo "FAIL $1 $2 $3"
}
for round in 1 2; do
  for v in new main; do
    for s in logits,8,8,151936 logits,1,8,151936 logits,32,8,151936 logits,128,8,151936 probabilities,8,8,151936 probabilities,128,8,151936; do ab $v fp32 $s $round; done
    for s in logits,8,8,151936 logits,1,8,151936 logits,32,8,151936 logits,128,8,151936; do ab $v bf16 $s $round; done
    ab $v fp16 logits,8,8,151936 $round
  done
  echo "t=$(( $(date +%s) - T0 ))s after ab round $round"
done
{
  echo "variant dtype round kind path B gamma V median_us p95_us"
  for f in $O/ab_*.csv; do
    n=$(basename $f .csv | cut -d_ -f2-4)
    awk -F, -v n="$n" 'NR>1 && $2 != "empty_kernel" {split(n,a,"_"); print a[1], a[2], a[3], $1, $2, $3, $4, $5, $9, $10}' $f
  done | sort -k4,4 -k6,6n -k5,5 -k1,1 -k3,3n
} > $O/ab_table.txt
grep -v full_row_check $O/ab_table.txt
python3 bench/python/sampling_torch_baseline.py --quick --csv $O/torch.csv > $O/torch.txt 2>&1
grep -E "B=8 " $O/torch.txt
echo "t=$(( $(date +%s) - T0 ))s total"
tar czf $OUT/lgfinal.tgz -C /tmp lgfinal
