#!/bin/sh
# The --device auto benchmark, for a CUDA build on a GPU machine: what
# starting CUDA costs a process, and the six-stage pipeline at T = 64, 256,
# 1024 and 4096 with --device cpu, cuda and auto (bench/auto.py says more).
# Arguments: [REPS [BUDGET_S]], default 5 runs and 150 s for the pipeline.
cd "$(dirname "$0")/.." && exec "${PYTHON:-python3}" bench/auto.py "$@"
