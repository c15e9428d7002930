/* stages.c - each stage on the CPU or the GPU (see stages.h). */
#include "ops/stages.h"

#include <math.h>
#include <stdlib.h>

#include "core/parallel.h"
#include "ops/ops.h"
#include "ops/ops_cuda.h"

/* Scores computed and handed on at a time on the CPU: one head at T=1024. */
#define SCORES_BLOCK_BYTES (4u << 20)

static const char *stage_error = "";

const char *at_stage_error(void)
{
	return stage_error;
}

/* The result of a GPU entry: its reason on failure. */
static int gpu(int rc)
{
	if (rc < 0)
		stage_error = at_cuda_error();
	return rc < 0 ? -1 : 0;
}

static int out_of_memory(void)
{
	stage_error = "out of memory";
	return -1;
}

/* Whether e computes work w on the GPU: as resolved, or under auto as
 * the process's first work decided (at_device_auto). */
static int on_gpu(const at_exec *e, at_work w)
{
	at_device dev = e->dev;
	if (dev == AT_DEV_AUTO)
		dev = at_device_auto(w.madds, w.bytes, at_threads());
	return dev == AT_DEV_CUDA;
}

int at_stage_streams(const at_exec *e, at_work w)
{
	return !on_gpu(e, w);
}

/* The estimates count float32 bytes; the small terms (LayerNorm, the
 * scale, the mask's compares) are left out. */
#define F32 4.0

at_work at_work_embed(int B, int T, int C, int V)
{
	double x = (double)B * T * C;
	return (at_work){x, F32 * (x + (double)(V + T) * C) + 4.0 * B * T};
}

at_work at_work_qkv(int B, int T, int C, int cols)
{
	double rows = (double)B * T;
	return (at_work){rows * C * 3 * cols,
			 F32 * (rows * C + (double)C * 3 * cols + rows * 3 * cols)};
}

at_work at_work_scores(int BH, int T, int D)
{
	double qk = (double)BH * T * D, s = (double)BH * T * T;
	return (at_work){s * D, F32 * (2 * qk + s)};
}

at_work at_work_mask(size_t n)
{
	return (at_work){0, F32 * 2 * (double)n};
}

at_work at_work_softmax(size_t rows, int n)
{
	double e = (double)rows * n; /* an exp and a sum an element */
	return (at_work){e, F32 * 2 * e};
}

at_work at_work_attend(int B, int H, int T, int D, int wo)
{
	double a = (double)B * H * T * T, o = (double)B * H * T * D,
	       c = (double)H * D;
	double proj = wo ? (double)B * T * c * c : 0;
	return (at_work){a * D + proj,
			 F32 * (a + 2 * o + (wo ? c * c : 0))};
}

at_work at_work_attention(int BH, int T, int D, int causal)
{
	double qk = (double)BH * T * D, s = (double)BH * T * T;
	return (at_work){2 * s * D / (causal ? 2 : 1), F32 * (4 * qk + BH * T)};
}

int at_stage_embed(const at_exec *e, float *x, const int32_t *tokens,
		   const float *wte, const float *wpe, int V, int B, int T,
		   int C)
{
	if (on_gpu(e, at_work_embed(B, T, C, V)))
		return gpu(at_cuda_embed_host(x, tokens, wte, wpe, V, B, T, C));
	at_embed_forward(x, tokens, wte, wpe, B, T, C);
	return 0;
}

int at_stage_qkv(const at_exec *e, float *q, float *k, float *v,
		 const float *x, const float *ln_w, const float *ln_b,
		 const float *wqkv, int B, int T, int C, int heads, int D)
{
	if (on_gpu(e, at_work_qkv(B, T, C, heads * D)))
		return gpu(at_cuda_qkv_host(q, k, v, x, ln_w, ln_b, wqkv, B, T, C,
					    heads, D, e->tf32));
	if (at_qkv_forward(q, k, v, x, ln_w, ln_b, wqkv, B, T, C, heads, D) < 0)
		return out_of_memory();
	return 0;
}

/* The GPU's scores, whole, then to the sink. */
static int scores_gpu(const at_exec *e, const float *q, const float *k,
		      int BH, int T, int D, float scale, at_sink *sink,
		      void *ctx)
{
	size_t n = (size_t)BH * T * T * sizeof(float);
	float *s = malloc(n + 1);
	if (!s)
		return out_of_memory();
	int rc = gpu(at_cuda_scores_host(s, q, k, BH, T, D, scale, e->tf32));
	if (rc == 0 && sink(ctx, s, n) < 0)
		rc = -1;
	free(s);
	return rc;
}

int at_stage_scores(const at_exec *e, const float *q, const float *k,
		    int BH, int T, int D, float scale, at_sink *sink,
		    void *ctx)
{
	if (on_gpu(e, at_work_scores(BH, T, D)))
		return scores_gpu(e, q, k, BH, T, D, scale, sink, ctx);
	int rows = T && (size_t)T * sizeof(float) < SCORES_BLOCK_BYTES
			   ? (int)(SCORES_BLOCK_BYTES / ((size_t)T * sizeof(float)))
			   : 1;
	float *buf = malloc((size_t)(rows < T ? rows : T) * T * sizeof *buf + 1);
	if (!buf)
		return out_of_memory();
	size_t qs = (size_t)T * D;
	int rc = 0;
	for (int i = 0; i < BH && rc == 0; i++)
		for (int r0 = 0; r0 < T && rc == 0; r0 += rows) {
			int n = T - r0 < rows ? T - r0 : rows;
			at_scores_rows(buf, q + i * qs + (size_t)r0 * D, k + i * qs,
				       n, T, D, scale);
			rc = sink(ctx, buf, (size_t)n * T * sizeof *buf);
		}
	free(buf);
	return rc;
}

int at_stage_mask(const at_exec *e, float *s, uint64_t first, size_t n,
		  int T, float fill)
{
	size_t TT = (size_t)T * T;
	int whole = first == 0 && (T == 0 || n % TT == 0);
	int BH = T ? (int)(n / TT) : 0;
	if (on_gpu(e, at_work_mask(n)))
		return gpu(at_cuda_mask_host(s, BH, T, fill));
	if (whole) /* whole matrices: the parallel loop */
		at_mask_causal(s, BH, T, fill);
	else
		at_mask_causal_span(s, first, n, T, fill);
	return 0;
}

int at_stage_softmax(const at_exec *e, float *p, const float *s,
		     size_t rows, int n)
{
	if (on_gpu(e, at_work_softmax(rows, n)))
		return gpu(at_cuda_softmax_host(p, s, rows, n));
	at_softmax_rows(p, s, rows, n);
	return 0;
}

int at_stage_attend_heads(float *out, const float *attn, const float *v,
			  int heads, int T, int D)
{
	at_attend_forward(out, attn, v, heads, T, D);
	return 0;
}

int at_stage_attend_join(float *dst, const float *out, int B, int H, int T,
			 int D, int merge, const float *wo)
{
	size_t n = (size_t)B * H * T * D;
	if (!merge && !wo)
		return 0;
	float *cat = wo ? malloc(n * sizeof *cat + 1) : dst;
	if (!cat)
		return out_of_memory();
	at_merge_heads(cat, out, B, T, H, D);
	if (wo) {
		at_gemm(0, 0, B * T, H * D, H * D, 1.0f, cat, H * D, wo, H * D,
			0.0f, dst, H * D);
		free(cat);
	}
	return 0;
}

int at_stage_attend(const at_exec *e, float *dst, const float *attn,
		    const float *v, int B, int H, int T, int D, int merge,
		    const float *wo)
{
	if (on_gpu(e, at_work_attend(B, H, T, D, wo != NULL)))
		return gpu(at_cuda_attend_host(dst, attn, v, B, H, T, D,
					       merge || wo, wo, e->tf32));
	if (!merge && !wo)
		return at_stage_attend_heads(dst, attn, v, B * H, T, D);
	float *out = malloc((size_t)B * H * T * D * sizeof *out + 1);
	if (!out)
		return out_of_memory();
	at_stage_attend_heads(out, attn, v, B * H, T, D);
	int rc = at_stage_attend_join(dst, out, B, H, T, D, merge, wo);
	free(out);
	return rc;
}

int at_stage_attention(const at_exec *e, float *out, float *lse,
		       const float *q, const float *k, const float *v, int BH,
		       int T, int D, float scale, int causal)
{
	if (D == 0) { /* out holds nothing; each visible score is 0 */
		for (size_t r = 0; lse && r < (size_t)BH * T; r++)
			lse[r] = logf(causal ? (float)(r % T + 1) : (float)T);
		return 0;
	}
	if (on_gpu(e, at_work_attention(BH, T, D, causal)))
		return gpu(at_cuda_attention_host(out, lse, q, k, v, BH, T, D,
						  scale, causal));
	if (at_attention_fused(out, lse, q, k, v, BH, T, D, scale, causal) < 0)
		return out_of_memory();
	return 0;
}
