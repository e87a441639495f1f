#!/bin/bash
# The filter kernel's per-instruction counters (SASS with CUDA source lines):
# executed instructions and stall samples per line. GPU side; $1 = bundle.
set -u
B=$(cd "$1" && pwd); O=$OUT/filter; mkdir -p $O
export LD_LIBRARY_PATH=$B/lib
ncu -k regex:FilterKernel --launch-skip 3 --launch-count 1 --section SourceCounters --section WarpStateStats \
    --import-source no -o /tmp/filter $B/bin/rejection_bench --only logits,8,8,151936 --runs 5 --csv /tmp/x.csv > $O/ncu_run.txt 2>&1
ncu --import /tmp/filter.ncu-rep --page source --csv --print-source sass > $O/filter_sass.csv 2>&1
ncu --import /tmp/filter.ncu-rep --page details --print-details all > $O/filter_details.txt 2>&1
head -3 $O/filter_sass.csv > $O/filter_sass_head.txt
