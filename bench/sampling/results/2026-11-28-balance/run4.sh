#!/bin/bash
# Run 4: race blocks per SM (the benchmark's --blocks-per-sm) on the race-only
# kinds at B=32/64/128, HEAD (9516f26), two rounds. Bundle as run3.sh.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
for round in 1 2; do
  for shape in "probabilities,128,8,151936" "probabilities,64,8,151936" "probabilities,32,8,151936" "logprobs,128,8,151936"; do
    for bps in 2 3; do
      echo "== round $round | $shape | blocks/SM $bps"
      ./rb_base --only $shape --blocks-per-sm $bps --runs 200 --csv /dev/null 2>&1 | grep "ours median"
    done
  done
done
