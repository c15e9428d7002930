#!/bin/sh
# The whole-model benchmark: andrea-embed | andrea-block -l all |
# andrea-logits at andrea-120m, B = 1 and 8, T = 1024, against NumPy (CPU)
# and, where PyTorch sees a GPU, PyTorch eager (arguments filter: e.g.
# cpu 8; andrea-12m; --quick for T = 256 once).  PYTHON as in run-generate.sh.
cd "$(dirname "$0")/.." || exit 1
py=${PYTHON:-python3}
"$py" -c 'import numpy' 2>/dev/null || py=/usr/bin/python3
exec "$py" bench/forward.py "$@"
