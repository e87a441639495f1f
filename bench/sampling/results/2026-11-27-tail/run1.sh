#!/usr/bin/env bash
# Run 1 (H100): the tail after the row pass at 7f1c9ec, and two trims of it.
# Variants (experiment macros, tail.patch; builds with CMAKE_CUDA_FLAGS):
#   gpu = 7f1c9ec; pre = SV_EXP_PRELOAD: the exact-logits race's warp 0 reads
#   the draft tokens and the values at them before griddepcontrol.wait, so
#   after it the decision waits only for the normalizers; sum =
#   SV_EXP_COMBINE_SUM: the combine's ordered double sum reads its shared
#   values eight at a time; both. tl / tlpre = the timeline stamps of
#   ../2026-11-27-timeline (with and without pre).
# Binaries copied as rejection_bench_<variant> into /tmp/e12b, then
#   scripts/gpu-bundle.sh /tmp/e12b .gpu-e12 rejection_bench_tl ...
# Run (H100): carry .gpu-e12
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-e12/lib
B=.gpu-e12/bin
for spec in "logits,8,8,151936" "logits,1,8,151936"; do
  set -- $spec
  for v in tl tlpre; do
    echo "== $v $spec"
    $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|timeline|  race|  iter" | head -24
  done
done > "$OUT/run1-timeline.txt" 2>&1
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936 --dtype bf16"; do
    set -- $spec
    for v in gpu pre sum both; do
      printf '%-5s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
grep -E "==|timeline|waited|decided|iter 0|swept|ticket|outcome" "$OUT/run1-timeline.txt" | awk '/^==/{c=0} {c++} c<=9'
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//' "$OUT/run1-ab.txt"
