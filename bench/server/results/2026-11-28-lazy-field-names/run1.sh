#!/bin/bash
# Old against new request checks, alternating per round, on the build VM (2 cores,
# no GPU): servers built with admit-timing.patch applied (old = 744d56a, new =
# the lazy field names), as ${BIN_DIR}/inst-old and inst-new, the no-op backend,
# the loadgen at c = 1 (sampled: 8 sequences, gamma 8, V 151,936 fp32
# probabilities with draft rows in a shm region; greedy: 4 sequences, 4 KiB
# rows, handles). Each server prints the mean time of ValidateVerifyRequest and
# of ResolveRegionRefs over 4,000 requests; the loadgen its queue_ns p50.
for round in 1 2 3; do for v in old new; do
  ${BIN_DIR:-/tmp}/inst-$v --listen_address=127.0.0.1:50741 --metrics_address=127.0.0.1:50742 --device=noop > /tmp/v.out 2>/tmp/v-$v-$round.log & SP=$!
  for i in $(seq 1 100); do grep -q "listening" /tmp/v.out && break; sleep 0.05; done
  for m in sampled greedy; do
    if [ $m = sampled ]; then a="--mode=sampled --gamma=8 --sequences-per-request=8 --vocab=151936 --row-bytes=0 --kv-return=none --dtype=fp32 --kind=probs --transport=shm"; else a="--mode=greedy --gamma=8 --sequences-per-request=4 --row-bytes=4096 --kv-return=handle"; fi
    ${LOADGEN:-build/client/specverify-loadgen} --address=127.0.0.1:50741 --duration=3s --warmup=0.5s --quiet --concurrency=1 --pool-requests=2 $a > /tmp/l.txt 2>&1
    echo "round $round $v $m: $(tail -1 /tmp/v-$v-$round.log) | $(grep -o 'server queue p50/p99 [0-9./]* us' /tmp/l.txt) $(grep -o 'ok=[0-9]*' /tmp/l.txt)"
  done
  kill $SP; wait $SP 2>/dev/null
done; done
