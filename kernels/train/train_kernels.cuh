// train_kernels.cuh - the device ops of the training engine
// (kernels/train/*.cu), shared by engine.cu.
//
// Row-major, shape letters as in docs/ARCHITECTURE.md.  "mm" buffers are operands of
// matrix products only: float in fp32/tf32 mode, bf16 in bf16 mode; a
// kernel that writes one is instantiated for both (template OUT).  Every
// function launches on the default stream and returns 0, or -1 with the
// reason in at_cuda_error().
#ifndef ANDREA_TRAIN_KERNELS_CUH
#define ANDREA_TRAIN_KERNELS_CUH

#include <cuda_bf16.h>

#include "common/cuda_util.cuh"
#include "common/gemm.cuh"
#include "forward/forward_kernels.cuh"

extern "C" {
#include "train/dist.h"
#include "train/train_cuda.h"
}


// ---- products: at_cu_gemm (common/gemm.cuh) on the engine's own handle,
// in an at_cu_gemm_mode whose prec is the run's ----

// The forward kernels (bf16 conversion, the causal softmax, GELU) and
// the one block forward are the forward layer's (forward/forward_kernels.cuh).

// ---- gelu_mm.cu: the MLP's first product with GELU fused ----

typedef struct tr_gelu_mm tr_gelu_mm;
// Plans the fused products for A [M,K] and outputs [M,N] in precision
// prec.  *g is NULL (and 0 returned) where cuBLASLt is missing or has no
// algorithm for them: the caller then multiplies and applies the GELU
// apart.
int tr_gelu_mm_new(tr_gelu_mm **g, int prec, int M, int N, int K);
void tr_gelu_mm_free(tr_gelu_mm *g);
// pre = A.B and out = GELU(pre), B stored [K,N]; all mm buffers.
int tr_gelu_mm_fwd(tr_gelu_mm *g, const void *A, const void *B, void *out,
		   void *pre);
// dpre = (dout.W^T) * GELU'(pre), W stored [N,K]; all mm buffers.
int tr_gelu_mm_bwd(tr_gelu_mm *g, const void *dout, const void *W,
		   const void *pre, void *dpre);

// ---- norm.cu: LayerNorm ----

// The forward pass is at_cu_layernorm_fwd (cuda_util.cuh), keeping each
// row's mean and 1/sqrt(var + eps) for the backward pass.
// dx += the LN backward of dout, and dx16 (if not NULL) = bf16(dx): the
// operand of the products that read it next; dw, db = sums over rows
// (overwritten, float or bf16 as the gradients), through partial sums in
// scratch (2 * LN_PARTS * C floats), in a fixed order.  dout float, or
// bf16 as the products that make it write it in bf16 mode (engine.cuh's
// d_ln).
#define LN_PARTS 256
template <typename G, typename W>
int tr_layernorm_bwd(float *dx, bf16 *dx16, W *dw, W *db,
		     const G *dout, const float *in, const float *w,
		     const float *mean, const float *rstd, int N, int C,
		     float *scratch);

// ---- attn.cu: the causal softmax, backward ----

// The head transposes are at_cu_split_heads and at_cu_merge_heads
// (cuda_util.cuh, kernels/ops/heads.cu).
// ds = scale * a * (da - sum_j a da) over j <= r % T, 0 beyond; ds may be
// da (in place) when OUT is float.
template <typename OUT>
int tr_softmax_causal_bwd(OUT *ds, const float *da, const float *a,
			  size_t rows, int T, float scale);

// ---- loss.cu: the loss, GELU, the embedding's gradient ----

// losses[n] = cross-entropy of logits row n (V of them, float or bf16,
// rows ld apart) against targets[n]; with grad, the row's gradient
// (softmax - onehot) * inv written over it, and 0 in its columns V ..
// Vd - 1 (a padded vocabulary).  ld and Vd must be multiples of 4 and the
// rows aligned to four elements.
template <typename T>
int tr_crossentropy(T *logits, size_t ld, float *losses,
		    const int32_t *targets, int N, int V, int Vd, float inv,
		    int grad);
// *out = mean of losses[0..N-1], summed in double in a fixed order.
int tr_mean(double *out, const float *losses, int N);
// out = GELU(in) again in the backward pass, bf16 both (the cuBLASLt
// epilogue's pre-activations): vectorized, the fast exponential.
int tr_gelu_again(bf16 *out, const bf16 *in, size_t n);
// din = dout * GELU'(in) and, where act is not NULL, act = GELU(in)
// (the backward pass's recomputed activations) from the same read of in;
// din may be dout.
template <typename OUT>
int tr_gelu_bwd(OUT *din, OUT *act, const float *in, const float *dout,
		size_t n);
// dwpe[t] = sum over b of dx[b,t] (rows t < T; the rest untouched) and
// dwte[v] = head[v] (a tied head's share of the gradient, float; may be
// dwte itself when G is float; NULL: none) + the sum of dx over the
// positions pos[off[v]..off[v+1]) in order.
template <typename G>
int tr_embed_bwd(G *dwte, G *dwpe, const float *head, const float *dx,
		 const int *off, const int *pos, int B, int T, int C, int V);

// ---- adamw.cu: the norm and the update ----

// The sum of v over the block in a fixed tree order (so runs repeat bit
// for bit); blockDim.x a power of two and sh blockDim.x doubles of shared
// memory.  Every thread gets the total.
__device__ __forceinline__ double block_sum_double(double v, double *sh)
{
	sh[threadIdx.x] = v;
	__syncthreads();
	for (int w = blockDim.x / 2; w > 0; w /= 2) {
		if ((int)threadIdx.x < w)
			sh[threadIdx.x] += sh[threadIdx.x + w];
		__syncthreads();
	}
	return sh[0];
}

// The update's unit of work: one block a piece (dist.h's tr_piece) of
// at most ADAMW_CHUNK elements of one parameter.
#define ADAMW_CHUNK 4096
#define NORM_BLOCKS 1024

// The gradients g are float, or bf16 in bf16 mode on one process
// (engine.cuh's grads16).
// *out = sum of g[i]^2 (double), via partial[NORM_BLOCKS], fixed order.
template <typename G>
int tr_sumsq(const G *g, size_t n, double *out, double *partial);
// The AdamW update of every piece (weight decay wd where the piece
// decays); the gradients are scaled by clip / sqrt(*normsq) when clip > 0
// and that norm exceeds clip; p16 (if not NULL) gets bf16 copies of the
// new parameters.  The moments hold elements from mom_base on (a sharded
// optimizer's shard), p and g the whole flat buffers.
template <typename G>
int tr_adamw(const G *g, float *p, bf16 *p16, float *m1, float *m2,
	     size_t mom_base, const tr_piece *pieces, int npieces, float lr,
	     double beta1, double beta2, float eps, float wd, float c1,
	     float c2, double clip, const double *normsq);
// dst (rows ld apart, float or bf16) = src (rows lds apart), rows x cols:
// the padded copy of a parameter whose rows are not 16-byte aligned, and
// the padded head gradient's way back.
template <typename OUT>
int tr_copy_rows(OUT *dst, size_t ld, const float *src, size_t lds, int rows,
		 int cols);
// dst [rows, 3 cols] = three matrices [rows, cols] of src, one after the
// other, side by side: Wq|Wk|Wv as the engine lays them out with cuDNN's
// attention (engine.cuh's qkv_side_by_side).
template <typename T> // float, or bf16 (the gradients' way out)
int tr_cat_three(T *dst, const T *src, int rows, int cols);
// Its inverse: dst, three matrices [rows, cols] one after the other, from
// src [rows, 3 cols].
template <typename T>
int tr_split_three(T *dst, const T *src, int rows, int cols);

#endif
