// attention_cudnn.cu - the fused attention in bf16 through cuDNN's flash
// attention (ops_cuda.h: at_cudnn_sdpa_*): softmax(scale q.k^T [causal]) . v
// with the row log-sum-exp, and its backward, never storing T x T.
//
// cuDNN recognises its fused attention as a graph of primitive operations
// (the pattern cuDNN's frontend builds for it): two products with a masked,
// scaled softmax between them in the forward; the softmax recomputed from
// the log-sum-exp ("stats") and five products' worth of gradient in the
// backward.  The plans are made once per shape and kept.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_util.cuh"
#include "common/cudnn_graph.cuh"
#include "common/tune.cuh"
extern "C" {
#include "ops/ops_cuda.h"
}

#ifdef ANDREA_CUDNN

// The tensors' ids in the variant packs.
enum {
	ID_Q = 1, ID_K, ID_V, ID_O, ID_STATS, ID_SCALE, ID_NEG_INF, ID_ONE,
	ID_DO, ID_DQ, ID_DK, ID_DV, ID_DQ_ACCUM,
};

// A bf16 [B,H,T,D] view with the strides st of b, h, t (d contiguous),
// or with its last two dimensions swapped ([B,H,D,T]) where transposed;
// uid 0 for a virtual one.
static dnn_t bf16_view(dnn_graph *g, const at_sdpa_shape *s,
		       const long long st[3], int64_t uid, int transposed)
{
	int64_t d[4] = {s->B, s->H, s->T, s->D}, str[4] = {st[0], st[1], st[2], 1};
	if (transposed) {
		int64_t t = d[2];
		d[2] = d[3], d[3] = t;
		str[2] = 1, str[3] = st[2];
	}
	return dnn_tensor(g, CUDNN_DATA_BFLOAT16, d, str, uid,
			  uid ? 0 : DNN_VIRTUAL);
}

struct sdpa_dims {
	int64_t tt[4], tt_s[4];          // [B,H,T,T]
	int64_t ttT_s[4];                // its transpose's strides
	int64_t row[4], row_s[4];        // [B,H,T,1]
};

static sdpa_dims dims_of(const at_sdpa_shape *s)
{
	int64_t B = s->B, H = s->H, T = s->T;
	sdpa_dims d = {{B, H, T, T}, {H * T * T, T * T, T, 1},
		       {H * T * T, T * T, 1, T}, {B, H, T, 1},
		       {H * T, T, 1, 1}};
	return d;
}

// The masked, scaled scores of q and k^T (virtual, float): the start the
// forward and the backward share, the mask's indices of index_type (as
// cuDNN's frontend builds each).
static dnn_t scores(dnn_graph *g, const at_sdpa_shape *s, const sdpa_dims *d,
		    dnn_t q, dnn_t kt, cudnnDataType_t index_type)
{
	const int V = DNN_VIRTUAL;
	cudnnDataType_t F = CUDNN_DATA_FLOAT;
	dnn_t raw = dnn_tensor(g, F, d->tt, d->tt_s, 0, V);
	dnn_matmul(g, q, kt, raw);
	dnn_t scaled = dnn_tensor(g, F, d->tt, d->tt_s, 0, V);
	dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, raw, dnn_scalar(g, ID_SCALE),
		      NULL, scaled, -1);
	if (!s->causal)
		return scaled;
	dnn_t row = dnn_tensor(g, index_type, d->tt, d->tt_s, 0, V);
	dnn_t col = dnn_tensor(g, index_type, d->tt, d->tt_s, 0, V);
	dnn_t keep = dnn_tensor(g, CUDNN_DATA_BOOLEAN, d->tt, d->tt_s, 0, V);
	dnn_t masked = dnn_tensor(g, F, d->tt, d->tt_s, 0, V);
	dnn_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, index_type, scaled, NULL,
		      NULL, row, 2);
	dnn_pointwise(g, CUDNN_POINTWISE_GEN_INDEX, index_type, scaled, NULL,
		      NULL, col, 3);
	dnn_pointwise(g, CUDNN_POINTWISE_CMP_GE, CUDNN_DATA_BOOLEAN, row, col,
		      NULL, keep, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_BINARY_SELECT, F, scaled,
		      dnn_scalar(g, ID_NEG_INF), keep, masked, -1);
	return masked;
}

static void build_forward(dnn_graph *g, const at_sdpa_shape *s)
{
	const int V = DNN_VIRTUAL;
	cudnnDataType_t F = CUDNN_DATA_FLOAT, BF = CUDNN_DATA_BFLOAT16;
	sdpa_dims d = dims_of(s);
	dnn_t q = bf16_view(g, s, s->q, ID_Q, 0);
	dnn_t kt = bf16_view(g, s, s->k, ID_K, 1);
	dnn_t v = bf16_view(g, s, s->v, ID_V, 0);
	dnn_t o = bf16_view(g, s, s->o, ID_O, 0);

	dnn_t x = scores(g, s, &d, q, kt, F);
	// softmax, keeping max + log(sum) as the stats
	dnn_t m = dnn_tensor(g, F, d.row, d.row_s, 0, V);
	dnn_t xm = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t e = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t z = dnn_tensor(g, F, d.row, d.row_s, 0, V);
	dnn_t logz = dnn_tensor(g, F, d.row, d.row_s, 0, V);
	dnn_t stats = dnn_tensor(g, F, d.row, d.row_s, ID_STATS, 0);
	dnn_t p = dnn_tensor(g, BF, d.tt, d.tt_s, 0, V);
	dnn_reduce(g, CUDNN_REDUCE_TENSOR_MAX, x, m);
	dnn_pointwise(g, CUDNN_POINTWISE_SUB, F, x, m, NULL, xm, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_EXP, F, xm, NULL, NULL, e, -1);
	dnn_reduce(g, CUDNN_REDUCE_TENSOR_ADD, e, z);
	dnn_pointwise(g, CUDNN_POINTWISE_LOG, F, z, NULL, NULL, logz, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_ADD, F, m, logz, NULL, stats, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_DIV, F, e, z, NULL, p, -1);
	dnn_matmul(g, p, v, o);
}

// dq either straight from the product (cuDNN then keeps a dP workspace of
// B*H*T*T bf16) or through a float accumulator [B,H,T,D] of ours, as
// cuDNN's frontend chooses: the workspace up to 256 MB, or up to the
// frontend's own knob CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT (bytes; -1
// no limit, 0 always the accumulator).
static int uses_accumulator(const at_sdpa_shape *s)
{
	int64_t t64 = (s->T + 63) / 64 * 64, limit = 256ll << 20;
	const char *env = getenv("CUDNN_FRONTEND_ATTN_DP_WORKSPACE_LIMIT");
	if (env && *env)
		limit = strtoll(env, NULL, 10);
	if (limit < 0)
		return 0;
	return (int64_t)s->B * s->H * t64 * t64 * 2 > limit;
}

static void build_backward(dnn_graph *g, const at_sdpa_shape *s, int accum)
{
	const int V = DNN_VIRTUAL;
	cudnnDataType_t F = CUDNN_DATA_FLOAT, BF = CUDNN_DATA_BFLOAT16;
	int64_t B = s->B, H = s->H, T = s->T, D = s->D;
	sdpa_dims d = dims_of(s);
	dnn_t q = bf16_view(g, s, s->q, ID_Q, 0);
	dnn_t dq = bf16_view(g, s, s->dq, ID_DQ, 0);
	dnn_t kt = bf16_view(g, s, s->k, ID_K, 1);
	dnn_t dk = bf16_view(g, s, s->dk, ID_DK, 0);
	dnn_t vt = bf16_view(g, s, s->v, ID_V, 1);
	dnn_t dv = bf16_view(g, s, s->dv, ID_DV, 0);
	dnn_t o = bf16_view(g, s, s->o, ID_O, 0);
	dnn_t dout = bf16_view(g, s, s->dout, ID_DO, 0);
	dnn_t stats = dnn_tensor(g, F, d.row, d.row_s, ID_STATS, 0);
	dnn_t one = dnn_scalar(g, ID_ONE);

	// delta = sum over d of dO * O (virtual: its strides, the frontend's,
	// only name an order)
	int64_t od[4] = {B, H, T, D}, od_s[4] = {H * T * D, T * D, H * D, 1};
	dnn_t dxo = dnn_tensor(g, F, od, od_s, 0, V);
	dnn_t dsum = dnn_tensor(g, F, d.row, d.row_s, 0, V);
	dnn_t delta = dnn_tensor(g, F, d.row, d.row_s, 0, V);
	dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, dout, o, NULL, dxo, -1);
	dnn_reduce(g, CUDNN_REDUCE_TENSOR_ADD, dxo, dsum);
	dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, dsum, one, NULL, delta, -1);

	// P = exp(scores - stats); dV = P^T dO
	dnn_t x = scores(g, s, &d, q, kt, CUDNN_DATA_INT32);
	dnn_t xs = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t p = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t pt = dnn_tensor(g, BF, d.tt, d.ttT_s, 0, V);
	dnn_pointwise(g, CUDNN_POINTWISE_SUB, F, x, stats, NULL, xs, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_EXP, F, xs, NULL, NULL, p, -1);
	dnn_reshape(g, p, pt);
	dnn_matmul(g, pt, dout, dv);

	// dS = scale * P * (dO V^T - delta); dK = dS^T Q; dQ = dS K
	dnn_t dp = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t dp1 = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t dp2 = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t dp3 = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t ds = dnn_tensor(g, F, d.tt, d.tt_s, 0, V);
	dnn_t dst = dnn_tensor(g, BF, d.tt, d.ttT_s, 0, V);
	dnn_matmul(g, dout, vt, dp);
	dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, dp, one, NULL, dp1, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_SUB, F, dp1, delta, NULL, dp2, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, dp2, p, NULL, dp3, -1);
	dnn_pointwise(g, CUDNN_POINTWISE_MUL, F, dp3, dnn_scalar(g, ID_SCALE),
		      NULL, ds, -1);
	dnn_reshape(g, ds, dst);
	dnn_matmul(g, dst, q, dk);
	dnn_t k = bf16_view(g, s, s->k, 0, 0);
	dnn_reshape(g, kt, k);
	if (accum) {
		int64_t ad[4] = {B, H, T, D}, as[4] = {H * T * D, T * D, D, 1};
		dnn_t acc = dnn_tensor(g, F, ad, as, ID_DQ_ACCUM, DNN_F16x16);
		dnn_matmul(g, ds, k, acc);
		dnn_pointwise(g, CUDNN_POINTWISE_IDENTITY, F, acc, NULL, NULL,
			      dq, -1);
	} else {
		dnn_matmul(g, ds, k, dq);
	}
}

// ---- the plans, one per shape and direction ----

#define MAX_PLANS 32

struct plan {
	at_sdpa_shape shape;
	int backward;
	int accum;                       // the backward's dq through our floats
	int ok;                          // 1 made, -1 refused
	dnn_graph g;
};

static plan plans[MAX_PLANS];
static int nplans, oldest;           // beyond MAX_PLANS, the oldest goes
static void *workspace;              // shared by every plan, grown as needed
static size_t workspace_bytes;

// The operations of the attention s, as the products count them: 4 B H
// T^2 D forward (half of it causal), 2.5 times that backward.
static double sdpa_flop(const at_sdpa_shape *s, int backward)
{
	double f = 4.0 * s->B * s->H * (double)s->T * s->T * s->D;
	return f * (s->causal ? 0.5 : 1.0) * (backward ? 2.5 : 1.0);
}

// The plan of s in that direction, made on first use; NULL with the
// reason (at_cuda_error) where cuDNN is missing or refuses the shape.
static plan *plan_for(const at_sdpa_shape *s, int backward)
{
	for (int i = 0; i < nplans; i++)
		if (plans[i].backward == backward &&
		    !memcmp(&plans[i].shape, s, sizeof *s)) {
			if (plans[i].ok > 0)
				return &plans[i];
			at_cu_failf("cuDNN: %s", plans[i].g.why);
			return NULL;
		}
	cudnnHandle_t h;
	if (at_cudnn_load(&h) < 0)
		return NULL;
	plan *p;
	if (nplans < MAX_PLANS) {
		p = &plans[nplans++];
	} else { // its last launch may still be queued
		cudaError_t e = cudaStreamSynchronize(at_cu_stream);
		if (e != cudaSuccess) {
			at_cu_fail(e, "waiting for the attention", __FILE__,
				   __LINE__);
			return NULL;
		}
		p = &plans[oldest];
		oldest = (oldest + 1) % MAX_PLANS;
		dnn_free(&p->g);
	}
	p->shape = *s;
	p->backward = backward;
	p->accum = backward && uses_accumulator(s);
	dnn_init(&p->g, h);
	if (backward)
		build_backward(&p->g, s, p->accum);
	else
		build_forward(&p->g, s);
	// more than one candidate only where they will be timed
	int most = at_cu_tune_when(sdpa_flop(s, backward)) == AT_TUNE_NEVER
			   ? 1
			   : DNN_MAX_PLANS;
	p->ok = dnn_plan(&p->g, most) == 0 ? 1 : -1;
	if (p->ok < 0) {
		at_cu_failf("cuDNN: %s", p->g.why);
		return NULL;
	}
	return p;
}

// At least bytes of workspace, grown as needed.
static int workspace_at_least(size_t bytes, void **ws)
{
	if (bytes > workspace_bytes) {
		if (workspace)
			cudaFree(workspace);
		workspace = NULL;
		workspace_bytes = 0;
		TRY(at_cu_alloc(&workspace, bytes, "cuDNN's attention workspace"));
		workspace_bytes = bytes;
	}
	*ws = workspace;
	return 0;
}

extern "C" int at_cudnn_sdpa_supported(const at_sdpa_shape *s, int backward)
{
	if (s->D % 8 || s->D > 128 || s->T < 1) {
		at_cu_failf("cuDNN's fused attention wants heads of a multiple "
			    "of 8 values, at most 128 (D = %d)", s->D);
		return 0;
	}
	return plan_for(s, backward) != NULL;
}

// One call of a plan: its variant pack (the scalars by address, held
// here), its workspace and, in a backward pass, the dq accumulator that
// each run zeroes first.
struct sdpa_call {
	plan *p;
	int n;
	int64_t uids[13];
	void *ptrs[13];
	void *ws, *acc;
	size_t accum;                    // bytes of acc, or 0
	float scale, neg_inf, one;
};

static void pack(sdpa_call *k, int64_t uid, const void *ptr)
{
	k->uids[k->n] = uid;
	k->ptrs[k->n++] = (void *)ptr;
}

static int run_call(void *c)
{
	sdpa_call *k = (sdpa_call *)c;
	if (k->accum)
		CU_CHECK(cudaMemsetAsync(k->acc, 0, k->accum, at_cu_stream),
			 "zeroing the dq accumulator");
	return dnn_execute(&k->p->g, k->n, k->uids, k->ptrs, k->ws);
}

// Runs k, the fastest of its plan's engines chosen first (once).
static int run_tuned(sdpa_call *k, const at_sdpa_shape *s, int backward)
{
	TRY(dnn_tune(&k->p->g, sdpa_flop(s, backward), run_call, k,
		     backward ? "the attention's backward"
			      : "the attention"));
	return run_call(k);
}

extern "C" int at_cudnn_sdpa_forward(const at_sdpa_shape *s, void *o,
				     float *lse, const void *q, const void *k,
				     const void *v)
{
	sdpa_call c = {};
	if (!(c.p = plan_for(s, 0)))
		return -1;
	TRY(workspace_at_least(c.p->g.workspace, &c.ws));
	c.scale = s->scale, c.neg_inf = -INFINITY;
	const void *in[] = {q, k, v, o, lse, &c.scale};
	int64_t ids[] = {ID_Q, ID_K, ID_V, ID_O, ID_STATS, ID_SCALE};
	for (int i = 0; i < 6; i++)
		pack(&c, ids[i], in[i]);
	if (s->causal)
		pack(&c, ID_NEG_INF, &c.neg_inf);
	return run_tuned(&c, s, 0);
}

extern "C" int at_cudnn_sdpa_backward(const at_sdpa_shape *s, void *dq,
				      void *dk, void *dv, const void *q,
				      const void *k, const void *v,
				      const void *o, const void *dout,
				      const float *lse)
{
	sdpa_call c = {};
	if (!(c.p = plan_for(s, 1)))
		return -1;
	size_t ws_bytes = (c.p->g.workspace + 255) / 256 * 256;
	c.accum = c.p->accum ? (size_t)s->B * s->H * s->T * s->D * sizeof(float)
			     : 0;
	TRY(workspace_at_least(ws_bytes + c.accum, &c.ws));
	c.acc = (char *)c.ws + ws_bytes;
	c.scale = s->scale, c.neg_inf = -INFINITY, c.one = 1.0f;
	const void *in[] = {q,  k,  v,  o,        dout,   lse,
			    dq, dk, dv, &c.scale, &c.one};
	int64_t ids[] = {ID_Q,  ID_K,  ID_V,  ID_O,     ID_DO, ID_STATS,
			 ID_DQ, ID_DK, ID_DV, ID_SCALE, ID_ONE};
	for (int i = 0; i < 11; i++)
		pack(&c, ids[i], in[i]);
	if (s->causal)
		pack(&c, ID_NEG_INF, &c.neg_inf);
	if (c.accum)
		pack(&c, ID_DQ_ACCUM, c.acc);
	return run_tuned(&c, s, 1);
}

#else // built without cuDNN's headers

extern "C" int at_cudnn_sdpa_supported(const at_sdpa_shape *s, int backward)
{
	return 0;
}

extern "C" int at_cudnn_sdpa_forward(const at_sdpa_shape *s, void *o,
				     float *lse, const void *q, const void *k,
				     const void *v)
{
	return at_cu_failf("built without cuDNN (CUDNN=0)");
}

extern "C" int at_cudnn_sdpa_backward(const at_sdpa_shape *s, void *dq,
				      void *dk, void *dv, const void *q,
				      const void *k, const void *v,
				      const void *o, const void *dout,
				      const float *lse)
{
	return at_cu_failf("built without cuDNN (CUDNN=0)");
}
#endif

extern "C" at_sdpa_shape at_sdpa_contiguous(int B, int H, int T, int D,
					    float scale, int causal)
{
	at_sdpa_shape s;
	memset(&s, 0, sizeof s); // the plans compare shapes bytewise
	s.B = B, s.H = H, s.T = T, s.D = D, s.causal = causal, s.scale = scale;
	long long st[3] = {(long long)H * T * D, (long long)T * D, D};
	long long *views[] = {s.q, s.k, s.v, s.o, s.dq, s.dk, s.dv, s.dout};
	for (long long *p : views)
		memcpy(p, st, sizeof st);
	return s;
}

extern "C" at_sdpa_shape at_sdpa_block(int B, int H, int T, int D,
				       int qkv_ld)
{
	at_sdpa_shape s = at_sdpa_contiguous(B, H, T, D,
					     (float)(1.0 / sqrt((double)D)), 1);
	long long C = (long long)H * D, rows[3] = {T * C, D, C};
	long long qkv[3] = {(long long)T * qkv_ld, D, qkv_ld};
	for (long long *p : {s.o, s.dout})
		memcpy(p, rows, sizeof rows);
	for (long long *p : {s.q, s.k, s.v, s.dq, s.dk, s.dv})
		memcpy(p, qkv, sizeof qkv);
	return s;
}
