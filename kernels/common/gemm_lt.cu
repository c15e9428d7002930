// gemm_lt.cu - the process's cuBLASLt handle and workspace, the
// descriptors and the run every plan shares, the timing of a plan's
// algorithms, and plain products planned once per shape (gemm_lt.cuh).
#include "common/cuda_util.cuh"
#include "common/cublas_lazy.cuh"
#include "common/gemm_lt.cuh"
#include "common/tune.cuh"
#include "ops/precision.h"

int at_cu_lt_get(at_cu_lt **out)
{
	static at_cu_lt lt;
	static int state; // 0: not tried, 1: made, 2: no cuBLASLt
	*out = NULL;
	if (state == 2)
		return 1;
	if (state == 0) {
		if (at_cublaslt_load() < 0 ||
		    at_cublaslt.create(&lt.h) != CUBLAS_STATUS_SUCCESS) {
			state = 2;
			return 1;
		}
		if (at_cu_alloc(&lt.ws, AT_LT_WORKSPACE, "cuBLASLt's workspace") < 0) {
			at_cublaslt.destroy(lt.h);
			return -1;
		}
		state = 1;
	}
	*out = &lt;
	return 0;
}

#define LT_OK(call) ((call) == CUBLAS_STATUS_SUCCESS)

// The heuristic's first (up to) n algorithms for p's descriptors within
// the workspace, into r; how many it gave.
static int candidates(const at_cu_lt *lt, const at_cu_lt_plan *p,
		      cublasLtMatmulHeuristicResult_t *r, int n)
{
	const at_cublaslt_api &L = at_cublaslt;
	cublasLtMatmulPreference_t pref;
	if (!LT_OK(L.pref_create(&pref)))
		return 0;
	size_t ws = AT_LT_WORKSPACE;
	int found = 0;
	if (LT_OK(L.pref_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
			     &ws, sizeof ws)))
		L.heuristic(lt->h, p->desc, p->a, p->b, p->d, p->d, pref, n, r,
			    &found);
	L.pref_destroy(pref);
	return found;
}

int at_cu_lt_pick(const at_cu_lt *lt, at_cu_lt_plan *p)
{
	cublasLtMatmulHeuristicResult_t r;
	if (candidates(lt, p, &r, 1) < 1 || r.state != CUBLAS_STATUS_SUCCESS)
		return 0;
	p->algo = r.algo;
	return 1;
}

// One try of at_cu_lt_tune: the heuristic's candidates for p.
struct lt_try {
	at_cu_lt_plan *p;
	const cublasLtMatmulHeuristicResult_t *r;
	int (*launch)(const at_cu_lt_plan *p, void *ctx);
	void *ctx;
};

static int run_algo(int i, void *c)
{
	lt_try *t = (lt_try *)c;
	if (t->r[i].state != CUBLAS_STATUS_SUCCESS)
		return 1;
	t->p->algo = t->r[i].algo;
	return t->launch(t->p, t->ctx);
}

int at_cu_lt_tune(const at_cu_lt *lt, at_cu_lt_plan *p,
		  int (*launch)(const at_cu_lt_plan *p, void *ctx), void *ctx,
		  double flop, const char *what)
{
	if (!at_cu_tune_now(&p->tuned, flop))
		return 0;
	cublasLtMatmulHeuristicResult_t r[AT_LT_TRIES];
	int n = candidates(lt, p, r, AT_LT_TRIES);
	cublasLtMatmulAlgo_t first = p->algo;
	lt_try t = {p, r, launch, ctx};
	int best = at_cu_fastest(n, run_algo, &t, what, "cuBLASLt algorithm");
	p->algo = best >= 0 ? r[best].algo : first;
	return 0;
}

void at_cu_lt_plan_free(at_cu_lt_plan *p)
{
	if (p->desc)
		at_cublaslt.desc_destroy(p->desc);
	if (p->a)
		at_cublaslt.layout_destroy(p->a);
	if (p->b)
		at_cublaslt.layout_destroy(p->b);
	if (p->d)
		at_cublaslt.layout_destroy(p->d);
	*p = at_cu_lt_plan{};
}

int at_cu_lt_describe(at_cu_lt_plan *q, int prec, int ta, int tb, int M,
		      int N, int K, int lda, int ldb, int ldd, int d_bf16)
{
	const at_cublaslt_api &L = at_cublaslt;
	cudaDataType_t ty = prec == AT_PREC_BF16 ? CUDA_R_16BF : CUDA_R_32F;
	cudaDataType_t dty = d_bf16 ? CUDA_R_16BF : CUDA_R_32F;
	cublasComputeType_t ct = prec == AT_PREC_TF32 ?
		CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
	cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
	cublasOperation_t opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
	if (!LT_OK(L.desc_create(&q->desc, ct, CUDA_R_32F)) ||
	    !LT_OK(L.desc_set(q->desc, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
			      sizeof opa)) ||
	    !LT_OK(L.desc_set(q->desc, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
			      sizeof opb)))
		return 0;
	// column-major: its A is our B^T ([N,K] stored, or [K,N] when tb)
	int ar = tb ? K : N, ac = tb ? N : K;
	int br = ta ? M : K, bc = ta ? K : M;
	return LT_OK(L.layout_create(&q->a, ty, ar, ac, ldb)) &&
	       LT_OK(L.layout_create(&q->b, ty, br, bc, lda)) &&
	       LT_OK(L.layout_create(&q->d, dty, N, M, ldd));
}

int at_cu_lt_matmul(const at_cu_lt *lt, const at_cu_lt_plan *q, float alpha,
		    const void *A, const void *B, float beta, const void *X,
		    void *D, const char *what)
{
	BLAS_CHECK(at_cublaslt.matmul(lt->h, q->desc, &alpha, B, q->a, A, q->b,
				      &beta, X, q->d, D, q->d, &q->algo, lt->ws,
				      AT_LT_WORKSPACE, at_cu_stream),
		   what);
	return 0;
}

// One shape's plan.
struct shape_plan {
	int prec, ta, tb, M, N, K, lda, ldb, ldd, d_bf16;
	at_cu_lt_plan lt;
};

// A training step has a dozen or so shapes; more are planned again.
#define PLANS 32

// Fills p (its shape set) with descriptors and the heuristic's first
// algorithm; 1 on success, 0 where cuBLASLt has none.
static int make(const at_cu_lt *lt, shape_plan *p)
{
	return at_cu_lt_describe(&p->lt, p->prec, p->ta, p->tb, p->M, p->N,
				 p->K, p->lda, p->ldb, p->ldd, p->d_bf16) &&
	       at_cu_lt_pick(lt, &p->lt);
}

// The plan for this shape: a kept one, or a new one in the next slot
// (at_cu_stream is synchronized before a slot in use is replaced, which
// would end a graph's recording: a step plans about 14 of the 32).
static shape_plan *plan_for(const at_cu_lt *lt, const shape_plan *want)
{
	static shape_plan plans[PLANS];
	static int next;
	for (int i = 0; i < PLANS; i++) {
		shape_plan *p = &plans[i];
		if (p->lt.desc && p->prec == want->prec && p->ta == want->ta &&
		    p->tb == want->tb && p->M == want->M && p->N == want->N &&
		    p->K == want->K && p->lda == want->lda &&
		    p->ldb == want->ldb && p->ldd == want->ldd &&
		    p->d_bf16 == want->d_bf16)
			return p;
	}
	shape_plan *p = &plans[next];
	next = (next + 1) % PLANS;
	if (p->lt.desc) {
		cudaStreamSynchronize(at_cu_stream);
		at_cu_lt_plan_free(&p->lt);
	}
	*p = *want;
	p->lt = at_cu_lt_plan{};
	if (!make(lt, p)) {
		at_cu_lt_plan_free(&p->lt);
		return NULL;
	}
	return p;
}

// One call's operands, for at_cu_lt_tune's launches.
struct operands {
	const at_cu_lt *lt;
	float alpha, beta;
	const void *A, *B, *X;
	void *D;
	const char *what;
};

static int launch(const at_cu_lt_plan *q, void *ctx)
{
	const operands *o = (const operands *)ctx;
	return at_cu_lt_matmul(o->lt, q, o->alpha, o->A, o->B, o->beta, o->X,
			       o->D, o->what);
}

int at_cu_lt_gemm(int prec, int ta, int tb, int M, int N, int K,
		  float alpha, const void *A, int lda, const void *B, int ldb,
		  float beta, const void *X, void *D, int ldd, int d_bf16,
		  int tune, const char *what)
{
	at_cu_lt *lt;
	int rc = at_cu_lt_get(&lt);
	if (rc)
		return rc;
	shape_plan want = {};
	want.prec = prec;
	want.ta = ta;
	want.tb = tb;
	want.M = M;
	want.N = N;
	want.K = K;
	want.lda = lda;
	want.ldb = ldb;
	want.ldd = ldd;
	want.d_bf16 = d_bf16;
	shape_plan *p = plan_for(lt, &want);
	if (!p)
		return 1;
	operands o = {lt, alpha, beta, A, B, X, D, what};
	// timing runs the product again and again: only where D is not read
	if (tune && (beta == 0.0f || X != D))
		TRY(at_cu_lt_tune(lt, &p->lt, launch, &o, 2.0 * M * N * K, what));
	return launch(&p->lt, &o);
}
