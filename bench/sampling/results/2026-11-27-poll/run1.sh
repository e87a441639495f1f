#!/usr/bin/env bash
# Run 1 (H100): the exact-logits race polls each row's normalizer word
# (PublishedNorm: one 128-bit relaxed store by the combine, pending-marked by
# the row pass) instead of griddepcontrol.wait on the whole combine grid.
# base = bfcaa7e (kernels of 2ce133b), poll = poll.patch on it.
# Build: base: cmake --build build-gpu --target rejection_bench rejection_cuda_test;
#   poll: the patched tree, cmake -S . -B build-poll -G Ninja
#   -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90, same targets;
#   scripts/gpu-bundle.sh <dir with rejection_bench_{base,poll},
#   rejection_cuda_test_poll> .gpu-poll ...
# Run (H100): carry .gpu-poll
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-poll/lib
B=.gpu-poll/bin
$B/rejection_cuda_test_poll 2>&1 | tail -3 > "$OUT/run1-tests.txt"
cat "$OUT/run1-tests.txt"
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,1,8,151936" "logits,8,8,151936 --dtype bf16" "logits,32,8,151936" "logits,32,8,151936 --dtype bf16" "logits,1,8,151936 --dtype bf16" "probabilities,8,8,151936"; do
    set -- $spec
    for v in base poll; do
      printf '%-5s round %d %-34s ' "$v" "$round" "$spec"
      $B/rejection_bench_$v --only "$1" "${@:2}" --runs 200 --csv /dev/null | grep -E "ours median|top-k" | sed -E 's/ +/ /g; s/\| launch.*//' | tr '\n' ' '
      echo
    done
  done
done > "$OUT/run1-ab.txt" 2>&1
sed -E 's/gamma=8 V=151936 //g; s/copies=[0-9]+ //; s/ p95 [0-9.]+( us)?//g; s/\(filter: [^)]*\)//; s/\| read floor [0-9.]+ us \([0-9.]+ MB\)//' "$OUT/run1-ab.txt"
