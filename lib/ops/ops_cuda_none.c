/* ops_cuda_none.c - the host entry points of ops_cuda.h and
 * forward_cuda.h in a build without CUDA, so that the stages and the
 * forward engine link everywhere.  Neither --device nor auto
 * (at_device_auto) gives the GPU in such a build, so these are not
 * reached. */
#ifndef ANDREA_CUDA
#include "ops/forward_cuda.h"
#include "ops/ops_cuda.h"

const char *at_cuda_error(void)
{
	return "CUDA: this build has no CUDA support";
}

int at_cuda_embed_host(float *x, const int32_t *tokens, const float *wte,
		       const float *wpe, int V, int B, int T, int C)
{
	return -1;
}

int at_cuda_qkv_host(float *q, float *k, float *v, const float *x,
		     const float *ln_w, const float *ln_b,
		     const float *wqkv, int B, int T, int C, int H,
		     int D, int tf32)
{
	return -1;
}

int at_cuda_scores_host(float *s, const float *q, const float *k, int BH,
			int T, int D, float scale, int tf32)
{
	return -1;
}

int at_cuda_mask_host(float *s, int BH, int T, float fill)
{
	return -1;
}

int at_cuda_softmax_host(float *p, const float *s, size_t rows, int n)
{
	return -1;
}

int at_cuda_attend_host(float *out, const float *attn, const float *v,
			int B, int H, int T, int D, int merge, const float *wo,
			int tf32)
{
	return -1;
}

int at_cuda_attention_host(float *out, float *lse, const float *q,
			   const float *k, const float *v, int BH, int T, int D,
			   float scale, int causal)
{
	return -1;
}

at_cuda_fwd *at_cuda_fwd_new(const at_weights *w, int precision, int rows)
{
	return NULL;
}

void at_cuda_fwd_free(at_cuda_fwd *g)
{
}

int at_cuda_fwd_blocks(at_cuda_fwd *g, float *x, int B, int T,
		       const int *layers, int n, const at_hook *hook)
{
	return -1;
}

int at_cuda_fwd_blocks_begin(at_cuda_fwd *g, const float *x, int B, int T,
			     const int *layers, int n)
{
	return -1;
}

const float *at_cuda_fwd_blocks_end(at_cuda_fwd *g)
{
	return NULL;
}

int at_cuda_fwd_head(at_cuda_fwd *g, const float *x, int N, at_sink *sink,
		     void *ctx)
{
	return -1;
}

int at_cuda_fwd_logits(at_cuda_fwd *g, float *logits, const int32_t *tokens,
		       int B, int T, const at_hook *hook)
{
	return -1;
}

int at_cuda_fwd_prefill(at_cuda_fwd *g, int row, const int32_t *tokens,
			int T, float *logits, const at_hook *hook)
{
	return -1;
}

int at_cuda_fwd_decode(at_cuda_fwd *g, const int32_t *tokens, const int *pos,
		       int B, float *logits, const at_hook *hook)
{
	return -1;
}

const char *at_cuda_device_name(void)
{
	return "";
}
#else
typedef int at_cuda_build_has_the_real_ones; /* no empty translation unit */
#endif
