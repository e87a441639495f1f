#!/bin/bash
# Run 2: static shares against dynamic pieces on a pure two-row stream
# (stream_balance.cu, this folder; not part of the build). Built on the build
# machine, run on the lent H100:
#   nvcc -O3 -arch=sm_90 -std=c++17 -o .gpu-pack/stream_balance \
#       bench/sampling/results/2026-11-28-balance/stream_balance.cu
# then, with .gpu-pack carried:
for b in 128 128 32 8; do .gpu-pack/stream_balance $b; done
