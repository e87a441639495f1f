#!/bin/bash
# Run 3: the race without its merge ticket (no-ticket.patch, -DSV_EXP_NO_TICKET:
# block 0 of a sequence writes the decision's outcome, every block only folds
# its word into the sequence's with atomicMax, nobody reads it back; tokens are
# wrong, timing is what a host-decoded word would cost) against HEAD (9516f26),
# alternating, two rounds. Bundle: .gpu-pack/rb_base (build-gpu at 9516f26),
# .gpu-pack/rb_noticket (build-exp, CMAKE_CUDA_FLAGS=-DSV_EXP_NO_TICKET).
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for round in 1 2; do
  for shape in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" "probabilities,8,8,151936" "probabilities,128,8,151936" "logprobs,8,8,151936"; do
    for bin in rb_base rb_noticket; do
      echo "== round $round | $bin | $shape"
      ./$bin --only $shape --runs 200 --csv /dev/null 2>&1 | grep -v "^ *$" | tail -6
    done
  done
done
