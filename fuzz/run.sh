#!/bin/sh
# run.sh NAME [SECONDS] - fuzz build/fuzz/fuzz_NAME for SECONDS (default
# 600) with one job and one worker, starting from the seed corpus
# build/fuzz/corpus/NAME (make fuzz) and the regression inputs in
# tests/fuzz-regressions/NAME.  New inputs go to build/fuzz/work/NAME,
# crashes to build/fuzz/crash/NAME/; the final stats end the log.
set -eu
name=$1
secs=${2:-600}
cd "$(dirname "$0")/.."
work=build/fuzz/work/$name
crash=build/fuzz/crash/$name
mkdir -p "$work" "$crash" "tests/fuzz-regressions/$name"
extra=
[ "$name" = argv ] && extra="-close_fd_mask=2 -detect_leaks=0"
exec "build/fuzz/fuzz_$name" -max_total_time="$secs" -rss_limit_mb=2048 \
	-timeout=10 -max_len=65536 -print_final_stats=1 \
	-artifact_prefix="$crash/" $extra \
	"$work" "build/fuzz/corpus/$name" "tests/fuzz-regressions/$name"
