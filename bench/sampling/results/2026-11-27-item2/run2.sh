#!/usr/bin/env bash
# Instruction fetch at B=8 (H100): run1 showed log-probabilities' race kernel
# 21% instruction-fetch stalls with warm caches (probabilities 7%), at the
# sweep loop's head and tail, every iteration. Do cold paths out of line help?
# V2: ExpDet of the exact log-probability weights in a __noinline__ function;
# V3: V2 plus the exact offer (RaceExponential, RaceOffer) out of line, all
# kinds. Base 323f2e4 and V1 (run1) again in the same run; alternating, three
# rounds; ncu source counters (warm) of V2 / V3 log-probabilities and V3
# probabilities.
# Build: temporary macro SPECVERIFY_EXP (2, 3) in rejection_sample.cu,
#   cmake --build build-gpu --target rejection_bench, stripped to
#   .gpu-t/bin/rejection_bench_v2 / _v3.
# Run (H100): carry .gpu-t
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-t/lib
B=.gpu-t/bin
for spec in "v2 logprobs" "v3 logprobs" "v3 probabilities"; do
  set -- $spec
  ncu --cache-control none --section SourceCounters --section WarpStateStats -k regex:AcceptRaceKernel -s 40 -c 1 \
    -o "$OUT/run2-$1-$2" $B/rejection_bench_$1 --only $2,8,8,151936 --runs 5 --csv /dev/null > /dev/null 2>&1
  ncu -i "$OUT/run2-$1-$2.ncu-rep" --page source --csv --print-source sass > "$OUT/run2-$1-$2-sass.csv" 2>&1
  rm -f "$OUT/run2-$1-$2.ncu-rep"
done
for round in 1 2 3; do
  for shape in probabilities,8 logprobs,8 logits,8; do
    for v in rejection_bench rejection_bench_v1 rejection_bench_v2 rejection_bench_v3; do
      printf '%-20s round %d ' "$v" "$round"
      $B/$v --only "$shape,8,151936" --runs 200 --csv /dev/null | grep -E "ours median"
    done
  done
done > "$OUT/run2-ab.txt" 2>&1
awk '{for(i=1;i<=NF;i++) if($i=="median") m=$(i+1); print $1, $3, $4, $5, m}' "$OUT/run2-ab.txt"
