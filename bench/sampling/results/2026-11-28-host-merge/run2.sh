#!/bin/bash
# Run 2: the server suites on the host-merged sampled path (the CUDA executor
# folds the race slots in its completion). Bundle: .gpu-pack (build-gpu,
# Release, CUDA arch 90): cuda_executor_test, sampled_server_test.
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "revision: $(cat REVISION)"
for t in cuda_executor_test sampled_server_test; do
  echo "== $t"
  timeout 240 ./bin/$t 2>&1 | grep -E "^\[  (PASSED|FAILED|SKIPPED)|^\[  FAILED|Failure|rror" | head -20
done
