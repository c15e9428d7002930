// head.cu - the GPU training engine's head and loss, a part of the rows
// at a time (engine.cuh's head_rows): a part's logits, its losses and
// their gradient written over them, and, in a training step, at once the
// part's share of the head's gradient and its rows of d_ln, so that only
// one part's logits are ever held.  At andrea-120m, B 16, T 1024, V 8449
// in bf16 that is 4 parts of 69 MiB rather than 277 MiB for the batch,
// and the memory saved keeps more of the MLP's activations (engine.cu's
// gelu_kept).
#include <cstdlib>

#include "train/engine.cuh"

// A part's logits at most (the fewest equal parts that fit it); its rows
// a multiple of HEAD_ROW_STEP, so that every part's rows start 256 bytes
// aligned, as cuBLASLt's planned algorithms assume.
#define HEAD_BYTES ((size_t)80 << 20)
#define HEAD_ROW_STEP 128

int tr_head_rows(int BT, int Vp, int prec)
{
	size_t es = prec == AT_PREC_BF16 ? 2 : 4, parts, rows;
	const char *e = getenv("ANDREA_TRAIN_HEAD_ROWS");
	if (e && *e) { // a chosen part size; 0: the batch in one part
		char *end;
		unsigned long v = strtoul(e, &end, 10);
		if (*end || e[0] == '-')
			return at_cu_failf("ANDREA_TRAIN_HEAD_ROWS=%s: not a "
					   "count of rows", e);
		rows = v == 0 || v >= (unsigned long)BT ? (size_t)BT : v;
	} else {
		parts = ((size_t)BT * Vp * es + HEAD_BYTES - 1) / HEAD_BYTES;
		rows = ((size_t)BT + parts - 1) / (parts ? parts : 1);
	}
	rows = (rows + HEAD_ROW_STEP - 1) / HEAD_ROW_STEP * HEAD_ROW_STEP;
	return rows < (size_t)BT ? (int)rows : BT;
}

extern "C" int tr_cuda_head_parts(const tr_cuda *d)
{
	int BT = d->B * d->T;
	return (BT + d->head_rows - 1) / d->head_rows;
}

// The head's gradient as the products write it, in float: its padded copy
// head_g (always there where the gradients are bf16), or the parameter's
// (wte's when tied, where the embedding's adds on: backward.cu).
static float *head_grad(const tr_cuda *d)
{
	return d->head_g ? d->head_g : d->g + (d->tied ? d->wte : d->lm_head);
}

// The backward pass of rows [r0, r0 + n) of the head, from the gradient
// over their logits: their share of the head's gradient (the first part
// writes it, the others add), and their rows of d_ln.
static int head_backward(tr_cuda *d, int r0, int n)
{
	const at_cu_gemm_mode *bl = &d->blas;
	int C = d->cfg.d_model, Vp = d->Vp;
	const void *dl = d->logits, *lnf = mm_at(d, d->lnf, (size_t)r0 * C);
	void *dln = (char *)d->d_ln +
		    (size_t)r0 * C * (ln_grad_bf16(d) ? 2 : 4);
	float beta = r0 ? 1.0f : 0.0f;
	at_cu_gemm_layout to_ln = {Vp, 0, 0, ln_grad_bf16(d)};
	if (d->tied) { // logits = lnf . wte^T
		at_cu_gemm_layout ldl = {Vp, 0, 0, 0};
		TRY(at_cu_gemm_ld(bl, 1, 0, Vp, C, n, 1.0f, dl, 0, lnf, 0,
				  beta, head_grad(d), 0, 1, &ldl,
				  "the head product, backward"));
		return at_cu_gemm_ld(bl, 0, 0, n, C, Vp, 1.0f, dl, 0,
				     head_weight(d), 0, 0.0f, dln, 0, 1,
				     &to_ln, "the head product, backward");
	}
	at_cu_gemm_layout ldb = {0, Vp, 0, 0};
	TRY(at_cu_gemm_ld(bl, 1, 0, C, Vp, n, 1.0f, lnf, 0, dl, 0, beta,
			  head_grad(d), 0, 1, &ldb,
			  "the head product, backward"));
	return at_cu_gemm_ld(bl, 0, 1, n, C, Vp, 1.0f, dl, 0, head_weight(d),
			     0, 0.0f, dln, 0, 1, &to_ln,
			     "the head product, backward");
}

// An untied head's padded gradient head_g [C,Vp] into the parameters'
// gradient [C,V] (a tied head's goes with the embedding's: backward.cu).
static int pack_head_grad(tr_cuda *d)
{
	int V = d->cfg.vocab, C = d->cfg.d_model;
	return GRAD_CALL(d, tr_copy_rows, d->lm_head, V, d->head_g, d->Vp, C,
			 V);
}

int tr_head_loss(tr_cuda *d, int backward_too)
{
	int BT = d->B * d->T, C = d->cfg.d_model, V = d->cfg.vocab;
	float inv = 1.0f / (float)((size_t)BT * d->world); // the global mean
	at_cu_gemm_layout in_mm = {0, 0, 0, d->prec == AT_PREC_BF16};
	for (int r0 = 0; r0 < BT; r0 += d->head_rows) {
		int n = BT - r0 < d->head_rows ? BT - r0 : d->head_rows;
		// Vp logits a row, the pads zero (head_weight), in the mm type
		TRY(at_cu_gemm_ld(&d->blas, 0, d->tied, n, d->Vp, C, 1.0f,
				  mm_at(d, d->lnf, (size_t)r0 * C), 0,
				  head_weight(d), 0, 0.0f, d->logits, 0, 1,
				  &in_mm, "the head product"));
		TRY(MM_CALL(d, tr_crossentropy, d->logits, d->Vp,
			    d->losses + r0, d->tg + r0, n, V, d->Vp, inv,
			    backward_too));
		if (backward_too)
			TRY(head_backward(d, r0, n));
	}
	TRY(tr_mean(d->res + RES_LOSS, d->losses, BT));
	return backward_too && d->head_g && !d->tied ? pack_head_grad(d) : 0;
}
