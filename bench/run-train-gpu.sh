#!/bin/sh
# The GPU training benchmark: andrea-train --device cuda vs a PyTorch eager
# model of the same architecture, fp32/tf32/bf16, andrea-12m and -120m at
# V = 257 and 8449 (arguments filter: e.g. andrea-12m 257 bf16).
cd "$(dirname "$0")/.." && exec "${PYTHON:-python3}" bench/train-gpu.py "$@"
