#!/bin/sh
# The causal mask's store layouts and the write-pattern probes
# (bench/mask-layouts.cu), on a GPU machine: make bench-mask.
cd "$(dirname "$0")/.." || exit 1
test -x build/bench/mask-layouts || {
	echo "bench-mask: this build has no CUDA (nvcc not found; CUDA=1?)" >&2
	exit 1
}
exec build/bench/mask-layouts
