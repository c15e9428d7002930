/* forward.c - the forward engine of forward.h: the CPU path through
 * prenorm.h, and the one place where it goes to the GPU instead
 * (forward_cuda.h). */
#include "ops/forward.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/parallel.h"
#include "ops/forward_cuda.h"
#include "ops/ops.h"
#include "ops/ops_cuda.h"

struct at_fwd {
	const at_weights *w;
	at_device dev;
	int precision, rows;
	int *len;                /* positions cached, per row */
	at_cuda_fwd *gpu;        /* the GPU's engine, or NULL on the CPU */
	const at_hook *hook;
	/* the CPU's KV cache: L x [rows,H,ctx,D] each */
	float *kc, *vc;
	/* the CPU's scratch, grown to the largest call: nc floats of
	 * [B*T,C] each for x, h, t, q, k, v; ns for scores; nf for the MLP */
	size_t nc, ns, nf;
	float *x, *h, *t, *q, *k, *v, *s, *f;
	int *pos;                /* [rows] positions of a decoding step */
	/* records of at_fwd_blocks_begin computed here, oldest first */
	float *held[2];
	size_t held_n[2];
	float *r;                /* the heads' results, where a hook wants them */
	size_t nr;
	float *piece;            /* a piece of at_fwd_head's logits */
	size_t piece_n;
	int in_flight;           /* begun, not yet ended (on the GPU too) */
};

static int fail(char *err, size_t errlen, const char *why)
{
	snprintf(err, errlen, "%s", why);
	return -1;
}

/* rc of a GPU call: 0, a hook's own value, or -1 with the reason. */
static int gpu_fail(int rc, char *err, size_t errlen)
{
	if (rc >= 0)
		return rc;
	return fail(err, errlen, at_cuda_error());
}

/* Grows *p to n floats (contents lost). */
static int grow(float **p, size_t *have, size_t n)
{
	if (n <= *have)
		return 0;
	free(*p);
	*p = malloc(n * sizeof **p + 1);
	*have = *p ? n : 0;
	return *p ? 0 : -1;
}

/* Scratch for rows x C activations (x, h, t, q, k, v; 4C for the MLP)
 * and ns score elements. */
static int scratch(at_fwd *e, size_t rows, size_t ns)
{
	size_t nc = rows * e->w->C;
	if (nc > e->nc) {
		float **bufs[6] = {&e->x, &e->h, &e->t, &e->q, &e->k, &e->v};
		e->nc = 0;
		for (int i = 0; i < 6; i++) {
			free(*bufs[i]);
			if (!(*bufs[i] = malloc(nc * sizeof **bufs[i] + 1)))
				return -1;
		}
		e->nc = nc;
	}
	int results = 0; /* a hook wants the heads' results somewhere */
	for (int l = 0; l < e->w->L && !results; l++)
		results = at_hook_wants(e->hook, "result", l) != AT_HOOK_SKIP;
	if (results && grow(&e->r, &e->nr, nc * e->w->H) < 0)
		return -1;
	return grow(&e->s, &e->ns, ns) < 0 ? -1 : grow(&e->f, &e->nf, 4 * nc);
}

int at_fwd_new(at_fwd **out, const at_weights *w, at_device dev, int precision,
	       int rows, char *err, size_t errlen)
{
	*out = NULL;
	if (precision != AT_PREC_FP32 && dev != AT_DEV_CUDA) {
		snprintf(err, errlen, "the CPU computes in fp32, not %s",
			 at_precision_name(precision));
		return -1;
	}
	at_fwd *e = calloc(1, sizeof *e);
	if (!e || !(e->len = calloc((size_t)rows + 1, sizeof *e->len)) ||
	    !(e->pos = calloc((size_t)rows + 1, sizeof *e->pos))) {
		at_fwd_free(e);
		return fail(err, errlen, "out of memory");
	}
	e->w = w;
	e->dev = dev;
	e->precision = precision;
	e->rows = rows;
	if (dev == AT_DEV_CUDA) {
		if (!(e->gpu = at_cuda_fwd_new(w, precision, rows))) {
			at_fwd_free(e);
			return fail(err, errlen, at_cuda_error());
		}
	} else if (rows > 0) {
		size_t n = (size_t)w->L * rows * w->ctx * w->C;
		if (!(e->kc = malloc(n * sizeof *e->kc + 1)) ||
		    !(e->vc = malloc(n * sizeof *e->vc + 1))) {
			at_fwd_free(e);
			snprintf(err, errlen, "out of memory (a KV cache of %d "
				 "rows of %d positions)", rows, w->ctx);
			return -1;
		}
	}
	*out = e;
	return 0;
}

void at_fwd_free(at_fwd *e)
{
	if (!e)
		return;
	at_cuda_fwd_free(e->gpu);
	float *bufs[] = {e->kc, e->vc, e->x, e->h, e->t, e->q, e->k, e->v,
			 e->s, e->f, e->held[0], e->held[1], e->piece, e->r};
	for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
		free(bufs[i]);
	free(e->len);
	free(e->pos);
	free(e);
}

at_device at_fwd_device(const at_fwd *e)
{
	return e->dev;
}

void at_fwd_set_hook(at_fwd *e, const at_hook *hook)
{
	e->hook = hook;
}

int at_fwd_cached(const at_fwd *e, int row)
{
	return e->len[row];
}

/* Reports the engine's own activation [B,T,X] (x after layer, -1: the
 * embedding; lnf and logits, layer -1) to a hook that wants it. */
static int report_btx(const at_fwd *e, const char *name, float *data,
		      int layer, int B, int T, int X)
{
	if (at_hook_wants(e->hook, name, layer) == AT_HOOK_SKIP)
		return 0;
	uint64_t dims[3] = {(uint64_t)B, (uint64_t)T, (uint64_t)X};
	return e->hook->fn(e->hook->ctx, name, layer, data, 3, dims);
}

static int report_x(const at_fwd *e, float *x, int layer, int B, int T)
{
	return report_btx(e, "x", x, layer, B, T, e->w->C);
}

/* Layer l on the CPU over x [B,T,C] in place, with kv or without. */
static int cpu_block(at_fwd *e, int l, const at_kv *kv, float *x, int B,
		     int T)
{
	const at_weights *w = e->w;
	at_block_acts a = {.ln1 = e->h, .ln2 = e->h, .y = e->h, .q = e->q,
			   .k = e->k, .v = e->v, .out = e->q, .scores = e->s,
			   .att = e->s, .fc = e->f, .gelu = e->f, .tmp = e->t,
			   .hook = e->hook, .layer = l};
	if (at_hook_wants(e->hook, "result", l) != AT_HOOK_SKIP)
		a.result = e->r; /* grown by scratch */
	int rc = at_block_run(&w->layer[l], &a, kv, x, x, B, T, w->C, w->H);
	return rc ? rc : report_x(e, x, l, B, T);
}

int at_fwd_blocks(at_fwd *e, float *x, int B, int T, const int *layers,
		  int n, char *err, size_t errlen)
{
	if (e->gpu)
		return gpu_fail(at_cuda_fwd_blocks(e->gpu, x, B, T, layers, n,
						   e->hook), err, errlen);
	size_t BT = (size_t)B * T;
	if (scratch(e, BT, BT * e->w->H * T) < 0)
		return fail(err, errlen, "out of memory");
	for (int i = 0; i < n; i++) {
		int rc = cpu_block(e, layers[i], NULL, x, B, T);
		if (rc)
			return rc;
	}
	return 0;
}

int at_fwd_blocks_begin(at_fwd *e, const float *x, int B, int T,
			const int *layers, int n, char *err, size_t errlen)
{
	if (e->in_flight == 2)
		return fail(err, errlen, "internal error: a third record of "
			    "blocks begun before the first ended");
	if (e->gpu && !e->hook) {
		if (at_cuda_fwd_blocks_begin(e->gpu, x, B, T, layers, n) < 0)
			return gpu_fail(-1, err, errlen);
		e->in_flight++;
		return 0;
	}
	/* here, or on the GPU waiting for it where a hook wants the
	 * activations: computed now, in a buffer of its own */
	int i = e->in_flight;
	size_t nx = (size_t)B * T * e->w->C;
	if (grow(&e->held[i], &e->held_n[i], nx) < 0)
		return fail(err, errlen, "out of memory");
	memcpy(e->held[i], x, nx * sizeof *x);
	int rc = at_fwd_blocks(e, e->held[i], B, T, layers, n, err, errlen);
	if (rc == 0)
		e->in_flight++;
	return rc;
}

const float *at_fwd_blocks_end(at_fwd *e, char *err, size_t errlen)
{
	if (e->in_flight == 0) {
		fail(err, errlen, "internal error: no record of blocks in flight");
		return NULL;
	}
	e->in_flight--;
	if (e->gpu && !e->hook) {
		const float *out = at_cuda_fwd_blocks_end(e->gpu);
		if (!out)
			gpu_fail(-1, err, errlen);
		return out;
	}
	float *out = e->held[0];
	size_t n = e->held_n[0];
	e->held[0] = e->held[1], e->held_n[0] = e->held_n[1];
	e->held[1] = out, e->held_n[1] = n;
	return out;
}

/* logits [N,V] of x [N,C] (B = N / T rows of T) on the CPU, ln in e->h;
 * lnf and logits reported. */
static int cpu_head(at_fwd *e, float *logits, const float *x, int N, int T)
{
	const at_weights *w = e->w;
	at_head_norm(w->lnf_w, w->lnf_b, e->h, x, N, w->C);
	int rc = report_btx(e, "lnf", e->h, -1, N / T, T, w->C);
	if (rc)
		return rc;
	at_head_product(w->lm_head, w->wte, logits, e->h, N, w->C, w->V);
	return report_btx(e, "logits", logits, -1, N / T, T, w->V);
}

/* The CPU's head piece by piece: rows of about 4 MiB of logits. */
static int cpu_head_pieces(at_fwd *e, const float *x, int N, at_sink *sink,
			   void *ctx)
{
	const at_weights *w = e->w;
	size_t rows = ((size_t)4 << 20) / ((size_t)w->V * sizeof(float));
	rows = rows < 1 ? 1 : rows > (size_t)N ? (size_t)N : rows;
	if (scratch(e, rows, 0) < 0 ||
	    grow(&e->piece, &e->piece_n, rows * w->V) < 0)
		return -2;
	for (size_t r = 0; r < (size_t)N; r += rows) {
		size_t n = (size_t)N - r < rows ? (size_t)N - r : rows;
		at_head_run(w->lnf_w, w->lnf_b, w->lm_head, w->wte, e->h, NULL, NULL,
			    e->piece, x + r * w->C, (int)n, w->C, w->V);
		if (sink(ctx, e->piece, n * w->V * sizeof(float)) < 0)
			return -1;
	}
	return 0;
}

int at_fwd_head(at_fwd *e, const float *x, int N, at_sink *sink, void *ctx,
		char *err, size_t errlen)
{
	if (e->gpu) {
		int rc = at_cuda_fwd_head(e->gpu, x, N, sink, ctx);
		return rc == AT_CUDA_SINK_STOPPED ? -1 : gpu_fail(rc, err, errlen);
	}
	int rc = cpu_head_pieces(e, x, N, sink, ctx);
	return rc == -2 ? fail(err, errlen, "out of memory") : rc;
}

int at_fwd_logits(at_fwd *e, float *logits, const int32_t *tokens, int B,
		  int T, char *err, size_t errlen)
{
	if (e->gpu)
		return gpu_fail(at_cuda_fwd_logits(e->gpu, logits, tokens, B, T,
						   e->hook), err, errlen);
	const at_weights *w = e->w;
	size_t BT = (size_t)B * T;
	if (scratch(e, BT, BT * w->H * T) < 0)
		return fail(err, errlen, "out of memory");
	at_embed_forward(e->x, tokens, w->wte, w->wpe, B, T, w->C);
	int rc = report_x(e, e->x, -1, B, T);
	for (int l = 0; !rc && l < w->L; l++)
		rc = cpu_block(e, l, NULL, e->x, B, T);
	return rc ? rc : cpu_head(e, logits, e->x, (int)BT, T);
}

/* Layer l's cache from row `row` on. */
static at_kv cache_of(const at_fwd *e, int l, int row, const int *len)
{
	const at_weights *w = e->w;
	size_t per_row = (size_t)w->ctx * w->C;
	size_t off = ((size_t)l * e->rows + row) * per_row;
	return (at_kv){.k = e->kc + off, .v = e->vc + off, .cap = w->ctx,
		       .len = len};
}

int at_fwd_prefill(at_fwd *e, int row, const int32_t *tokens, int T,
		   float *logits, char *err, size_t errlen)
{
	const at_weights *w = e->w;
	if (row < 0 || row >= e->rows || T < 0 || T > w->ctx)
		return fail(err, errlen, "prefill outside the cache");
	e->len[row] = 0;
	if (T == 0)
		return 0;
	if (e->gpu) {
		int rc = at_cuda_fwd_prefill(e->gpu, row, tokens, T, logits,
					     e->hook);
		if (rc)
			return gpu_fail(rc, err, errlen);
		e->len[row] = T;
		return 0;
	}
	if (scratch(e, (size_t)T, (size_t)w->H * T * w->ctx) < 0)
		return fail(err, errlen, "out of memory");
	static const int zero = 0;
	at_embed_forward(e->x, tokens, w->wte, w->wpe, 1, T, w->C);
	int rc = report_x(e, e->x, -1, 1, T);
	for (int l = 0; !rc && l < w->L; l++) {
		at_kv kv = cache_of(e, l, row, &zero);
		rc = cpu_block(e, l, &kv, e->x, 1, T);
	}
	if (rc)
		return rc;
	e->len[row] = T;
	return logits ? cpu_head(e, logits, e->x + (size_t)(T - 1) * w->C, 1, 1)
		      : 0;
}

int at_fwd_decode(at_fwd *e, const int32_t *tokens, int B, float *logits,
		  char *err, size_t errlen)
{
	const at_weights *w = e->w;
	if (B < 1 || B > e->rows)
		return fail(err, errlen, "decoding more rows than the cache has");
	for (int b = 0; b < B; b++) {
		if (e->len[b] >= w->ctx)
			return fail(err, errlen, "a row's cache is full");
		e->pos[b] = e->len[b];
	}
	int rc;
	if (e->gpu) {
		if ((rc = at_cuda_fwd_decode(e->gpu, tokens, e->pos, B, logits,
					     e->hook)))
			return gpu_fail(rc, err, errlen);
	} else {
		if (scratch(e, (size_t)B, (size_t)B * w->H * w->ctx) < 0)
			return fail(err, errlen, "out of memory");
		/* a step's products are a few rows each, microseconds apart */
		int was = at_parallel_close(1);
		at_embed_at(e->x, tokens, e->pos, w->wte, w->wpe, B, w->C);
		rc = report_x(e, e->x, -1, B, 1);
		for (int l = 0; !rc && l < w->L; l++) {
			at_kv kv = cache_of(e, l, 0, e->pos);
			rc = cpu_block(e, l, &kv, e->x, B, 1);
		}
		if (!rc)
			rc = cpu_head(e, logits, e->x, B, 1);
		at_parallel_close(was);
		if (rc)
			return rc;
	}
	for (int b = 0; b < B; b++)
		e->len[b]++;
	return 0;
}

double at_fwd_work(int c, int v, double positions, int layers, double keys,
		   double head, double *bytes)
{
	double C = c, V = v, block = 12 * C * C;
	*bytes = 4 * (layers * block + (head > 0 ? C * V : 0) +
		      2 * positions * C);
	return positions * layers * (block + 2 * keys * C) + head * C * V;
}

void at_fwd_describe(const at_fwd *e, char *buf, size_t len)
{
	snprintf(buf, len, "%s (%s)",
		 e->gpu ? at_cuda_device_name() : "CPU",
		 at_precision_name(e->precision));
}

void at_fwd_activation_header(at_tensor *t, const char *name, int layer,
			      int H, int D, int rank, const uint64_t *dims)
{
	static const char *const head[] = {"q", "k", "v", "scores", "attn",
					   "out", "y", "result"};
	at_attrs *a = &t->attrs;
	memset(t, 0, sizeof *t);
	t->dtype = AT_F32;
	t->rank = rank;
	memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
	snprintf(t->name, sizeof t->name, "%s", name);
	int at = -1;
	for (int i = 0; i < (int)(sizeof head / sizeof *head); i++)
		if (strcmp(name, head[i]) == 0)
			at = i;
	if (layer >= 0)
		at_attr_setf(a, "layer", "%d", layer);
	if (at >= 0) {
		at_attr_set(a, "norm", "ln1");
		at_attr_setf(a, "n_head", "%d", H);
	}
	if (at >= 3) {
		float scale = (float)(1.0 / sqrt((double)D));
		at_attr_setf(a, "scale", "%.9g", scale);
		at_attr_set(a, "mask", "causal");
		at_attr_setf(a, "fill", "%.9g", -INFINITY);
	}
}
