/* prenorm.h - the forward of one pre-norm transformer block and of the
 * model's final LayerNorm and head, on weights given as plain pointers.
 *
 * The one CPU implementation: the forward engine (forward.h: andrea-block,
 * andrea-logits, andrea-generate, andrea-train --forward) runs it with
 * scratch buffers and, for decoding, a KV cache; the trainer
 * (train/forward.c) runs it keeping the activations its backward pass
 * needs.  Built from the ops of ops.h, so its numbers are those of the
 * stage filters.  Row-major float32; shape letters B T C H D V L F.
 */
#ifndef ANDREA_PRENORM_H
#define ANDREA_PRENORM_H

#include <stdint.h>

/* The weights of one block: ln1_w, ln1_b, ln2_w, ln2_b [C]; wq, wk, wv,
 * wo [C,C]; fc [C,F]; proj [F,C]; and the products' optional biases (GPT-2
 * has them, ANDREA models do not; NULL: none): bq, bk, bv, bo, bproj [C],
 * bfc [F]. */
typedef struct {
	const float *ln1_w, *ln1_b, *wq, *wk, *wv, *wo, *ln2_w, *ln2_b, *fc,
		*proj;
	const float *bq, *bk, *bv, *bo, *bfc, *bproj;
} at_block_w;

/* What a hook does with one activation (its wants): skips it (fn is not
 * called, and an activation only a hook needs is not computed), reads it,
 * or may write it. */
enum { AT_HOOK_SKIP = 0, AT_HOOK_READ = 1, AT_HOOK_WRITE = 2 };

/* Called with each named activation as soon as it is computed: name
 * (ln1, q, k, v, scores, attn, out, result, y, xmid, ln2, fc, gelu, mlp;
 * the engine adds x, lnf and logits), the layer (-1 for none: the
 * embedding is x of layer -1), host data of the given shape.  The data is
 * the activation before the model uses it: a hook that changes it
 * (ablation, patching) changes the rest of the pass.  On the GPU it is a
 * copy, which goes back to the device where wants says AT_HOOK_WRITE.
 * result, the heads' shares of y ([B,H,T,C]: head h's out . its rows of
 * Wo; y is their sum plus bo), is computed only for a hook whose wants
 * asks for it.  wants NULL: every activation but result is read (and, on
 * the CPU, may be written).  A non-zero return of fn stops the forward
 * pass and is passed back. */
typedef struct {
	int (*fn)(void *ctx, const char *name, int layer, float *data,
		  int rank, const uint64_t *dims);
	int (*wants)(void *ctx, const char *name, int layer);
	void *ctx;
} at_hook;

/* hook's wants for name at layer (AT_HOOK_SKIP where hook is NULL). */
int at_hook_wants(const at_hook *hook, const char *name, int layer);

/* One layer's KV cache: k, v [B,H,cap,D]; row b holds len[b] positions,
 * and a block run over T new positions puts their keys and values at
 * len[b] .. len[b] + T - 1 (the caller then advances len). */
typedef struct {
	float *k, *v;
	int cap;
	const int *len;
} at_kv;

/* Where one block's forward writes its activations, all row-major over
 * the batch: kept by the trainer, scratch for everyone else.  Every
 * pointer is needed except these may be NULL: the four LayerNorm
 * statistics (then not computed) and xmid (then built in x_out).  Buffers
 * may be shared where one is dead before the next is written: ln1, y and
 * ln2; q and out; scores and att; fc and gelu, also with any of q, k, v,
 * out, scores and att.  With a KV cache, scores and att hold [B,H,T,cap]. */
typedef struct {
	float *ln1, *ln2;           /* [B*T,C] LN1(x_in), LN2(x_mid) */
	float *ln1_mean, *ln1_rstd; /* [B*T] their row statistics, or NULL */
	float *ln2_mean, *ln2_rstd;
	float *q, *k, *v, *out;     /* [B,H,T,D]; out: the heads' A.V */
	float *scores;              /* [B,H,T,T] Q.K^T / sqrt D, masked */
	float *att;                 /* [B,H,T,T] its row softmax */
	float *y;                   /* [B*T,C] merged heads . Wo */
	float *result;              /* [B,H,T,C] the heads' shares of y, or
				     * NULL (then not computed) */
	float *xmid;                /* [B*T,C] x_in + y, or NULL */
	float *fc, *gelu;           /* [B*T,F] before and after GELU */
	float *tmp;                 /* [B*T,C] scratch */
	const at_hook *hook;        /* NULL: no activation is reported */
	int layer;                  /* the layer, for the hook */
} at_block_acts;

/* x_out = x_mid + GELU(LN2(x_mid) . fc) . proj with x_mid = x_in +
 * Attn(LN1(x_in)), for x_in, x_out [B,T,C] (the same buffer or apart),
 * C = H*D, writing every activation to a.  With kv (NULL: none), the T
 * positions of row b follow the kv->len[b] already cached and attend to
 * them too.  Returns 0, or the hook's non-zero value. */
int at_block_run(const at_block_w *w, const at_block_acts *a,
		 const at_kv *kv, const float *x_in, float *x_out, int B, int T,
		 int C, int H);

/* logits[N,V] = LNf(x[N,C]) . lm_head [C,V], with LNf(x) written to ln
 * [N,C] and, where mean and rstd are not NULL, its row statistics [N].
 * lm_head NULL: the head is tied to the token table, logits = LNf(x) .
 * wte^T with wte [V,C]. */
void at_head_run(const float *lnf_w, const float *lnf_b, const float *lm_head,
		 const float *wte, float *ln, float *mean, float *rstd,
		 float *logits, const float *x, int N, int C, int V);
/* Its two halves: ln = LNf(x), and logits = ln . lm_head (or . wte^T). */
void at_head_norm(const float *lnf_w, const float *lnf_b, float *ln,
		  const float *x, int N, int C);
void at_head_product(const float *lm_head, const float *wte, float *logits,
		     const float *ln, int N, int C, int V);

#endif
