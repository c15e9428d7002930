#!/bin/sh
# setup.sh - installs the Debian packages andrea needs, when missing.
# On a machine without dpkg (the GPU machine) it does nothing: the build
# there needs only the CUDA toolkit and zlib (see README.md).
set -e
pkgs="build-essential zlib1g-dev libgd-dev libjansson-dev libpcre2-dev libopenblas-dev libopenblas0-openmp python3-numpy python3-pytest man-db fortunes gnuplot-nox"
# PyPI's safetensors (its numpy API) writes the checkpoints of
# tests/test_import.py, and tokenizers (Hugging Face's, no torch) is the
# peer of tests/test_tokenize.py; they go into build/pydeps, never into
# the system.  Without a network the import tests write their files by
# hand and the tokenizer's peer tests skip.
py=${PYTHON:-/usr/bin/python3}
for mod in safetensors.numpy:safetensors tokenizers:tokenizers; do
	PYTHONPATH=build/pydeps "$py" -c "import ${mod%%:*}" 2>/dev/null && continue
	"$py" -m pip install --quiet --disable-pip-version-check --target build/pydeps \
		"${mod##*:}" 2>/dev/null ||
		echo "setup: could not install ${mod##*:} from PyPI" >&2
done
command -v dpkg-query >/dev/null 2>&1 || exit 0
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "setup: installing$missing" >&2
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
