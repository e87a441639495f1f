#!/usr/bin/env bash
# Release check after the host-finished race merge (2026-11-28, H100): every
# GPU suite, the sanitizers and the served check of scripts/gpu-verify.sh at
# the head, then the served A/B of bench/server/results/2026-11-28-host-merge
# (old = aa36a4b's server, the device merge). Built here first:
#   cmake --build build-gpu -j2 --target greedy_cuda_test greedy_dispatch_test rejection_cuda_test \
#     cuda_executor_test cuda_server_test sampled_server_test specverify-server specverify-loadgen \
#     rejection_bench tree_cuda_test row_copy_cuda_test cuda_region_test cuda_ipc_worker
#   scripts/gpu-bundle.sh build-gpu .gpu-v <the same targets>   # over its 60 MiB check: strip
#   cp <aa36a4b build>/server/specverify-server .gpu-v/bin/specverify-server-old
#   strip --strip-unneeded .gpu-v/bin/*; tar czf .gpu-pack/bundle.tgz .gpu-v   # 53 MiB, carried
# run(carry=[".gpu-pack"], kind="nvidia-h100-x1", command="bash bench/release/2026-11-28-host-merge/run.sh")
set -u
tar xzf .gpu-pack/bundle.tgz
export LD_LIBRARY_PATH=$PWD/.gpu-v/lib
B=.gpu-v/bin
$B/specverify-server --version
$B/tree_cuda_test | tail -1; $B/row_copy_cuda_test | tail -1
(cd .gpu-v/bin && ./cuda_region_test | tail -1)   # finds cuda_ipc_worker beside it
scripts/gpu-verify.sh .gpu-v "$OUT/verify" | tail -20
echo "== served A/B"
bash bench/server/results/2026-11-28-host-merge/run1.sh .gpu-v "$OUT/served-ab" | tail -12
