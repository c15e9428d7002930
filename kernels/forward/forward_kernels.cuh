// forward_kernels.cuh - the whole model's forward on the GPU: the one GPU
// block forward, which the forward engine (engine.cu: andrea-block,
// -logits, -generate, train --forward) and the training engine
// (kernels/train/) both run, and the kernels it needs beyond the stage
// ops.
//
// Row-major, shape letters as in docs/ARCHITECTURE.md.  "mm" buffers are
// operands of matrix products only: float in fp32/tf32, bf16 in bf16
// (template OUT where a kernel writes one).  Every function launches on
// the default stream and returns 0, or -1 with the reason in
// at_cuda_error() (a hook's non-zero value is passed back).
#ifndef ANDREA_FORWARD_KERNELS_CUH
#define ANDREA_FORWARD_KERNELS_CUH

#include <cuda_bf16.h>

#include "common/cuda_util.cuh"
#include "common/gemm.cuh"

extern "C" {
#include "ops/prenorm.h" // AT_HOOK_SKIP, _READ, _WRITE
}

typedef __nv_bfloat16 bf16;

#define GELU_K 0.7978845608028654f // sqrt(2/pi)

// GELU in the tanh form and its derivative (the CPU's lib/ops formulas).
__device__ __forceinline__ float gelu_tanh(float x)
{
	return 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float gelu_tanh_grad(float x)
{
	float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
	float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
	return 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
}

// ---- bf16.cu: conversions ----

// dst[n] = bf16(src[n]).
int at_cu_to_bf16(bf16 *dst, const float *src, size_t n);
// dst[n] = float(src[n]).
int at_cu_from_bf16(float *dst, const bf16 *src, size_t n);

// ---- block.cu: the causal softmax, GELU, the KV cache, one block ----

// In place on s [rows, n]: row r is query i = r % Tq, which sees keys
// j <= i + n - Tq (the n - Tq before the queries are cached ones): s =
// softmax of scale * s over those, 0 beyond; s16 (if not NULL) gets a
// bf16 copy.  Tq = n is the square causal softmax of training.
int at_cu_softmax_causal_fwd(float *s, bf16 *s16, size_t rows, int Tq, int n,
			     float scale);
// out[n] = GELU(in[n]), the tanh form.
template <typename OUT>
int at_cu_gelu_fwd(OUT *out, const float *in, size_t n);

// A named activation on the device: data is float, or bf16 where bf is
// 1.  Called as soon as it is computed, before the pass uses it, for the
// names wants does not answer AT_HOOK_SKIP (prenorm.h); one it answers
// AT_HOOK_WRITE may be changed in place.  A non-zero return stops the
// pass.
struct at_cu_hook {
	int (*fn)(void *ctx, const char *name, int layer, void *data, int bf,
		  int rank, const uint64_t *dims);
	int (*wants)(void *ctx, const char *name, int layer);
	void *ctx;
};

// One block's weights on the device: LayerNorms float [C]; products mm,
// wqkv Wq, Wk, Wv [C,C] one after the other; the products' biases float
// (GPT-2's; NULL where the model has none), bqkv bq, bk, bv [C] one after
// the other, bfc [F], bo and bproj [C].
struct at_cu_block_w {
	const float *ln1w, *ln1b, *ln2w, *ln2b;
	const void *wqkv, *wo, *fc, *proj;
	const float *bqkv, *bo, *bfc, *bproj;
	// Wq, Wk, Wv side by side, [C,3C] (the trainer's layout, bf16 with
	// the attention fused): one product then writes q, k, v side by side in
	// rows [B*T,3C] (a->k = a->q + C, a->v = a->q + 2C), and the
	// backward's input gradient is one product over K = 3C.  NULL: none.
	const void *wqkv_cat;
};

// The MLP's first product with the GELU fused (the trainer's cuBLASLt
// epilogue): gelu = GELU(pre), pre = ln2 . wfc; NULL for a product and a
// GELU kernel apart (and for a block with bfc, which it does not add).
struct at_cu_fc_fused {
	int (*fn)(void *ctx, const void *ln2, const void *wfc, void *gelu,
		  void *pre);
	void *ctx;
};

// Where one block's forward writes.  The LayerNorm statistics may be
// NULL; att16 is needed in bf16 only; fc is mm with a fused GELU, float
// otherwise.  Without a cache q, k, v are [3,B,H,T,D] one after the
// other (rows [3,B*T,C] where the attention is fused, as the fused
// kernels read them; side by side in rows [B*T,3C] with w->wqkv_cat);
// with one, q is [B,H,T,D] and k, v are the layer's cache.
struct at_cu_block_acts {
	void *ln1, *ln2;                 // [B*T,C] mm
	float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; // [B*T]
	void *q, *k, *v;
	float *att;                      // [B,H,T,n] weights (n keys)
	bf16 *att16;
	float *lse;                      // [B,H,T]: the attention is fused
					 // (no att; not with a hook or cache)
	void *merged;                    // [B*T,C] mm, heads . before Wo
	float *xmid;                     // [B*T,C] x_in + attention
	void *fc, *gelu;                 // [B*T,F]
	float *buf3;                     // 3 x [B*T,C] scratch (NULL: fused
					 // in bf16 without biases)
	float *result;                   // [B,H,T,C] the heads' shares of y,
					 // where the hook wants them
	const at_cu_fc_fused *fused;     // NULL: none
	const at_cu_hook *hook;          // NULL: nothing reported
	int layer;
	// The residual adds folded into the LayerNorms after them (bf16, no
	// biases, no hook; the training engine): with y16 [B*T,C] the two
	// residual branches are products into y16 alone, LN2 forms xmid =
	// x_in + y16, and x_out is not written: it is xmid + y16, for the
	// caller's next LayerNorm to form.  With x_prev as well, LN1 first
	// forms x_in = x_prev + y16 (the block before's pending x_out) and
	// writes it to x_in.
	bf16 *y16;
	const float *x_prev;
};

// A KV cache [B,H,cap,D] (mm) for one block run: the T new positions of
// row b go at start + t, or, decoding (T = 1), at pos[b] (device memory,
// so that one launch sequence serves every step).
struct at_cu_kv {
	int cap, start;
	const int *pos;
};

// kv_cache.cu: cache[b,h,p,d] = in[b,t,h*D+d] for T new positions of B
// rows (p as at_cu_kv says), and one decoding step's attention: q
// [B,H*D] (float) over row b's pos[b] + 1 cached keys, the softmax in s
// (scratch [B*H,cap]), out [B,H*D] in the cache's type KV.
template <typename OUT>
int at_cu_kv_store(OUT *cache, const float *in, int B, int T, int H, int D,
		   const at_cu_kv *kv);
template <typename KV>
int at_cu_decode_attn(void *out, const float *q, const void *k,
		      const void *v, float *s, const int *pos, int B, int H,
		      int D, int cap, float scale);

// Whether the block's fused attention (a->lse set) takes B rows of T
// positions in H heads of D, q, k and v rows qkv_ld elements apart, in
// precision prec (and its backward too, where backward): cuDNN's where it
// plans the shape in bf16, andrea's tensor-core kernels where they take
// the heads in fp32 and tf32 (at most 65535 of them: at_cu_attention_fits).
int at_cu_fused_attention_takes(int prec, int B, int T, int H, int D,
				int qkv_ld, int backward);

// x_out = x_mid + GELU(LN2(x_mid) . fc) . proj, x_mid = x_in +
// Attn(LN1(x_in)), for x_in, x_out [B,T,C] (the same buffer or apart),
// in g's precision; kv NULL: no cache.  (With a->y16, see above.)
int at_cu_block_fwd(const at_cu_gemm_mode *g, const at_cu_block_w *w,
		    const at_cu_block_acts *a, const at_cu_kv *kv,
		    const float *x_in, float *x_out, int B, int T, int C,
		    int H);

#endif
