#!/bin/sh
# run-codec.sh - the stream codec benchmark (bench/codec.c) with a header
# naming the date and machine, so its output can be pasted into README.md.
#   sh bench/run-codec.sh [codec options]     e.g. -s 8 -r 1 for a quick run
# CODEC_ARGS in the environment adds options too (make bench-codec CODEC_ARGS=...).
set -e
cd "$(dirname "$0")/.."
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //'), \
$(nproc) cpus, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo 2>/dev/null), \
$(uname -sr), $(cc --version | head -1)"
# shellcheck disable=SC2086
exec build/bench/codec ${CODEC_ARGS:-} "$@"
