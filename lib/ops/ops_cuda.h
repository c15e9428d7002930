/* ops_cuda.h - the CUDA forward ops of kernels/, callable from C.
 *
 * Two layers, both with the semantics of the CPU ops in ops.h (row-major
 * float32, shape letters as in docs/ARCHITECTURE.md):
 *
 *  - at_cuda_<op> take device pointers and launch on the default stream
 *    without waiting; the kernel harnesses (kernels/check/) and bench/gpu
 *    call them;
 *  - at_cuda_<stage>_host take host pointers: they copy the inputs to the
 *    device, run the stage there (weights and intermediates stay on the
 *    device), copy the outputs back and wait.  The one dispatch point of
 *    each stage, at_stage_* in ops/stages.c, calls these.
 *
 * Every function returns 0, or -1 with a one-line reason in at_cuda_error(),
 * such as "CUDA: out of memory allocating 4.0 GiB for scores".  tf32 != 0
 * lets cuBLAS round matrix products through TF32 tensor cores; otherwise
 * they run in full fp32.  Not thread-safe: one host thread drives the GPU.
 */
#ifndef ANDREA_OPS_CUDA_H
#define ANDREA_OPS_CUDA_H

#include <stddef.h>
#include <stdint.h>

/* The reason the last failing call gave. */
const char *at_cuda_error(void);
/* The CUDA device's name, for reports; "" without one. */
const char *at_cuda_device_name(void);

/* ---- device pointers ---- */

/* kernels/ops/embed.cu */
int at_cuda_embed_forward(float *x, const int32_t *tokens, const float *wte,
			  const float *wpe, int B, int T, int C);
int at_cuda_layernorm_forward(float *out, const float *in, const float *w,
			      const float *b, int N, int C, float eps);
/* kernels/ops/heads.cu: in [B,T,G*H*D] -> out [G,B,H,T,D] (G = 3 splits a
 * fused q|k|v projection at once); merge is [B,H,T,D] -> [B,T,H*D].  The
 * fp32 instances of at_cu_split_heads and at_cu_merge_heads, which the
 * training engine also calls with bf16 output. */
int at_cuda_split_heads(float *out, const float *in, int G, int B, int T,
			int H, int D);
int at_cuda_merge_heads(float *out, const float *in, int B, int T, int H,
			int D);
/* kernels/ops/matmul.cu (cuBLAS, through the one product wrapper of
 * kernels/common/gemm.cuh, which C++ callers use for plain products) */
int at_cuda_scores_forward(float *s, const float *q, const float *k, int BH,
			   int T, int D, float scale, int tf32);
int at_cuda_attend_forward(float *o, const float *a, const float *v, int BH,
			   int T, int D, int tf32);
/* kernels/ops/mask.cu: writes fill where j > i, reads and writes nothing else */
int at_cuda_mask_causal(float *s, int BH, int T, float fill);
/* kernels/ops/softmax.cu */
int at_cuda_softmax_rows(float *p, const float *s, size_t rows, int n);
/* Where the fused attention's views (q, k, v, out and their gradients)
 * hold their heads: row t of head bh starts (bh / H) * T * ld + (bh % H)
 * * D + t * ld floats in.  NULL stands for {1, D}, [BH,T,D] contiguous;
 * {H, H*D} is H heads side by side in rows [B,T,H*D], as the block's
 * products write and read them (no split or merge around the attention).
 * BH % H == 0 and ld >= H * D. */
typedef struct {
	int H, ld;
} at_heads;
/* kernels/ops/attention.cu: at_attention_fused (ops.h) on the GPU, heads
 * of D <= 256 values laid out as `heads` says (lse [BH,T] always).  Where
 * D % 4 == 0, D <= 128 and every row is 16-byte aligned it runs on tensor
 * cores: tf32 0 splits each fp32 operand into two TF32 halves (three
 * products, about fp32's accuracy), tf32 1 rounds it to TF32; other
 * heads run in plain fp32. */
int at_cuda_attention_forward(float *out, float *lse, const float *q,
			      const float *k, const float *v, int BH, int T,
			      int D, float scale, int causal, int tf32,
			      const at_heads *heads);

/* ---- host pointers: one call per stage ---- */

/* x[B,T,C] from tokens (checked < V) and wte[V,C], wpe[>=T,C]. */
int at_cuda_embed_host(float *x, const int32_t *tokens, const float *wte,
		       const float *wpe, int V, int B, int T, int C);
/* q, k, v [B,H,T,D] = split(LN(x) . wqkv) with x [B,T,C] and wqkv
 * [C,3*H*D] holding Wq's, Wk's and Wv's columns side by side (as for
 * at_qkv_forward); ln_w NULL skips the LayerNorm. */
int at_cuda_qkv_host(float *q, float *k, float *v, const float *x,
		     const float *ln_w, const float *ln_b,
		     const float *wqkv, int B, int T, int C, int H,
		     int D, int tf32);
int at_cuda_scores_host(float *s, const float *q, const float *k, int BH,
			int T, int D, float scale, int tf32);
int at_cuda_mask_host(float *s, int BH, int T, float fill);
int at_cuda_softmax_host(float *p, const float *s, size_t rows, int n);
/* out = attn . v per head: [B,H,T,D]; merged to [B,T,H*D] when merge; then
 * times wo [H*D,H*D] when wo is not NULL (merge implied). */
int at_cuda_attend_host(float *out, const float *attn, const float *v,
			int B, int H, int T, int D, int merge, const float *wo,
			int tf32);
/* kernels/ops/attention_bwd.cu: the gradients dq, dk, dv of
 * at_cuda_attention_forward's out (device memory) from q, k, v, its out and
 * lse, and dout, all laid out as `heads` says; delta [BH,T] is scratch.
 * D <= 256, on tensor cores and tf32 as for the forward.  There dq is
 * summed with atomics (runs may differ in its last bits); the FMA path is
 * deterministic. */
int at_cuda_attention_backward(float *dq, float *dk, float *dv,
			       const float *q, const float *k, const float *v,
			       const float *out, const float *lse,
			       const float *dout, float *delta, int BH, int T,
			       int D, float scale, int causal, int tf32,
			       const at_heads *heads);
/* kernels/ops/attention_cudnn.cu: the fused attention in bf16 through
 * cuDNN (loaded at run time).  q, k, v, out and the gradients dq, dk, dv,
 * dout are bf16 [B,H,T,D] views in device memory, each given by its
 * element strides of b, h and t (d contiguous; 16-byte aligned); lse
 * [B,H,T] float, the forward's row log-sum-exp of the scaled scores.
 * _supported loads cuDNN and makes (and keeps) the plan of the shape in
 * that direction: 1, or 0 with the reason in at_cuda_error() (no cuDNN,
 * or D not a multiple of 8 at most 128, or a plan refused); the others
 * return 0, or -1 with the reason.  The workspace they share is cuDNN's,
 * grown as needed and kept. */
typedef struct {
	int B, H, T, D, causal;
	float scale;
	long long q[3], k[3], v[3], o[3];         /* strides of b, h, t */
	long long dq[3], dk[3], dv[3], dout[3];
} at_sdpa_shape;
int at_cudnn_sdpa_supported(const at_sdpa_shape *s, int backward);
int at_cudnn_sdpa_forward(const at_sdpa_shape *s, void *out, float *lse,
			  const void *q, const void *k, const void *v);
int at_cudnn_sdpa_backward(const at_sdpa_shape *s, void *dq, void *dk,
			   void *dv, const void *q, const void *k,
			   const void *v, const void *out, const void *dout,
			   const float *lse);
/* A shape for the calls above with every view contiguous [B,H,T,D]. */
at_sdpa_shape at_sdpa_contiguous(int B, int H, int T, int D, float scale,
				 int causal);
/* The model block's causal attention (scale 1/sqrt(D)): q, k, v, out and
 * their gradients the heads side by side in rows [B,T,H*D], as the
 * products before and after write and read them; the rows of q, k, v and
 * of their gradients qkv_ld elements apart (H*D: each its own matrix; 3
 * H*D: side by side in one, as one product writes them). */
at_sdpa_shape at_sdpa_block(int B, int H, int T, int D, int qkv_ld);
/* andrea-attention: out [BH,T,D] and lse [BH,T] (if not NULL) from q, k,
 * v [BH,T,D] through at_cuda_attention_forward. */
int at_cuda_attention_host(float *out, float *lse, const float *q,
			   const float *k, const float *v, int BH, int T, int D,
			   float scale, int causal);

#endif
