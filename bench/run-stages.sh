#!/bin/sh
# The stage benchmark: C compute in-process vs NumPy, and the pipeline.
cd "$(dirname "$0")/.." && exec /usr/bin/python3 bench/stages.py
