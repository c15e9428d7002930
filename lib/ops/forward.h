/* forward.h - the forward engine: a whole model (embedding, blocks, final
 * LayerNorm and head) on the CPU or a CUDA GPU, with an optional KV cache
 * for decoding and a hook that sees every named activation.
 *
 * The one way the tools run a model: andrea-block (at_fwd_blocks),
 * andrea-logits (at_fwd_head), andrea-generate (at_fwd_prefill and
 * at_fwd_decode), andrea-train --forward and the CPU trainer's held-out
 * evaluation (at_fwd_logits).  On the CPU it runs the block of prenorm.h;
 * on the GPU the one GPU block forward, which the GPU trainer runs too
 * (kernels/forward/).  Weights go to the device once, at at_fwd_new; every
 * call takes and returns host memory.  Not thread-safe.
 *
 * Every call returns 0, or -1 with a one-line reason in err (a hook's
 * non-zero value is passed back as it is).
 */
#ifndef ANDREA_FORWARD_H
#define ANDREA_FORWARD_H

#include <stddef.h>
#include <stdint.h>

#include "core/attrs.h"
#include "core/tensor.h"
#include "ops/device.h"
#include "ops/precision.h"
#include "ops/prenorm.h"
#include "ops/stages.h"

/* A model's weights as host pointers (float32, andrea-model(5)'s
 * shapes).  A part the caller will not run may be NULL: wte and wpe
 * (then no embedding), a layer's ln1_w (then not that layer), lnf_w (then
 * no head).  lm_head NULL with lnf_w set: the head is tied to wte (which
 * is then given), as GPT-2's is. */
typedef struct {
	int C, H, L, V, ctx;
	const float *wte, *wpe;           /* [V,C], [ctx,C] */
	const at_block_w *layer;          /* L entries */
	const float *lnf_w, *lnf_b, *lm_head; /* [C], [C], [C,V] */
} at_weights;

typedef struct at_fwd at_fwd;

/* An engine for w (which must outlive it) on dev in precision (precision.h: AT_PREC_FP32 on the CPU), with a KV
 * cache of `rows` rows of w->ctx positions each (0: no cache). */
int at_fwd_new(at_fwd **e, const at_weights *w, at_device dev, int precision,
	       int rows, char *err, size_t errlen);
void at_fwd_free(at_fwd *e);

/* at_fwd_new on a thread of its own (forward_start.c): on the GPU the
 * engine's making (the CUDA context, cuBLAS, the weights' upload: about
 * half a second) then overlaps what the caller does meanwhile, such as
 * waiting for its first input.  at_fwd_take waits for it and gives
 * at_fwd_new's result; every begun start must be taken once.  Without a
 * thread the making happens in at_fwd_take. */
typedef struct at_fwd_start at_fwd_start;
at_fwd_start *at_fwd_begin(const at_weights *w, at_device dev, int precision,
			   int rows);
int at_fwd_take(at_fwd_start *s, at_fwd **e, char *err, size_t errlen);

/* Every activation of the calls that follow goes to hook (NULL: none):
 * the block's (prenorm.h), and x after the embedding (layer -1) and after
 * each block (its layer), logits (layer -1). */
void at_fwd_set_hook(at_fwd *e, const at_hook *hook);

/* x [B,T,C] through the given layers in the order given (repeats
 * allowed), in place. */
int at_fwd_blocks(at_fwd *e, float *x, int B, int T, const int *layers,
		  int n, char *err, size_t errlen);
/* at_fwd_blocks in two halves, so that the GPU computes one record while
 * the caller reads the next and writes the last: _begin copies x (the
 * caller may free it on return) and starts the work; _end waits for the
 * oldest record begun and returns its result, valid until the next
 * _begin.  Up to two records may be in flight.  On the CPU, or with a
 * hook, _begin does all the work. */
int at_fwd_blocks_begin(at_fwd *e, const float *x, int B, int T,
			const int *layers, int n, char *err, size_t errlen);
const float *at_fwd_blocks_end(at_fwd *e, char *err, size_t errlen);

/* logits [N,V] = LNf(x [N,C]) . lm_head, handed to sink in order and in
 * pieces of whole rows, so that [N,V] is never held in host memory: on
 * the CPU some 4 MiB of rows computed at a time, on the GPU all of them
 * computed at once and copied back through pinned memory a piece at a
 * time, the next piece copying while sink takes the last.  A sink's -1
 * is returned (its reason is its own); the hook sees nothing. */
int at_fwd_head(at_fwd *e, const float *x, int N, at_sink *sink, void *ctx,
		char *err, size_t errlen);

/* logits [B,T,V] of the whole model over tokens [B,T] (T <= ctx, ids
 * < V: checked by the caller); no cache. */
int at_fwd_logits(at_fwd *e, float *logits, const int32_t *tokens, int B,
		  int T, char *err, size_t errlen);

/* Empties row `row` of the cache and encodes tokens [T] (0 <= T <= ctx)
 * into it at positions 0..T-1 in one pass; logits [V] (NULL: not wanted)
 * are the last position's. */
int at_fwd_prefill(at_fwd *e, int row, const int32_t *tokens, int T,
		   float *logits, char *err, size_t errlen);

/* One position for each of the first B rows: tokens [B] at each row's
 * next position (a row must hold fewer than ctx); logits [B,V]. */
int at_fwd_decode(at_fwd *e, const int32_t *tokens, int B, float *logits,
		  char *err, size_t errlen);

/* The positions row `row` of the cache holds. */
int at_fwd_cached(const at_fwd *e, int row);

/* The size of some forward work of a model of width C and vocabulary V,
 * for choosing a device (device.h): `positions` positions through
 * `layers` blocks, each attending to `keys` keys on average, and the head
 * over `head` positions; *bytes gets what the GPU path copies (the
 * weights used, x in and out).  Returns the multiply-adds. */
double at_fwd_work(int C, int V, double positions, int layers, double keys,
		   double head, double *bytes);

/* The record header (t zeroed, then f32, name, rank and dims; no data)
 * the stages give activation `name` of `layer` (-1: none) of a model of
 * H heads of width D.  Its attributes: the layer; for q, k, v and what
 * follows them in the attention (scores, attn, out, y) the norm and head
 * count too, and for scores and after the scale, mask and fill. */
void at_fwd_activation_header(at_tensor *t, const char *name, int layer,
			      int H, int D, int rank, const uint64_t *dims);

/* The device the engine computes on. */
at_device at_fwd_device(const at_fwd *e);
/* Where and how the engine computes: "NVIDIA H200 (bf16)", "CPU (fp32)". */
void at_fwd_describe(const at_fwd *e, char *buf, size_t len);

#endif
