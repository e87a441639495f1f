#!/usr/bin/env bash
# Run 3 (H100): bisecting run 2's +0.9 us at probabilities B=128: the kernels
# of 45d637d, 7f1c9ec, 2ce133b, 57c224b and HEAD (d837c1e), the commits since
# 45d637d that touched kernels/sampling's race (0b0c054 changed a logits-only
# branch, d9f7d3e the 16-bit row pass, 48ee3d4 nothing: same cubin),
# alternating, three rounds.
#   per commit: git worktree add /tmp/wt-C C; cmake -S /tmp/wt-C -B /tmp/build-C
#     -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90;
#     cmake --build /tmp/build-C --target rejection_bench
#   scripts/gpu-bundle.sh /tmp/st .gpu-st rejection_bench rejection_bench_{45d637d,7f1c9ec,2ce133b,57c224b}
set -u
export LD_LIBRARY_PATH=$PWD/.gpu-st/lib
for round in 1 2 3; do
  for bin in rejection_bench_45d637d rejection_bench_7f1c9ec rejection_bench_2ce133b rejection_bench_57c224b rejection_bench; do
    echo "round $round $bin: $(.gpu-st/bin/$bin --only probabilities,128,8,151936 --runs 200 --csv /dev/null 2>&1 | grep -E 'ours median' | sed 's/ | read floor\(.\{0,22\}\).*/ | floor\1/')"
  done
done
