#!/usr/bin/env bash
# The race's blocks per SM (the launcher's one tuning knob, --blocks-per-sm)
# re-swept at f4350d6 on issue #17's shapes, two rounds. Bundle: the one of
# ../../../release/2026-11-28/run.sh (carry .gpu-pack). Output: bps.txt.
tar xzf .gpu-pack/bundle.tgz; export LD_LIBRARY_PATH=$PWD/.gpu-v/lib; B=.gpu-v/bin
for round in 1 2; do
  for spec in "logits,8,8,151936" "logits,8,8,151936 --dtype bf16" "logits,1,8,151936" "logits,32,8,151936" \
              "probabilities,8,8,151936" "logprobs,8,8,151936"; do
    for bps in 1 2 3; do
      set -- $spec; printf '%s r%d bps=%d ' "$spec" $round $bps
      $B/rejection_bench --only "$1" "${@:2}" --blocks-per-sm $bps --runs 200 --csv /dev/null 2>&1 |
        grep -E "ours median" | sed -E 's/ +/ /g' | cut -d'|' -f1-2
    done
  done
done 2>&1 | tee "$OUT/bps.txt"
