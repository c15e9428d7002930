// engine.cuh - the GPU training engine's state, shared by engine.cu (the
// buffers, the forward pass, the update), head.cu (the head and the loss)
// and backward.cu (the backward pass), and the helpers they use to
// address it.
#ifndef ANDREA_TRAIN_ENGINE_CUH
#define ANDREA_TRAIN_ENGINE_CUH

#include "common/comm.cuh"
#include "train/train_kernels.cuh"

#define MAX_BUFS 64
#define SLOTS 3 // two for training batches, one for evaluation

// The doubles of res: the step's mean loss and its stop flag (summed over
// the ranks together), the gradient's squared norm.
enum { RES_LOSS, RES_STOP, RES_NORMSQ, RES_N };

struct tr_cuda {
	at_config cfg;
	int B, T, prec;
	int Vp;                          // the logits' row stride: V rounded up to 8
	size_t total;
	tr_layer_off *layer; // host copy of the layout
	size_t wte, wpe, lnfw, lnfb, lm_head;
	int biases, tied;                // the model's form (train.h)
	at_cu_gemm_mode blas;
	tr_gelu_mm *gelu_mm;             // NULL: the GELU is a kernel apart
	void *bufs[MAX_BUFS]; // every device allocation, for freeing
	int nbufs;
	size_t bytes, peak_used;

	// parameters, gradients, moments; bf16 copies of the parameters
	float *p, *g, *m1, *m2;          // g NULL where grads16
	bf16 *p16;
	bf16 *g16;                       // the gradients where grads16
	// Whether the gradients are bf16 (g16) rather than float (g): in
	// bf16 mode on one process, unless ANDREA_TRAIN_BF16_GRADS=0
	// (plan.cu).  The products write the weights' gradients rounded to
	// bf16, as autocast's do, and the update and the norm read them so;
	// the sums of parts (the head's gradient by parts, a tied head's
	// with the embedding's) are made in float first.
	int grads16;
	tr_piece *pieces;                // the update's, over [lo, hi)
	int npieces;
	// data parallel (ranks.cu): alone, comm is NULL, world 1, the whole
	// update this process's; sharded, p and g hold `padded` elements,
	// m1 and m2 the shard [base, base + shard_len), of which the update
	// is [lo, hi) (the rest pads)
	at_comm *comm;
	int rank, world, shard;
	double timeout_s;
	size_t base, shard_len, padded, lo, hi;
	cudaStream_t side;               // the gradients' sums
	cudaEvent_t ready, summed;       // backward -> side, side -> backward
	tr_bucket *buckets;              // in the order the backward ends them
	int nbuckets, next_bucket;
	// the batch on the device
	int32_t *in, *tg;
	int *off, *pos;
	// activations (mm: float, or bf16 in bf16 mode)
	float *resid, *xmid;             // (L+1) x [BT,C], L x [BT,C]
	bf16 *y16;                       // [BT,C]: a residual branch, whose
					 // add the next LayerNorm makes
					 // (residual_folded), or NULL
	void *ln1, *ln2;                 // L x [BT,C] mm
	float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; // L x [BT]
	void *qkv;                       // L x 3 x [B,H,T,D] mm; fused, rows
					 // (side by side with cuDNN: qkv_apart)
	float *att;                      // L x [B,H,T,T] (explicit attention)
	bf16 *att16;                     // L x [B,H,T,T], bf16 mode
	int fused_attn;                  // else explicit (tr_cuda_new)
	float *lse;                      // L x [B,H,T] (fused attention)
	float *delta;                    // [B,H,T] fused fp32 backward scratch
	void *merged;                    // L x [BT,C] mm
	void *fc;                        // L x [BT,F], mm when gelu_mm, else float
	void *gelu;                      // gelu_kept x [BT,F] mm (gelu_at);
					 // GELU fused, dfc goes over them
	int gelu_kept;                   // the top layers whose GELU(fc)
					 // the backward pass reads as kept
	void *lnf;                       // [BT,C] mm
	float *lnf_mean, *lnf_rstd;      // [BT]
	int head_rows;                   // the head's and the loss's part
					 // (head.cu's tr_head_rows)
	void *logits;                    // [head_rows,Vp] mm: one part's;
					 // the loss writes their gradient
					 // over them
	void *head_w;                    // mm: the padded head, or NULL
	float *side3;                    // [C,3C]: scratch of the changes
					 // of layout (qkv_side_by_side)
	float *head_g;                   // its gradient, padded
	float *losses;                   // [BT]
	// backward scratch
	float *buf3;                     // 3 x [BT,C] (explicit; bf16 biases)
	float *d_resid, *d_merged;       // [BT,C] (d_merged: explicit)
	void *d_ln;                      // [BT,C]: a LayerNorm output's
					 // gradient, bf16 where ln_grad_bf16
	bf16 *dr16;                      // [BT,C], bf16 mode
	void *d_out;                     // [B,H,T,D] mm, rows if fused
	void *d_qkv;                     // 3 x [BT,C] mm (as qkv)
	float *d_fc;                     // [BT,F] (the GELU a kernel apart)
	bf16 *d_fc16;                    // [BT,F], bf16 mode (the same)
	float *d_att;                    // [B,H,T,T] (explicit attention)
	bf16 *ds16;                      // [B,H,T,T], bf16 mode
	float *ln_part;                  // 2 x LN_PARTS x C
	void *ones;                      // [BT] mm, for the biases' gradients
	double *res;                     // RES_N: loss, stop, squared norm
	double *norm_part;               // NORM_BLOCKS
	// pinned host memory
	int32_t *h_in[SLOTS], *h_tg[SLOTS];
	int *h_off[SLOTS], *h_pos[SLOTS], *h_cursor;
	double *h_res;
	// the training step's launches as a CUDA graph (common/graph.cuh),
	// recorded at the second step, once the first has made every plan
	// and workspace
	int graphs;                      // 0: every step eager (or ranks)
	long eager_steps;
	cudaStream_t stream;             // where it is recorded (replayed on
					 // the default stream)
	cudaGraphExec_t step_graph;
	cudaEvent_t results_ev;          // after the copy of res to h_res
	int results_queued;              // tr_cuda_results called, not yet
					 // waited for
	void *blas_ws;                   // cuBLAS's workspace: recording
					 // allocates none
};

// The element at offset i of an mm buffer.
static inline void *mm_at(const tr_cuda *d, void *base, size_t i)
{
	return (char *)base + i * (d->prec == AT_PREC_BF16 ? 2 : 4);
}

// The gradient of the parameter at off, as the gradients are stored.
static inline void *grad_at(const tr_cuda *d, size_t off)
{
	return d->grads16 ? (void *)(d->g16 + off) : (void *)(d->g + off);
}

// The bytes of one gradient as they are stored.
static inline size_t grad_size(const tr_cuda *d)
{
	return d->grads16 ? sizeof(bf16) : sizeof(float);
}

// fn<bf16> or fn<float> on the gradients from element off on, as they are
// stored, then the other arguments.
#define GRAD_CALL(d, fn, off, ...)                                      \
	((d)->grads16 ? fn<bf16>((d)->g16 + (off), __VA_ARGS__)          \
		      : fn<float>((d)->g + (off), __VA_ARGS__))

// Parameter off as a product operand: the bf16 copy in bf16 mode.
static inline const void *W(const tr_cuda *d, size_t off)
{
	return d->prec == AT_PREC_BF16 ? (const void *)(d->p16 + off)
				  : (const void *)(d->p + off);
}

// Whether the attention is cuDNN's (fused, bf16): q, k, v, dO in rows,
// q, k, v side by side ([B*T,3C], from one product with wqkv_cat_at).
static inline int cudnn_attention(const tr_cuda *d)
{
	return d->fused_attn && d->prec == AT_PREC_BF16;
}

// Whether the residual adds ride in the next LayerNorms (the y16 of
// forward_kernels.cuh's at_cu_block_acts): in bf16 without biases, the
// branches come from the products in bf16, as the other activations,
// rather than in fp32 onto a copy of the stream.
static inline int residual_folded(const tr_cuda *d)
{
	return d->prec == AT_PREC_BF16 && !d->biases;
}

// Whether the products write the LayerNorms' output gradients (d_ln) in
// bf16, as their other outputs in bf16 mode: with cuDNN's attention,
// whose q, k, v input gradient is one product (the three products apart
// accumulate into d_ln, which stays float for them).
static inline int ln_grad_bf16(const tr_cuda *d)
{
	return cudnn_attention(d);
}

// Layer l's q, k, v: k and v's offsets from q in elements (side by side
// in rows for cuDNN, else one matrix after the other), and their rows'
// stride.
static inline size_t qkv_apart(const tr_cuda *d)
{
	return cudnn_attention(d) ? (size_t)d->cfg.d_model
				  : (size_t)d->B * d->T * d->cfg.d_model;
}
static inline int qkv_ld(const tr_cuda *d)
{
	return (cudnn_attention(d) ? 3 : 1) * d->cfg.d_model;
}

// Whether the engine's parameters, gradients and moments hold each
// layer's Wq, Wk, Wv side by side, as one matrix [C,3C], rather than one
// after the other as the model lays them out (train.h): with cuDNN's
// attention, whose q, k, v come side by side in rows from one product
// with that matrix, and whose input gradient is one product with it.
// The upload and the download change the layout (engine.cu's
// qkv_layout); the products and the update never copy it.
static inline int qkv_side_by_side(const tr_cuda *d)
{
	return cudnn_attention(d);
}

// Layer l's Wq|Wk|Wv side by side [C,3C] in bf16 (qkv_side_by_side).
static inline const bf16 *wqkv_cat_at(const tr_cuda *d, int l)
{
	return d->p16 + d->layer[l].wq;
}

// The head as a product operand, the vocabulary padded with zeros to Vp
// (lm_head [C,Vp], or wte [Vp,C] when tied): its copy head_w where V is
// not a multiple of 8, else the parameter itself.  Every head product
// then runs on aligned rows (an odd V took cuBLAS's slow align-1 kernels:
// 4.9 of 31 ms a step at andrea-120m, V 8449), as torch.compile pads it.
static inline const void *head_weight(const tr_cuda *d)
{
	return d->head_w ? d->head_w : W(d, d->tied ? d->wte : d->lm_head);
}

// Layer l's slice of the MLP's pre-activations.
static inline void *fc_at(const tr_cuda *d, int l)
{
	size_t i = (size_t)l * d->B * d->T * 4 * d->cfg.d_model;
	return d->gelu_mm ? mm_at(d, d->fc, i) : (void *)((float *)d->fc + i);
}

// The MLP's activations GELU(fc) of the top gelu_kept layers, each its
// own; every lower layer's in the lowest kept layer's buffer, where the
// forward pass uses it before that layer's and the backward pass after
// (backward.cu, gelu_again).
static inline int gelu_first_kept(const tr_cuda *d)
{
	return d->cfg.n_layer - d->gelu_kept;
}

static inline int gelu_is_kept(const tr_cuda *d, int l)
{
	return l >= gelu_first_kept(d);
}

static inline void *gelu_at(const tr_cuda *d, int l)
{
	int k = l - gelu_first_kept(d);
	size_t i = (size_t)(k > 0 ? k : 0) * d->B * d->T * 4 * d->cfg.d_model;
	return mm_at(d, d->gelu, i);
}

// Calls fn<bf16> or fn<float> on the mm buffer ptr.
#define MM_CALL(d, fn, ptr, ...)                                        \
	((d)->prec == AT_PREC_BF16 ? fn<bf16>((bf16 *)(ptr), __VA_ARGS__)    \
			      : fn<float>((float *)(ptr), __VA_ARGS__))

// Layer l's row log-sum-exp [B,H,T] (fused attention), each layer's
// starting 16 bytes apart from the last as cuDNN wants.
static inline size_t lse_stride(const tr_cuda *d)
{
	return ((size_t)d->B * d->cfg.n_head * d->T + 3) & ~(size_t)3;
}

static inline float *lse_at(const tr_cuda *d, int l)
{
	return d->lse + (size_t)l * lse_stride(d);
}

// ---- plan.cu: the choices made at the start

// Whether to fuse the GELU into the MLP product where cuBLASLt can.
int tr_plan_gelu_fused(int prec);
// Whether the gradients are bf16 (grads16) for ranks r (NULL: alone).
int tr_plan_grads16(int prec, const tr_cuda_ranks *r);
// How many of the top layers keep their GELU outputs (gelu_kept), from
// d's gelu_mm, head_rows, grads16 and shapes and the bytes of the stacks
// given back; -1 with the reason where ANDREA_TRAIN_GELU_KEPT is no count.
int tr_plan_gelu_kept(const tr_cuda *d, const tr_model *m, size_t stack);

// ---- buffers.cu

// Every buffer of d for its model, batch, precision and attention, each
// counted in d->bytes and freed with d->bufs; the pinned batch slots.
int tr_alloc_all(tr_cuda *d);
// d->ones = B*T ones in the products' type.
int tr_fill_ones(tr_cuda *d);

// ---- head.cu

// The rows of a part of the head and the loss for BT rows of Vp logits in
// precision prec: the batch where its logits fit 80 MiB, else the fewest
// equal parts that do, a multiple of 128 rows; ANDREA_TRAIN_HEAD_ROWS
// chooses (rounded up alike; 0: one part).  -1 with the reason where the
// variable is no count.
int tr_head_rows(int BT, int Vp, int prec);
// After the final LayerNorm: the logits, the losses and their mean in
// res[RES_LOSS], a part at a time; with backward_too, each part's
// gradient over its logits, its share of the head's gradient and its
// rows of d_ln, where tr_backward begins.
int tr_head_loss(tr_cuda *d, int backward_too);

// The backward pass from d_ln (tr_head_loss's) of the step whose forward
// just ran, and the gradient's squared norm into d->res[RES_NORMSQ]
// (backward.cu).
int tr_backward(tr_cuda *d);

// ---- ranks.cu: data-parallel training; alone, each is (nearly) a no-op

// From the ranks (NULL: alone): world, rank, the shard plan; before the
// buffers are made.
void tr_ranks_plan(tr_cuda *d, const tr_model *m, const tr_cuda_ranks *r);
// Joins the communicator, makes the side stream and the buckets.
int tr_ranks_join(tr_cuda *d, const tr_model *m, const tr_cuda_ranks *r);
void tr_ranks_free(tr_cuda *d);
// The backward pass is past `stage` (dist.h's tr_dist_stage): the sums
// of the buckets it has completed start on the side stream.
int tr_ranks_stage_done(tr_cuda *d, int stage);
// After the backward pass: the summed gradients (this rank's shard of
// them where sharded) on the default stream, their squared norm in
// res[RES_NORMSQ].
int tr_ranks_grads(tr_cuda *d);
// After the update: the other ranks' shards of the parameters.
int tr_ranks_params(tr_cuda *d);
// Waits for the event ev (recorded on the default stream); with ranks, no
// longer than timeout_s and watching the communicator for a failed rank.
int tr_ranks_wait(tr_cuda *d, cudaEvent_t ev, double timeout_s,
		  const char *what);

#endif
