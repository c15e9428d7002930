// plan.cu - the engine's choices made once, at its start (tr_cuda_new):
// whether the GELU rides in the MLP product, whether the gradients are
// bf16, and how many layers keep their GELU outputs for the backward pass.
#include <cstdlib>
#include <cstring>

#include "train/engine.cuh"

// ANDREA_TRAIN_FUSE_GELU=0 or 1 decides (to compare the two paths), else
// the precision does.  In bf16 the fused path pays (1.06x at andrea-120m,
// bench-train-gpu); in fp32 and tf32 cuBLASLt's epilogue kernels ran 1-2%
// slower than cuBLAS's plain product plus the GELU kernel.
int tr_plan_gelu_fused(int prec)
{
	const char *e = getenv("ANDREA_TRAIN_FUSE_GELU");
	if (e && (strcmp(e, "0") == 0 || strcmp(e, "1") == 0))
		return *e == '1';
	return prec == AT_PREC_BF16;
}

// In bf16 alone, unless ANDREA_TRAIN_BF16_GRADS=0 (to compare).  Ranks
// keep float, which NCCL sums as PyTorch's DDP does.
int tr_plan_grads16(int prec, const tr_cuda_ranks *r)
{
	const char *e = getenv("ANDREA_TRAIN_BF16_GRADS");
	return prec == AT_PREC_BF16 && !r && !(e && strcmp(e, "0") == 0);
}

// Recomputing a layer's GELU(fc) is a pass of its own where the product's
// epilogue does the GELU: there the top seven layers in twelve (rounded
// up) keep theirs, one of them in the memory of the pre-activations'
// gradient, which goes over them (backward.cu's dfc_at), and as many more
// as the memory saved elsewhere holds:
//  - the logits' that the head's parts save (head.cu);
//  - stack, the context's stacks given back (at_cu_release_stack: 264 MiB
//    on an H100);
//  - bf16 gradients' two bytes a parameter (less a float head gradient
//    where the head had none).
// At andrea-120m, B 16, T 1024, V 8449 in bf16, the head alone kept 9 of
// 12 layers (a pass saved is worth about 0.4%); at andrea-12m, V 257, 4
// of 6, where a fifth took the process 0.01 GiB past the compiled
// model's (bench/README.md).  Apart, the GELU's backward pass recomputes
// it on the way, and only the last layer keeps its.
// ANDREA_TRAIN_GELU_KEPT chooses the count (1 to L; the tests' way to
// the recomputing path).
int tr_plan_gelu_kept(const tr_cuda *d, const tr_model *m, size_t stack)
{
	int L = m->cfg.n_layer, C = m->cfg.d_model, BT = d->B * d->T;
	const char *e = getenv("ANDREA_TRAIN_GELU_KEPT");
	if (e && *e) {
		char *end;
		long v = strtol(e, &end, 10);
		if (*end || v < 1)
			return at_cu_failf("ANDREA_TRAIN_GELU_KEPT=%s: not a "
					   "count of layers", e);
		return v < L ? (int)v : L;
	}
	if (!d->gelu_mm)
		return 1;
	size_t es = d->prec == AT_PREC_BF16 ? 2 : 4;
	size_t saved = (size_t)(BT - d->head_rows) * d->Vp * es + stack;
	if (d->grads16) {
		size_t head = d->Vp == m->cfg.vocab ? (size_t)4 * C * d->Vp : 0;
		saved += 2 * d->total > head ? 2 * d->total - head : 0;
	}
	int keep = (7 * L + 11) / 12 + (int)(saved / ((size_t)BT * 4 * C * es));
	return keep < L ? keep : L;
}
