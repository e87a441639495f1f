#!/bin/bash
# Run 1: the race's static two-row stream through per-thread cp.async (as
# built) against bulk copies (TMA). Built on the build machine, run on the
# lent H100:
#   nvcc -O3 -arch=sm_90 -std=c++17 -o .gpu-pack/stream_tma \
#       bench/sampling/results/2026-11-28-tma-stream/stream_tma.cu
# then, with .gpu-pack carried:
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for b in 128 8 32 128; do .gpu-pack/stream_tma $b || exit 1; done
