#!/bin/bash
# Run 5: the Philox round keys kept from being hoisted out of the sweep loop
# (philox-keys.patch, -DSV_EXP_PHILOX_KEYS_INLINE: an empty asm on the two key
# words each round, so every call adds the Weyl constants again instead of
# holding 20 precomputed round keys; at 3 race blocks per SM, 80 registers,
# those spilled) against HEAD, 2 and 3 race blocks per SM, two rounds.
# Bundle: .gpu-pack/rb_base (build-gpu at HEAD), .gpu-pack/rb_philox (build-exp).
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
for round in 1 2; do
  for shape in "probabilities,128,8,151936" "probabilities,64,8,151936" "probabilities,32,8,151936" "probabilities,8,8,151936" "logprobs,128,8,151936" "logits,8,8,151936"; do
    for bps in 2 3; do
      for bin in rb_base rb_philox; do
        echo "== round $round | $bin | $shape | blocks/SM $bps"
        ./$bin --only $shape --blocks-per-sm $bps --runs 200 --csv /dev/null 2>&1 | grep "ours median"
      done
    done
  done
done
