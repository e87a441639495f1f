#!/usr/bin/env bash
# Race sweep: trims and a deeper cp.async ring (issue #17 item 5), A/B on
# the H100 against 7e8ccab (base). The working tree's source (the three
# trims of run 3 and the dynamic shared-memory opt-in the deeper rings need),
# built with CMAKE_CUDA_FLAGS:
#   all: as is (lookahead 4)
#   V1 : -DSPECVERIFY_EXP_OLD_HOPEFUL (the block-bound and staging trims only)
#   V2 : V1 with -DSPECVERIFY_EXP_LOOKAHEAD=8 (72 KB ring a block)
#   V3 : all with lookahead 8
#   V4 : V1 with lookahead 6 (56 KB)
# Run (H100): carry .gpu-base .gpu-all .gpu-V1 .gpu-V2 .gpu-V3 .gpu-V4
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-base/lib
for round in 1 2; do
  for v in base all V1 V2 V3 V4; do
    for spec in probabilities,8 probabilities,32 probabilities,128 logprobs,8 logprobs,128 logits,8; do
      printf '%-5s round %d  ' "$v" "$round"
      ".gpu-$v/bin/rejection_bench" --only ${spec},8,151936 --runs 300 --csv /dev/null | grep "ours median"
    done
  done
done > "$OUT/run4-ab.txt" 2>&1
awk '{print $1, $3, $4, $5, $12}' "$OUT/run4-ab.txt"
