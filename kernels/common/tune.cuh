// tune.cuh - choosing among a library's candidate kernels for one
// operation by timing each on the caller's real operands, once: the
// cuBLASLt algorithms of the training engine's large products and GELU
// products (gemm_lt.cu) and the cuDNN engine configurations of the fused
// attention (cudnn_graph.cu), whose heuristics' first picks are not
// always their fastest.
#ifndef ANDREA_COMMON_TUNE_CUH
#define ANDREA_COMMON_TUNE_CUH

#include "common/cuda_util.cuh"

// An operation of fewer operations than this keeps the heuristic's
// first: its times are noise, and a choice that moved from run to run
// would move the results' last bits with it.
#define AT_TUNE_FLOP 4e9

enum { AT_TUNE_NEVER, AT_TUNE_NOW, AT_TUNE_LATER };

// Whether to time the candidates of an operation of `flop` operations:
// never (ANDREA_TUNE=0, or too small: keep the first), now, or later
// (at_cu_stream is being recorded into a graph, where nothing runs: the
// next eager call chooses).
int at_cu_tune_when(double flop);
// Whether to time them now, for an operation whose choice is *tuned:
// once, and *tuned then set, unless it is later.
int at_cu_tune_now(int *tuned, double flop);

// The index of the fastest of n candidates, run(i, ctx) launching
// candidate i once on at_cu_stream (0, or nonzero where it cannot run
// these operands): each runs once to warm up, then three times timed; a
// later candidate must beat the best so far by 3% (ties go to the
// heuristic's earlier pick).  -1 where none ran.  The operation must be
// safe to repeat (no output among its inputs).  ANDREA_TUNE=v prints
// each candidate's time on stderr, as `what`'s `kind` i.
int at_cu_fastest(int n, int (*run)(int i, void *ctx), void *ctx,
		  const char *what, const char *kind);

#endif
