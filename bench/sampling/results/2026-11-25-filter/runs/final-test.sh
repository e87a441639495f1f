#!/bin/bash
set -u
B=$(cd "$1" && pwd); O=$OUT/final; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
timeout 200 $B/bin/rejection_cuda_test > $O/rejection_cuda_test.txt 2>&1; echo "rejection_cuda_test rc=$?"; tail -n 1 $O/rejection_cuda_test.txt
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 $B/bin/rejection_cuda_test --gtest_filter='*FilteredRowsFromWarp*' > $O/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -n 1 $O/memcheck.txt
