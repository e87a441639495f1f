#!/bin/bash
# Run 4: does the new server test catch a completion that folds the race
# slots before making the packed offsets (the failed sequence's k taken as 0,
# so the rows after it are looked for 1-k rows early)? sampled_server_test
# from df27e72 against the same test linked with that order (the fold moved
# above the packed offsets in CudaExecutor::Finish; not committed).
cd .gpu-pack && export LD_LIBRARY_PATH=$PWD/lib
for bin in sampled_server_test sampled_server_test_broken; do
  echo "== $bin"
  timeout 120 ./bin/$bin --gtest_filter='*NanOnly*:*NanAt*' 2>&1 | grep -E "^\[  (PASSED|FAILED)|^\[  FAILED|Failure|kv|rows" | head -12
done
