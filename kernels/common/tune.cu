// tune.cu - timing a library's candidates for one operation (tune.cuh).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/tune.cuh"

#define TUNE_REPS 3

static const char *tune_env(void)
{
	const char *e = getenv("ANDREA_TUNE");
	return e ? e : "";
}

int at_cu_tune_when(double flop)
{
	if (strcmp(tune_env(), "0") == 0 || flop < AT_TUNE_FLOP)
		return AT_TUNE_NEVER;
	cudaStreamCaptureStatus cap;
	if (cudaStreamIsCapturing(at_cu_stream, &cap) != cudaSuccess ||
	    cap != cudaStreamCaptureStatusNone) {
		cudaGetLastError();
		return AT_TUNE_LATER;
	}
	return AT_TUNE_NOW;
}

int at_cu_tune_now(int *tuned, double flop)
{
	if (*tuned)
		return 0;
	int when = at_cu_tune_when(flop);
	*tuned = when != AT_TUNE_LATER;
	return when == AT_TUNE_NOW;
}

// Milliseconds for TUNE_REPS runs of candidate i after one warm-up, or a
// negative number where it cannot run.
static float time_one(int i, int (*run)(int, void *), void *ctx,
		      cudaEvent_t t0, cudaEvent_t t1)
{
	if (run(i, ctx))
		return -1;
	cudaEventRecord(t0, at_cu_stream);
	for (int r = 0; r < TUNE_REPS; r++)
		if (run(i, ctx))
			return -1;
	cudaEventRecord(t1, at_cu_stream);
	float ms = -1;
	if (cudaEventSynchronize(t1) != cudaSuccess ||
	    cudaEventElapsedTime(&ms, t0, t1) != cudaSuccess)
		return -1;
	return ms;
}

int at_cu_fastest(int n, int (*run)(int i, void *ctx), void *ctx,
		  const char *what, const char *kind)
{
	cudaEvent_t t0, t1;
	if (cudaEventCreate(&t0) != cudaSuccess) {
		cudaGetLastError();
		return -1;
	}
	if (cudaEventCreate(&t1) != cudaSuccess) {
		cudaEventDestroy(t0);
		cudaGetLastError();
		return -1;
	}
	int verbose = strcmp(tune_env(), "v") == 0, best = -1;
	float best_ms = -1;
	for (int i = 0; i < n; i++) {
		float ms = time_one(i, run, ctx, t0, t1);
		if (verbose)
			fprintf(stderr, "andrea: %s: %s %d: %.4f ms\n", what, kind,
				i, ms / TUNE_REPS);
		if (ms >= 0 && (best < 0 || ms < best_ms * 0.97f)) {
			best = i;
			best_ms = ms;
		}
	}
	cudaEventDestroy(t0);
	cudaEventDestroy(t1);
	cudaGetLastError(); // a candidate's refusal is not the caller's error
	return best;
}
