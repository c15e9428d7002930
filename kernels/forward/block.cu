// block.cu - the one pre-norm block forward on the GPU (forward_kernels.cuh)
// and the kernels it adds to the stage ops: the causal softmax (mask +
// scale + softmax in one kernel) and the GELU (the KV cache's kernels are
// kv_cache.cu's).
//
// The block mirrors lib/ops/prenorm.c op for op.  What differs: q, k and
// v come from one batched product with the three weights; the residual
// adds and GPT-2's biases ride in the products (beta = 1 onto the input
// plus the bias, or the bias alone), or, for the training engine in bf16,
// in the LayerNorm after them (at_cu_block_acts's y16); the attention
// scale moves from the scores into the softmax (except where a hook wants
// the scores themselves).
#include <cmath>

#include "forward/forward_kernels.cuh"
#include "model/arch.h"
#include "ops/attention_tc.cuh"

// ---- the causal softmax: one warp per row ----
//
// An online maximum and sum over the row's visible keys (the masked ones
// are never read), then one write of the whole row, zeros beyond.
__global__ static void softmax_fwd_kernel(float *s, bf16 *s16, size_t rows,
					  int Tq, int n, float scale)
{
	int lane = threadIdx.x % 32, wpb = blockDim.x / 32;
	for (size_t r = (size_t)blockIdx.x * wpb + threadIdx.x / 32; r < rows;
	     r += (size_t)gridDim.x * wpb) {
		float *x = s + r * n;
		int seen = (int)(r % Tq) + 1 + (n - Tq);
		float M, L;
		warp_softmax_stats(x, seen, scale, &M, &L);
		float inv = 1.0f / L;
		for (int j = lane; j < n; j += 32) {
			float p = j < seen ? expf(x[j] * scale - M) * inv : 0.0f;
			x[j] = p;
			if (s16)
				s16[r * n + j] = __float2bfloat16(p);
		}
	}
}

int at_cu_softmax_causal_fwd(float *s, bf16 *s16, size_t rows, int Tq, int n,
			     float scale)
{
	if (rows == 0)
		return 0;
	softmax_fwd_kernel<<<at_cu_blocks(rows, 8), 256, 0, at_cu_stream>>>(s, s16, rows, Tq, n,
							    scale);
	CU_LAUNCHED("causal softmax kernel");
	return 0;
}

// out = GELU(in): four at a time over the first n4 * 4, one at a time
// from there to n.
template <typename OUT>
__global__ static void gelu_fwd_kernel(OUT *out, const float *in, size_t n4,
				       size_t n)
{
	size_t stride = (size_t)gridDim.x * blockDim.x;
	size_t i0 = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	for (size_t i = i0; i < n4; i += stride) {
		float4 x = ((const float4 *)in)[i];
		store4_as(out + 4 * i, make_float4(gelu_tanh(x.x), gelu_tanh(x.y),
						   gelu_tanh(x.z), gelu_tanh(x.w)));
	}
	for (size_t i = n4 * 4 + i0; i < n; i += stride)
		store_as(out + i, gelu_tanh(in[i]));
}

template <typename OUT>
int at_cu_gelu_fwd(OUT *out, const float *in, size_t n)
{
	if (n == 0)
		return 0;
	size_t n4 = aligned4(out) && aligned4(in) ? n / 4 : 0;
	gelu_fwd_kernel<OUT><<<at_cu_blocks(n4 ? n4 : n, 256), 256, 0,
			       at_cu_stream>>>(out, in, n4, n);
	CU_LAUNCHED("GELU kernel");
	return 0;
}
template int at_cu_gelu_fwd<float>(float *, const float *, size_t);
template int at_cu_gelu_fwd<bf16>(bf16 *, const float *, size_t);

// ---- the biases ----

// y[g,r,c] = (x ? x[g,r,c] : 0) + b[g*n + c] for y [groups,rows,n]: what
// a product then adds onto (beta = 1), so that a bias costs no pass of
// its own.
__global__ static void bias_fill_kernel(float *y, const float *x,
					const float *b, size_t rows, int n,
					size_t total)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
	     i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t g = i / (rows * n);
		float v = b[g * n + i % n];
		y[i] = x ? x[i] + v : v;
	}
}

// Fills y as above, or, without b, copies x (or leaves y for a product
// with beta = 0); returns the beta that product then takes.
static int bias_fill(float *y, const float *x, const float *b, size_t rows,
		     int n, int groups, float *beta)
{
	size_t total = (size_t)groups * rows * n;
	*beta = b || x ? 1.0f : 0.0f;
	if (total == 0)
		return 0;
	if (!b) {
		if (x)
			CU_CHECK(cudaMemcpyAsync(y, x, total * sizeof *y,
						 cudaMemcpyDeviceToDevice,
						 at_cu_stream),
				 "the residual copy");
		return 0;
	}
	bias_fill_kernel<<<at_cu_blocks(total, 256), 256, 0, at_cu_stream>>>(
		y, x, b, rows, n, total);
	CU_LAUNCHED("bias kernel");
	return 0;
}

// ---- the block ----

// Calls fn<bf16> or fn<float> on the mm buffer ptr.
#define MM_CALL(prec, fn, ptr, ...)                                     \
	((prec) == AT_PREC_BF16 ? fn<bf16>((bf16 *)(ptr), __VA_ARGS__)  \
				: fn<float>((float *)(ptr), __VA_ARGS__))

static int wants(const at_cu_block_acts *a, const char *name)
{
	return a->hook ? a->hook->wants(a->hook->ctx, name, a->layer)
		       : AT_HOOK_SKIP;
}

static int report(const at_cu_block_acts *a, const char *name, void *data,
		  int bf, int rank, uint64_t d0, uint64_t d1, uint64_t d2,
		  uint64_t d3)
{
	if (wants(a, name) == AT_HOOK_SKIP)
		return 0;
	uint64_t dims[4] = {d0, d1, d2, d3};
	return a->hook->fn(a->hook->ctx, name, a->layer, data, bf, rank, dims);
}

// The attention of T new positions per row over n = start + T keys (the
// cache's, or q's own k and v without one): out [B,H,T,D] in buf3.
static int attend_prefill(const at_cu_gemm_mode *g, const at_cu_block_acts *a,
			  const at_cu_kv *kv, int B, int T, int H, int D,
			  float scale)
{
	int bf = g->prec == AT_PREC_BF16, BH = B * H;
	int cap = kv ? kv->cap : T, n = (kv ? kv->start : 0) + T;
	size_t TD = (size_t)T * D, cD = (size_t)cap * D, Tn = (size_t)T * n;
	// with a hook the scores are wanted as andrea-scores writes them:
	// scaled, then masked
	float pre = a->hook ? scale : 1.0f, post = a->hook ? 1.0f : scale;
	TRY(at_cu_gemm(g, 0, 1, T, n, D, pre, a->q, TD, a->k, cD, 0.0f, a->att,
		       Tn, BH, "the scores product"));
	if (a->hook && n == T) {
		TRY(at_cuda_mask_causal(a->att, BH, T, -INFINITY));
		TRY(report(a, "scores", a->att, 0, 4, B, H, T, n));
	}
	TRY(at_cu_softmax_causal_fwd(a->att, a->att16, (size_t)BH * T, T, n, post));
	TRY(report(a, "attn", a->att, 0, 4, B, H, T, n));
	if (bf && wants(a, "attn") == AT_HOOK_WRITE) // the product reads att16
		TRY(at_cu_to_bf16(a->att16, a->att, (size_t)BH * Tn));
	TRY(at_cu_gemm(g, 0, 0, T, D, n, 1.0f,
		       bf ? (void *)a->att16 : (void *)a->att, Tn, a->v, cD,
		       0.0f, a->buf3, TD, BH, "the attention product"));
	return report(a, "out", a->buf3, 0, 4, B, H, T, D);
}

int at_cu_fused_attention_takes(int prec, int B, int T, int H, int D,
				int qkv_ld, int backward)
{
	if (prec != AT_PREC_BF16)
		return at_cu_attention_fits((long long)B * H, D) == 0 &&
		       at_cu_attention_tc_takes(D, at_heads{H, H * D}, NULL, 0);
	at_sdpa_shape s = at_sdpa_block(B, H, T, D, qkv_ld);
	return at_cudnn_sdpa_supported(&s, 0) &&
	       (!backward || at_cudnn_sdpa_supported(&s, 1));
}

// The fused attention (no T x T weights: a->lse set, by training and by
// the forward engine's passes without a hook or a cache),
// from q, k, v's rows straight into merged's: cuDNN's in bf16, andrea's
// kernels in fp32 and tf32.
static int attend_fused(int prec, const at_cu_block_acts *a,
			const at_cu_kv *kv, int B, int T, int H, int D,
			float scale, int qkv_ld)
{
	if (a->hook || kv) // a hook would see no scores, attn or out
		return at_cu_failf("the fused attention takes no hook or cache");
	if (prec == AT_PREC_BF16) {
		at_sdpa_shape s = at_sdpa_block(B, H, T, D, qkv_ld);
		return at_cudnn_sdpa_forward(&s, a->merged, a->lse, a->q, a->k,
					     a->v);
	}
	at_heads rows = {H, H * D};
	return at_cuda_attention_forward((float *)a->merged, a->lse,
					 (const float *)a->q, (const float *)a->k,
					 (const float *)a->v, B * H, T, D, scale,
					 1, prec == AT_PREC_TF32, &rows);
}

// ---- with a hook: each head's share of y, and y and the MLP's output on
// their own where the hook may change them ----

// result[b,h,t,c] = sum over d of merged[b,t,h*D + d] wo[h*D + d, c]: from
// the heads' merged outputs, as the product of y reads them.
template <typename W>
__global__ static void head_result_kernel(float *result, const W *merged,
					  const W *wo, size_t n, int H, int T,
					  int D, int C)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t c = i % C, t = (i / C) % T, h = (i / ((size_t)C * T)) % H,
		       b = i / ((size_t)C * T * H);
		const W *z = merged + (b * T + t) * C + h * D;
		const W *wc = wo + h * D * (size_t)C + c;
		float sum = 0.0f;
		for (int d = 0; d < D; d++)
			sum += (float)z[d] * (float)wc[(size_t)d * C];
		result[i] = sum;
	}
}

template <typename W>
static int head_result(const W *wo, float *result, const void *merged_mm,
		       int B, int T, int H, int D)
{
	const W *merged = (const W *)merged_mm;
	size_t n = (size_t)B * H * T * H * D;
	head_result_kernel<W><<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(
		result, merged, wo, n, H, T, D, H * D);
	CU_LAUNCHED("the heads' results kernel");
	return 0;
}

// y[b,t,c] = bo[c] (0 without) + sum over h of result[b,h,t,c].
__global__ static void sum_heads_kernel(float *y, const float *result,
					const float *bo, size_t n, int H,
					int T, int C)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t c = i % C, t = (i / C) % T, b = i / ((size_t)C * T);
		float sum = bo ? bo[c] : 0.0f;
		for (int h = 0; h < H; h++)
			sum += result[((b * H + h) * T + t) * C + c];
		y[i] = sum;
	}
}

__global__ static void add_kernel(float *out, const float *x, const float *y,
				  size_t n)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		out[i] = x[i] + y[i];
}

static int add(float *out, const float *x, const float *y, size_t n)
{
	add_kernel<<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(out, x, y, n);
	CU_LAUNCHED("the residual add kernel");
	return 0;
}

// y[M,N] = x + b + A[M,K] . W, the residual in the product's beta: without
// a bias x is the product's addend (no copy of it into y first).
static int residual_product(const at_cu_gemm_mode *g, int M, int N, int K,
			    const void *A, const void *W, const float *x,
			    const float *b, float *y, const char *what)
{
	at_cu_gemm_layout add = {0, 0, 0, 0, b ? NULL : x};
	if (b) {
		float beta;
		TRY(bias_fill(y, x, b, M, N, 1, &beta));
	}
	return at_cu_gemm_ld(g, 0, 0, M, N, K, 1.0f, A, 0, W, 0, 1.0f, y, 0, 1,
			     &add, what);
}

// y16 = A[M,K] . W in bf16: a residual branch whose add the next
// LayerNorm makes (at_cu_block_acts's y16).
static int branch16(const at_cu_gemm_mode *g, int M, int N, int K,
		    const void *A, const void *W, bf16 *y16, const char *what)
{
	at_cu_gemm_layout to16 = {0, 0, 0, 1};
	return at_cu_gemm_ld(g, 0, 0, M, N, K, 1.0f, A, 0, W, 0, 0.0f, y16, 0,
			     1, &to16, what);
}

// xmid = x_in + bo + merged . Wo
static int xmid_fused(const at_cu_gemm_mode *g, const at_cu_block_w *w,
		      const at_cu_block_acts *a, const float *x_in, int BT,
		      int C)
{
	return residual_product(g, BT, C, C, a->merged, w->wo, x_in, w->bo,
				a->xmid, "the output projection");
}

// y = merged . Wo + bo into y, without the residual.
static int y_alone(const at_cu_gemm_mode *g, const at_cu_block_w *w,
		   const at_cu_block_acts *a, float *y, int BT, int C)
{
	float beta;
	TRY(bias_fill(y, NULL, w->bo, BT, C, 1, &beta));
	return at_cu_gemm(g, 0, 0, BT, C, C, 1.0f, a->merged, 0, w->wo, 0, beta,
			  y, 0, 1, "the output projection");
}

// xmid = x_in + y with result and y reported.  Where the hook may change
// them, y is computed on its own (the sum of the heads' shares where it
// may change those) and then added; where it only reads them, xmid is the
// plain block's (the residual in the product's beta), so that a hook that
// only looks changes no number, and they are computed beside it.
static int hooked_attention_out(const at_cu_gemm_mode *g,
				const at_cu_block_w *w,
				const at_cu_block_acts *a, const float *x_in,
				int B, int T, int C, int H)
{
	int p = g->prec, BT = B * T, D = C / H;
	size_t BTC = (size_t)BT * C;
	float *y = a->buf3 + BTC;
	int result = a->result ? wants(a, "result") : AT_HOOK_SKIP;
	if (result != AT_HOOK_SKIP) {
		TRY(MM_CALL(p, head_result, w->wo, a->result, a->merged, B, T, H, D));
		TRY(report(a, "result", a->result, 0, 4, B, H, T, C));
	}
	if (result == AT_HOOK_WRITE) {
		sum_heads_kernel<<<at_cu_blocks(BTC, 256), 256, 0, at_cu_stream>>>(
			y, a->result, w->bo, BTC, H, T, C);
		CU_LAUNCHED("the heads' sum kernel");
	} else if (wants(a, "y") != AT_HOOK_SKIP) {
		TRY(y_alone(g, w, a, y, BT, C));
	}
	TRY(report(a, "y", y, 0, 3, B, T, C, 0));
	if (result == AT_HOOK_WRITE || wants(a, "y") == AT_HOOK_WRITE)
		TRY(add(a->xmid, x_in, y, BTC));
	else
		TRY(xmid_fused(g, w, a, x_in, BT, C));
	return report(a, "xmid", a->xmid, 0, 3, B, T, C, 0);
}

// q, k, v (rows [B*T,C], one after the other from a->q; or side by side
// in rows [B*T,3C] with w->wqkv_cat; bf16 in bf16) straight from the
// product, as the fused attentions read them; bf16 with biases by way of
// buf3.
static int qkv_rows(const at_cu_gemm_mode *g, const at_cu_block_w *w,
		    const at_cu_block_acts *a, int BT, int C)
{
	size_t BTC = (size_t)BT * C, CC = (size_t)C * C;
	int bf = g->prec == AT_PREC_BF16, cat = w->wqkv_cat != NULL;
	size_t es = bf ? sizeof(bf16) : sizeof(float);
	size_t apart = cat ? (size_t)C : BTC; // k - q, v - k
	if ((char *)a->k != (char *)a->q + apart * es ||
	    (char *)a->v != (char *)a->k + apart * es)
		return at_cu_failf("the fused attention wants q, k and v %s",
				   cat ? "side by side" : "one after the other");
	if (cat && !bf) // andrea's fp32 kernels read each in rows of C
		return at_cu_failf("q, k and v side by side are bf16 only");
	// one product of N = 3C, or three of C (bq, bk, bv lie one after the
	// other either way: train.h)
	int n = cat ? 3 * C : C, batch = cat ? 1 : 3;
	const void *wt = cat ? w->wqkv_cat : w->wqkv;
	long long sw = cat ? 0 : (long long)CC, so = cat ? 0 : (long long)BTC;
	float beta;
	if (!w->bqkv || !bf) {
		TRY(bias_fill((float *)a->q, NULL, w->bqkv, BT, n, batch, &beta));
		at_cu_gemm_layout rows = {0, 0, 0, bf};
		return at_cu_gemm_ld(g, 0, 0, BT, n, C, 1.0f, a->ln1, 0, wt, sw,
				     beta, a->q, so, batch, &rows,
				     "the q, k, v products");
	}
	TRY(bias_fill(a->buf3, NULL, w->bqkv, BT, n, batch, &beta));
	TRY(at_cu_gemm(g, 0, 0, BT, n, C, 1.0f, a->ln1, 0, wt, sw, beta,
		       a->buf3, so, batch, "the q, k, v products"));
	return at_cu_to_bf16((bf16 *)a->q, a->buf3, 3 * BTC);
}

// From ln1 to the heads' merged outputs: q, k, v, the cache, the attention.
static int attention(const at_cu_gemm_mode *g, const at_cu_block_w *w,
		     const at_cu_block_acts *a, const at_cu_kv *kv, int B,
		     int T, int C, int H)
{
	int p = g->prec, bf = p == AT_PREC_BF16;
	int D = C / H, BT = B * T;
	size_t BTC = (size_t)BT * C, CC = (size_t)C * C;
	float scale = (float)(1.0 / sqrt((double)D));
	if (a->lse) { // fused: no T x T weights
		TRY(qkv_rows(g, w, a, BT, C));
		return attend_fused(p, a, kv, B, T, H, D, scale,
				    w->wqkv_cat ? 3 * C : C);
	}
	float beta;
	TRY(bias_fill(a->buf3, NULL, w->bqkv, BT, C, 3, &beta));
	TRY(at_cu_gemm(g, 0, 0, BT, C, C, 1.0f, a->ln1, 0, w->wqkv, CC, beta,
		       a->buf3, BTC, 3, "the q, k, v products"));
	if (kv && kv->pos) { // one decoding step: q stays [B,H*D]
		TRY(MM_CALL(p, at_cu_kv_store, a->k, a->buf3 + BTC, B, 1, H, D,
			    kv));
		TRY(MM_CALL(p, at_cu_kv_store, a->v, a->buf3 + 2 * BTC, B, 1, H,
			    D, kv));
		auto attend = bf ? at_cu_decode_attn<bf16>
				 : at_cu_decode_attn<float>;
		return attend(a->merged, a->buf3, a->k, a->v, a->att, kv->pos, B,
			      H, D, kv->cap, scale);
	}
	if (kv) {
		TRY(MM_CALL(p, at_cu_split_heads, a->q, a->buf3, 1, B, T, H, D));
		TRY(MM_CALL(p, at_cu_kv_store, a->k, a->buf3 + BTC, B, T, H, D,
			    kv));
		TRY(MM_CALL(p, at_cu_kv_store, a->v, a->buf3 + 2 * BTC, B, T, H,
			    D, kv));
	} else {
		static const char *names[3] = {"q", "k", "v"};
		void *qkv[3] = {a->q, a->k, a->v};
		for (int i = 0; i < 3; i++) // one call each: 3 * B passes int
			TRY(MM_CALL(p, at_cu_split_heads, qkv[i],
				    a->buf3 + i * BTC, 1, B, T, H, D));
		for (int i = 0; i < 3; i++)
			TRY(report(a, names[i], qkv[i], bf, 4, B, H, T, D));
	}
	TRY(attend_prefill(g, a, kv, B, T, H, D, scale));
	return MM_CALL(p, at_cu_merge_heads, a->merged, a->buf3, B, T, H, D);
}

int at_cu_block_fwd(const at_cu_gemm_mode *g, const at_cu_block_w *w,
		    const at_cu_block_acts *a, const at_cu_kv *kv,
		    const float *x_in, float *x_out, int B, int T, int C,
		    int H)
{
	int p = g->prec, bf = p == AT_PREC_BF16;
	int F = 4 * C, BT = B * T;
	size_t BTC = (size_t)BT * C;

	int fold = a->y16 != NULL;
	if (fold && (!bf || a->hook || kv || w->bo || w->bproj))
		return at_cu_failf("the residual adds fold into the LayerNorms "
				   "in bf16 only, without biases, hook or cache");
	if (fold && a->x_prev) // x_in is the caller's buffer, written here
		TRY(at_cu_layernorm_add_fwd((bf16 *)a->ln1, a->ln1_mean,
					    a->ln1_rstd, (float *)x_in, a->x_prev,
					    a->y16, w->ln1w, w->ln1b, BT, C,
					    AT_LN_EPS));
	else
		TRY(MM_CALL(p, at_cu_layernorm_fwd, a->ln1, a->ln1_mean,
			    a->ln1_rstd, x_in, w->ln1w, w->ln1b, BT, C,
			    AT_LN_EPS));
	TRY(report(a, "ln1", a->ln1, bf, 3, B, T, C, 0));
	TRY(attention(g, w, a, kv, B, T, C, H));
	float beta;
	if (fold) {
		TRY(branch16(g, BT, C, C, a->merged, w->wo, a->y16,
			     "the output projection"));
		TRY(at_cu_layernorm_add_fwd((bf16 *)a->ln2, a->ln2_mean,
					    a->ln2_rstd, a->xmid, x_in, a->y16,
					    w->ln2w, w->ln2b, BT, C, AT_LN_EPS));
	} else {
		if (a->hook)
			TRY(hooked_attention_out(g, w, a, x_in, B, T, C, H));
		else
			TRY(xmid_fused(g, w, a, x_in, BT, C));
		TRY(MM_CALL(p, at_cu_layernorm_fwd, a->ln2, a->ln2_mean,
			    a->ln2_rstd, a->xmid, w->ln2w, w->ln2b, BT, C,
			    AT_LN_EPS));
	}
	TRY(report(a, "ln2", a->ln2, bf, 3, B, T, C, 0));
	if (a->fused && !w->bfc && !a->hook) {
		TRY(a->fused->fn(a->fused->ctx, a->ln2, w->fc, a->gelu, a->fc));
	} else {
		TRY(bias_fill((float *)a->fc, NULL, w->bfc, BT, F, 1, &beta));
		TRY(at_cu_gemm(g, 0, 0, BT, F, C, 1.0f, a->ln2, 0, w->fc, 0, beta,
			       (float *)a->fc, 0, 1, "the MLP's first product"));
		TRY(report(a, "fc", a->fc, 0, 3, B, T, F, 0));
		TRY(MM_CALL(p, at_cu_gelu_fwd, a->gelu, (float *)a->fc,
			    (size_t)BT * F));
	}
	TRY(report(a, "gelu", a->gelu, bf, 3, B, T, F, 0));
	// mlp on its own where the hook looks at it (buf3 is free by now);
	// added from there only where it may change it
	int mlp = wants(a, "mlp");
	if (mlp != AT_HOOK_SKIP) {
		TRY(bias_fill(a->buf3, NULL, w->bproj, BT, C, 1, &beta));
		TRY(at_cu_gemm(g, 0, 0, BT, C, F, 1.0f, a->gelu, 0, w->proj, 0,
			       beta, a->buf3, 0, 1, "the MLP's second product"));
		TRY(report(a, "mlp", a->buf3, 0, 3, B, T, C, 0));
	}
	if (mlp == AT_HOOK_WRITE)
		return add(x_out, a->xmid, a->buf3, BTC);
	if (fold) // x_out = xmid + y16, formed by the caller's next LayerNorm
		return branch16(g, BT, C, F, a->gelu, w->proj, a->y16,
				"the MLP's second product");
	// x_out = xmid + bproj + gelu . proj
	return residual_product(g, BT, C, F, a->gelu, w->proj, a->xmid, w->bproj,
				x_out, "the MLP's second product");
}
