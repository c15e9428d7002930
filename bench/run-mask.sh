#!/bin/sh
# The causal mask's store layouts and the write-pattern probes
# (bench/mask-layouts.cu), on a GPU machine: make bench-mask.
cd "$(dirname "$0")/.." && exec build/bench/mask-layouts
