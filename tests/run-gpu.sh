#!/usr/bin/env bash
# run-gpu.sh - the GPU test suite (make test-gpu), for a machine with a GPU
# but maybe without pytest: (a) the NumPy-oracle suites of the stages,
# tests/test_gpu.py and tests/test_train_gpu.py (andrea-train on the GPU
# against the CPU, with its own memcheck run), tests/test_train_ranks_gpu.py
# (one rank through NCCL against the plain run) with ANDREA_DEVICE=cuda,
# (b) every kernel harness, (c) compute-sanitizer memcheck and racecheck
# over the harnesses, memcheck over one stage pipeline and over the
# forward engine's tools.  Ends with one summary line; exits 1
# when anything failed.  Logs go to build/gpu-test/.  GPU_TEST_SKIP
# names parts not to run: any of suites, harnesses, sanitizer (all that
# follows the harnesses), memcheck and racecheck (the sanitizer's two
# passes over the harnesses), to run a part again, or the rest of a run
# that was stopped.
cd "$(dirname "$0")/.." || exit 1
PYTHON=${PYTHON:-python3}
LOG=build/gpu-test
mkdir -p "$LOG"
passed=0 failed=0 failures="" skipped_suites=""

# step NAME COMMAND...: runs it, output to the terminal and LOG/NAME.log
step() {
	local name=$1
	shift
	echo "== $name: $*"
	if "$@" 2>&1 | tee "$LOG/$name.log"; [ "${PIPESTATUS[0]}" = 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		failures="$failures $name"
		echo "== $name FAILED (log: $LOG/$name.log)"
	fi
}

finish() {
	echo "test-gpu: $passed passed, $failed failed${failures:+ (failed:$failures)}${skipped_suites:+; skipped whole:$skipped_suites (its log says why)}${1:+; $1}"
	[ "$failed" = 0 ]
	exit
}

# the GPU must be usable before anything else means something
if ! printf x | bin/andrea-embed --text --device cuda >/dev/null; then
	failed=1 failures=" device"
	finish "no usable GPU: see the message above"
fi

# skipped PART: is PART named in GPU_TEST_SKIP?
skipped() { case " ${GPU_TEST_SKIP:-} " in *" $1 "*) true ;; *) false ;; esac; }

# (a) the stage suites on the GPU
SUITES="tests/test_stages.py tests/test_attention.py tests/test_filters.py tests/test_model_filters.py tests/test_gpu.py tests/test_train_gpu.py tests/test_train_ranks_gpu.py tests/test_attention_train_gpu.py tests/test_forward_gpu.py tests/test_interventions_gpu.py tests/test_hf_gpt2.py tests/test_stage_edges.py"
# GPU_TEST_JOBS=N (with pytest): each suite its own pytest, N at once,
# each one's output in LOG/SUITE.log, printed as it ends; ALONE's suites
# compare the device memory a run held (total - free), which another
# process would add to, and run after the others, one at a time
ALONE="tests/test_train_ranks_gpu.py"
suite() {
	local name
	name=$(basename "$1" .py)
	env ANDREA_TEST_DEVICE=cuda "$PYTHON" -m pytest -q -p no:cacheprovider \
		"$1" >"$LOG/$name.log" 2>&1
	echo $? >"$LOG/$name.rc"
	echo "== $name: $(tail -n 1 "$LOG/$name.log")"
}
JOBS=${GPU_TEST_JOBS:-1}
if skipped suites; then
	echo "== suites skipped (GPU_TEST_SKIP)"
elif [ "$JOBS" -gt 1 ] && "$PYTHON" -c 'import pytest' 2>/dev/null; then
	for s in $SUITES; do
		case " $ALONE " in *" $s "*) continue ;; esac
		while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do
			sleep 1
		done
		suite "$s" &
	done
	wait
	for s in $ALONE; do
		suite "$s"
	done
	for s in $SUITES; do
		name=$(basename "$s" .py)
		rc=$(cat "$LOG/$name.rc" 2>/dev/null)
		if [ "$rc" = 0 ]; then
			passed=$((passed + 1))
		elif [ "$rc" = 5 ]; then # pytest's "no tests ran": skipped whole
			skipped_suites="$skipped_suites $name"
		else
			failed=$((failed + 1))
			failures="$failures $name"
			grep -E "^(FAILED|ERROR)" "$LOG/$name.log"
		fi
	done
elif "$PYTHON" -c 'import pytest' 2>/dev/null; then
	step pytest env ANDREA_TEST_DEVICE=cuda "$PYTHON" -m pytest -q \
		-p no:cacheprovider $SUITES
else
	step suites env ANDREA_TEST_DEVICE=cuda "$PYTHON" \
		tests/run_without_pytest.py $SUITES
fi

# (b) the kernel harnesses, full size with timings
HARNESSES=$(ls build/kernels/*-check)
skipped harnesses || for h in $HARNESSES; do
	step "$(basename "$h")" "$h"
done
skipped sanitizer && finish "sanitizer skipped (GPU_TEST_SKIP)"

# (c) compute-sanitizer
CS=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -n 1)}
if [ -z "$CS" ] || [ ! -x "$CS" ]; then
	failed=$((failed + 1))
	failures="$failures compute-sanitizer(not found; set COMPUTE_SANITIZER)"
	finish
fi
for tool in memcheck racecheck; do
	skipped $tool && continue
	for h in $HARNESSES; do
		# device-check runs out of memory on purpose: not an API error
		api=explicit
		[ "$(basename "$h")" = device-check ] && api=no
		# sdpa-check's kernels are cuDNN's own (racecheck takes many
		# minutes over them); memcheck still covers it
		[ "$tool-$(basename "$h")" = racecheck-sdpa-check ] && continue
		# nccl-check's kernels are NCCL's, and it starts processes of
		# its own: checked outside the sanitizer only
		[ "$(basename "$h")" = nccl-check ] && continue
		# racecheck takes many minutes over cuBLASLt's candidates
		# timed at 4.4 GFLOP (cuBLAS's kernels): without the timing
		untuned=
		[ "$tool-$(basename "$h")" = racecheck-matmul-check ] &&
			untuned=ANDREA_TUNE=0
		step "$tool-$(basename "$h")" env $untuned "$CS" --tool "$tool" \
			--report-api-errors "$api" --error-exitcode 99 \
			--print-limit 20 "$h" --quick
	done
done

# memcheck over every stage of one pipeline, compared with the CPU's output
pipeline() { # DEVICE WRAP...: the pipeline with each stage run under WRAP
	local dev=$1
	shift
	printf 'the cat sat on the mat. ' |
		"$@" bin/andrea-embed --text --bos --device "$dev" |
		"$@" bin/andrea-qkv --device "$dev" |
		"$@" bin/andrea-scores --device "$dev" |
		"$@" bin/andrea-mask --device "$dev" |
		"$@" bin/andrea-softmax --device "$dev" |
		"$@" bin/andrea-attend --proj --device "$dev"
}
sanitized_pipeline() {
	set -o pipefail
	pipeline cuda "$CS" --tool memcheck --error-exitcode 99 \
		--log-file "$LOG/pipeline-memcheck.%p.txt" >"$LOG/y-gpu.ats" &&
		pipeline cpu env >"$LOG/y-cpu.ats" &&
		bin/andrea-diff --rtol 1e-4 --atol 1e-6 "$LOG/y-gpu.ats" \
			"$LOG/y-cpu.ats" &&
		! grep -l 'ERROR SUMMARY: [1-9]' "$LOG"/pipeline-memcheck.*.txt
}
rm -f "$LOG"/pipeline-memcheck.*.txt
step memcheck-pipeline sanitized_pipeline

# memcheck over the forward engine: blocks (two records, one in flight
# while the other arrives), head, --forward, a batch of prompts decoded
# with the KV cache, in fp32 and bf16
sanitized_model() {
	set -o pipefail
	local m="$LOG/tiny.ats" p="$LOG/prompts.txt"
	local cs="$CS --tool memcheck --error-exitcode 99 --log-file $LOG/forward-memcheck.%p.txt"
	bin/andrea-train --config tiny --ctx 16 --steps 0 -o "$m" -f &&
		printf 'The \n\nab\n' >"$p" &&
		for prec in fp32 bf16; do
			$cs bin/andrea-generate -m "$m" --prompts "$p" -n 40 \
				--device cuda --precision "$prec" >/dev/null || return 1
		done &&
		{ printf 'the cat' | bin/andrea-embed --text -m "$m" &&
			printf 'a dog ran' | bin/andrea-embed --text -m "$m"; } |
		$cs bin/andrea-block -m "$m" -l all --device cuda |
		$cs bin/andrea-logits -m "$m" --device cuda >/dev/null &&
		printf 'the cat' | $cs bin/andrea-train --forward --text -m "$m" \
			--device cuda >/dev/null &&
		! grep -l 'ERROR SUMMARY: [1-9]' "$LOG"/forward-memcheck.*.txt
}
rm -f "$LOG"/forward-memcheck.*.txt
step memcheck-forward sanitized_model
finish
