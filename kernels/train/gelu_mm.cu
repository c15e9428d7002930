// gelu_mm.cu - the MLP's first product with the GELU in cuBLASLt's
// epilogue: forward pre = A.B, out = GELU(pre) in one kernel (GELU_AUX
// keeps pre for the backward), and backward dpre = (dout.W^T) * GELU'(pre)
// in one kernel (DGELU).  This saves the separate GELU kernels' pass over
// the [B*T, 4C] activations each way.
//
// cuBLASLt's GELU is the tanh approximation, the model's (andrea-model(5)).  Its
// auxiliary buffer has the type of the product's output, so pre is an mm
// buffer here (bf16 in bf16 mode), where the unfused path keeps it fp32.
// Both products have fixed shapes for a run, so their descriptors and
// algorithms are chosen once; only the pointers change from layer to layer.
#include <cstdlib>

#include "train/train_kernels.cuh"
#include "common/cublas_lazy.cuh"
#include "common/gemm_lt.cuh"

struct tr_gelu_mm {
	at_cu_lt *lt; // the process's handle and workspace
	int M, N, K;
	at_cu_lt_plan fwd, bwd;
};

#define LT(call)                                    \
	do {                                        \
		if ((call) != CUBLAS_STATUS_SUCCESS) \
			return 0;                   \
	} while (0)

// Row-major out[M,N] = A[M,K] . B, B stored [K,N] (or [N,K] when tb),
// out in the operands' type, with the epilogue epi.  Returns 1 when
// cuBLASLt has an algorithm for it.
static int make_plan(tr_gelu_mm *g, at_cu_lt_plan *p, int prec, int tb,
		     cublasLtEpilogue_t epi)
{
	const at_cublaslt_api &lt = at_cublaslt;
	int M = g->M, N = g->N, K = g->K;
	if (!at_cu_lt_describe(p, prec, 0, tb, M, N, K, K, tb ? K : N, N,
			       prec == AT_PREC_BF16))
		return 0;
	LT(lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
	int64_t ld = N;
	LT(lt.desc_set(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld,
		       sizeof ld));
	return at_cu_lt_pick(g->lt, p);
}

void tr_gelu_mm_free(tr_gelu_mm *g)
{
	if (!g)
		return;
	at_cu_lt_plan_free(&g->fwd);
	at_cu_lt_plan_free(&g->bwd);
	free(g);
}

int tr_gelu_mm_new(tr_gelu_mm **out, int prec, int M, int N, int K)
{
	*out = NULL;
	// the auxiliary buffer's leading dimension must be a multiple of 8,
	// and every layer's slice of it 16-byte aligned
	if (N % 8 || M == 0 || K == 0)
		return 0;
	at_cu_lt *lt;
	int rc = at_cu_lt_get(&lt);
	if (rc)
		return rc < 0 ? -1 : 0;
	tr_gelu_mm *g = (tr_gelu_mm *)calloc(1, sizeof *g);
	if (!g)
		return at_cu_failf("out of host memory");
	g->lt = lt;
	g->M = M;
	g->N = N;
	g->K = K;
	if (!make_plan(g, &g->fwd, prec, 0, CUBLASLT_EPILOGUE_GELU_AUX) ||
	    !make_plan(g, &g->bwd, prec, 1, CUBLASLT_EPILOGUE_DGELU)) {
		tr_gelu_mm_free(g);
		return 0;
	}
	*out = g;
	return 0;
}

// One call's operands, for launch() (and the tuning that repeats it).
struct gelu_call {
	const at_cu_lt *lt;
	const void *A, *B, *aux;
	void *out;
	const char *what;
};

static int launch(const at_cu_lt_plan *p, void *ctx)
{
	const gelu_call *c = (const gelu_call *)ctx;
	BLAS_CHECK(at_cublaslt.desc_set(p->desc,
					CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
					&c->aux, sizeof c->aux),
		   c->what);
	return at_cu_lt_matmul(c->lt, p, 1.0f, c->A, c->B, 0.0f, c->out,
			       c->out, c->what);
}

// The first eager call of each product times the heuristic's algorithms
// on it (at_cu_lt_tune): at andrea-120m's shapes its first picks run 7%
// (DGELU) and 10% (GELU_AUX) slower than the fastest.  Both products only
// write out (and pre), so repeating them is harmless.
static int run(tr_gelu_mm *g, at_cu_lt_plan *p, const void *A, const void *B,
	       void *out, const void *aux, const char *what)
{
	gelu_call c = {g->lt, A, B, aux, out, what};
	TRY(at_cu_lt_tune(g->lt, p, launch, &c, 2.0 * g->M * g->N * g->K, what));
	return launch(p, &c);
}

int tr_gelu_mm_fwd(tr_gelu_mm *g, const void *A, const void *B, void *out,
		   void *pre)
{
	return run(g, &g->fwd, A, B, out, pre, "the MLP's first product");
}

int tr_gelu_mm_bwd(tr_gelu_mm *g, const void *dout, const void *W,
		   const void *pre, void *dpre)
{
	return run(g, &g->bwd, dout, W, dpre, pre,
		   "the MLP's second product, backward");
}
