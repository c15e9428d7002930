/* block.h - one whole pre-norm transformer block of an ANDREA model, and
 * the final LayerNorm and head, on the CPU.
 *
 * A block maps the residual stream x [B,T,C] to
 *
 *	x += Attn(LN1(x));  x += GELU(LN2(x) . fc) . proj
 *
 * through prenorm.h, the forward the trainer runs too, built from the same
 * ops (ops.h) as the stage filters, so its numbers are the ones
 * andrea-qkv | andrea-scores | ... | andrea-attend --proj give.
 * andrea-block, andrea-logits and andrea-generate share it.
 */
#ifndef ANDREA_BLOCK_H
#define ANDREA_BLOCK_H

#include "model/model.h"
#include "core/tensor.h"

/* The parameters of one layer, all f32 and checked against C and H. */
typedef struct {
	int layer, C, H;
	at_tensor ln1_w, ln1_b, wq, wk, wv, wo, ln2_w, ln2_b, fc, proj;
} at_block;

/* The final LayerNorm and the unembedding: logits = LNf(x) . lm_head. */
typedef struct {
	int C, V;
	at_tensor lnf_w, lnf_b, lm_head;
} at_head;

/* Loads every parameter of layer `layer` (the model knows C and H).
 * Returns 0, or -1 with err naming the first parameter that is missing or
 * has the wrong shape; nothing stays allocated then. */
int at_block_load(at_block *b, const at_model *m, int layer, char *err,
		  size_t errlen);
void at_block_free(at_block *b);

/* Runs the block on x [B,T,C] in place.  Returns 0, or -1 when out of
 * memory (x is then undefined). */
int at_block_forward(const at_block *b, float *x, int B, int T);

/* Loads lnf.weight, lnf.bias [C] and lm_head [C,V]; as at_block_load. */
int at_head_load(at_head *h, const at_model *m, char *err, size_t errlen);
void at_head_free(at_head *h);

/* logits[N,V] = LNf(x[N,C]) . lm_head.  Returns 0, or -1 when out of
 * memory. */
int at_head_forward(const at_head *h, float *logits, const float *x, int N);

#endif
