#!/bin/bash
# Run 5: PyTorch in the same run as the host-merged kernels (issue #17's
# baselines): scripts/gpu-sampling.sh --quick --no-tests (rejection_bench at
# the headline shapes, sampling_torch_baseline, sampling_report) with the
# rejection_bench of af31b18 (build-gpu, Release, sm_90) in .gpu-pack.
scripts/gpu-sampling.sh .gpu-pack /tmp/s --quick --no-tests --archive $OUT/sampling.tgz > $OUT/run.txt 2>&1
cp /tmp/s/report.md $OUT/
