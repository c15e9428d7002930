#!/bin/sh
# The GPU benchmark: each stage's kernels (build/bench/gpu) vs PyTorch eager,
# and the bandwidth of mask and softmax vs a device-to-device copy.
cd "$(dirname "$0")/.." && exec "${PYTHON:-python3}" bench/gpu.py
