#!/bin/sh
# The GPU training benchmark: andrea-train --device cuda vs a PyTorch eager
# model of the same architecture, fp32/tf32/bf16, andrea-12m and -120m at
# V = 257 and 8449 (arguments filter: e.g. andrea-12m 257 bf16; --runs 3
# takes the medians of 3 alternating runs of andrea and the compiled model;
# --same-cudnn runs andrea on the cuDNN PyTorch loaded).
cd "$(dirname "$0")/.." && exec "${PYTHON:-python3}" bench/train-gpu.py "$@"
