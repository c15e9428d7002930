#!/bin/sh
# The decoding benchmark: andrea-generate's tokens/s against NumPy with a KV
# cache (CPU) and, where PyTorch sees a GPU, PyTorch eager and Hugging Face
# generate (arguments filter: e.g. andrea-12m cpu 1; --quick for a short run).
# PYTHON is the interpreter (NumPy; PyTorch and transformers for the GPU
# rows); one without NumPy gives way to /usr/bin/python3.
cd "$(dirname "$0")/.." || exit 1
py=${PYTHON:-python3}
"$py" -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
exec "$py" bench/generate.py "$@"
