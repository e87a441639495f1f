#!/bin/bash
# Where the host time of a request goes (instrumented server: parse, request
# checks, answer building, batch release, serialize, metrics, gRPC Finish).
set -u
tar xJf .gpu-z/oc.tar.xz; xz -dc .gpu-z2/inst.xz > /tmp/inst; chmod +x /tmp/inst
export LD_LIBRARY_PATH=$PWD/.gpu-oc/lib
LG=$PWD/.gpu-oc/bin/specverify-loadgen
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
for dev in noop cuda:0; do
  for c in 1 64; do
    for m in sampled greedy; do
      if [ $m = sampled ]; then a="--mode=sampled --gamma=8 --sequences-per-request=8 --vocab=151936 --row-bytes=0 --kv-return=none --dtype=fp32 --kind=probs --transport=cuda --pool-requests=8"; else a="--mode=greedy --gamma=8 --sequences-per-request=4 --row-bytes=512 --kv-return=none --pool-requests=64"; fi
      /tmp/inst --listen_address=127.0.0.1:50751 --metrics_address=127.0.0.1:50752 --device=$dev > /tmp/s.out 2>/tmp/s.log & SP=$!
      for i in $(seq 1 200); do grep -q "listening" /tmp/s.out && break; sleep 0.05; done
      $LG --address=127.0.0.1:50751 --duration=4s --warmup=0.5s --quiet --concurrency=$c $a > /tmp/l.txt 2>&1
      echo "== $dev c=$c $m: $(grep -o 'ok=[0-9]* rpc_errors=[0-9]* wrong=[0-9]*' /tmp/l.txt) | $(grep -o 'server queue.*' /tmp/l.txt)"
      grep -E "parse|serialize|batch:" /tmp/s.log | tail -3
      kill $SP; wait $SP 2>/dev/null
    done
  done
done
