#!/bin/sh
# The stage benchmark: C compute in-process vs NumPy, and the pipeline;
# then the pipeline at long contexts (bench/long_contexts.py; arguments
# filter its rows, for example 4096).
cd "$(dirname "$0")/.." && /usr/bin/python3 bench/stages.py &&
	exec /usr/bin/python3 bench/long_contexts.py "$@"
