/* andrea-lens - what each layer's residual stream already predicts (the
 * logit lens), and how much each head adds directly to one token's logit
 * (direct logit attribution).
 *
 * One run of the whole model over a tokens record.  The lens: the stream
 * after the embedding and after each block, through the final LayerNorm
 * and the head, as the top --top tokens and their logits at every
 * position.  The attribution (with --token): at the last position, each
 * head's share of the residual stream (its output times its rows of Wo),
 * centred and divided by the final LayerNorm's standard deviation of the
 * whole stream, times the LayerNorm's weight and the token's column of
 * the head (minus --versus's); the shares of every head and of the rest
 * (embedding, biases, MLPs), with the LayerNorm's bias, add up to the
 * logit (difference) itself.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "model/arch.h"
#include "ops/forward.h"
#include "ops/prenorm.h"
#include "ops/weights.h"

#include "help/andrea-lens.h" /* usage: the --help text */

typedef struct {
	const at_weights *w;
	int B, T, K;
	float *resid;   /* [L+1,B,T,C]: the stream after the embedding and each block */
	float *shares;  /* [L,H,B,C]: each head's share at the last position */
} lens_ctx;

/* The hook: keeps x after the embedding and each block, and each head's
 * share z_h . Wo[hD:(h+1)D, :] of the last position. */
static int keep(void *ctx, const char *name, int layer, float *data, int rank,
		const uint64_t *dims)
{
	lens_ctx *s = ctx;
	const at_weights *w = s->w;
	int C = w->C, H = w->H, D = C / H, B = s->B, T = s->T;
	if (strcmp(name, "x") == 0 && layer + 1 <= w->L)
		memcpy(s->resid + (size_t)(layer + 1) * B * T * C, data,
		       (size_t)B * T * C * sizeof *data);
	if (strcmp(name, "out") == 0 && layer >= 0 && layer < w->L) {
		const float *wo = w->layer[layer].wo;
		for (int h = 0; h < H; h++)
			for (int b = 0; b < B; b++) {
				const float *z = data + (((size_t)b * H + h) * T + T - 1) * D;
				float *out = s->shares + (((size_t)layer * H + h) * B + b) * C;
				for (int c = 0; c < C; c++) {
					double sum = 0.0;
					for (int d = 0; d < D; d++)
						sum += (double)z[d] * wo[(size_t)(h * D + d) * C + c];
					out[c] = (float)sum;
				}
			}
	}
	(void)rank, (void)dims;
	return 0;
}

static int wanted(void *ctx, const char *name, int layer)
{
	(void)ctx, (void)layer;
	return strcmp(name, "x") == 0 || strcmp(name, "out") == 0 ?
		AT_HOOK_READ : AT_HOOK_SKIP;
}

/* Column v of the head (lm_head [C,V], or wte^T for a tied one), element c. */
static double head_at(const at_weights *w, int c, int v)
{
	return w->lm_head ? w->lm_head[(size_t)c * w->V + v]
			  : w->wte[(size_t)v * w->C + c];
}

/* 1 where logit a (id ia) ranks below b (id ib): smaller, or equal
 * with the larger id. */
static int below(float a, int ia, float b, int ib)
{
	return a < b || (a == b && ia > ib);
}

/* The top K of n logits z into ids and vals, largest first (the lower id
 * of equals first): a min-heap of the K best, O(n log K). */
static void top_k(const float *z, int n, int K, int32_t *ids, float *vals)
{
	int held = 0;
	for (int v = 0; v < n; v++) {
		int i;
		if (held < K) { /* sift up */
			for (i = held++; i > 0 && below(z[v], v, vals[(i - 1) / 2],
						       ids[(i - 1) / 2]); i = (i - 1) / 2)
				ids[i] = ids[(i - 1) / 2], vals[i] = vals[(i - 1) / 2];
		} else if (below(vals[0], ids[0], z[v], v)) { /* sift down */
			for (i = 0;;) {
				int k = 2 * i + 1;
				if (k >= K)
					break;
				if (k + 1 < K && below(vals[k + 1], ids[k + 1], vals[k], ids[k]))
					k++;
				if (!below(vals[k], ids[k], z[v], v))
					break;
				ids[i] = ids[k], vals[i] = vals[k];
				i = k;
			}
		} else {
			continue;
		}
		ids[i] = v;
		vals[i] = z[v];
	}
	/* the heap popped smallest first, into the back */
	for (int end = K - 1; end > 0; end--) {
		int32_t ti = ids[0];
		float tv = vals[0];
		ids[0] = ids[end], vals[0] = vals[end];
		ids[end] = ti, vals[end] = tv;
		for (int i = 0;;) {
			int k = 2 * i + 1;
			if (k >= end)
				break;
			if (k + 1 < end && below(vals[k + 1], ids[k + 1], vals[k], ids[k]))
				k++;
			if (!below(vals[k], ids[k], vals[i], ids[i]))
				break;
			int32_t si = ids[i];
			float sv = vals[i];
			ids[i] = ids[k], vals[i] = vals[k];
			ids[k] = si, vals[k] = sv;
			i = k;
		}
	}
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-lens", &c);
	int K = 5;
	long token = -1, versus = -1;
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_DEVICE | CLI_USE_MODEL),
		CLI_INT("top", 0, &K, 1, 1 << 16),
		CLI_LONG("token", 0, &token, 0, 1L << 30),
		CLI_LONG("versus", 0, &versus, 0, 1L << 30),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	if (versus >= 0 && token < 0)
		cli_usage_error("--versus needs --token");
	stage_check_device(&c, AT_PREC_FP32);
	at_model model;
	stage_open_model_heads(&c, &model);
	const at_config *cfg = &model.cfg;
	int V = cfg->vocab, L = cfg->n_layer, H = cfg->n_head, C = cfg->d_model;
	if (token >= V || versus >= V)
		cli_usage_error("--%s %ld: the model has V=%d",
				token >= V ? "token" : "versus",
				token >= V ? token : versus, V);
	if (K > V)
		K = V;
	at_tensor t;
	char label[4400];
	cli_tokens_from_stream(&c, operand.n ? operand.v[0] : NULL, &t, label,
			       sizeof label);
	stage_check_tokens(&model, &t, label);
	cli_tokens_whole_rows(&t, label);
	int B = (int)t.dims[0], T = (int)t.dims[1];
	at_loaded wts;
	at_fwd *e = stage_whole_model(&c, &model, &wts, (double)B * T, T,
				      (double)B * T * (L + 2));
	const at_weights *w = &wts.w;
	char err[600];
	size_t BT = (size_t)B * T;
	lens_ctx s = {.w = w, .B = B, .T = T, .K = K};
	s.resid = malloc((size_t)(L + 1) * BT * C * sizeof *s.resid);
	s.shares = malloc((size_t)L * H * B * C * sizeof *s.shares + 1);
	float *logits = malloc(BT * V * sizeof *logits);
	float *ln = malloc(BT * C * sizeof *ln);
	at_tensor lt = {0}, lv = {0};
	uint64_t ldims[4] = {(uint64_t)L + 1, (uint64_t)B, (uint64_t)T, (uint64_t)K};
	if (!s.resid || !s.shares || !logits || !ln ||
	    at_tensor_init(&lt, "lens_tokens", AT_I32, 4, ldims) < 0 ||
	    at_tensor_init(&lv, "lens_logits", AT_F32, 4, ldims) < 0)
		cli_die("out of memory");
	at_attr_set(&lt.attrs, "axes", "depth,row,position,rank");
	at_attr_set(&lv.attrs, "axes", "depth,row,position,rank");
	at_hook hook = {.fn = keep, .wants = wanted, .ctx = &s};
	at_fwd_set_hook(e, &hook);
	if (at_fwd_logits(e, logits, t.data, B, T, err, sizeof err) != 0)
		cli_die("%s", err);
	at_fwd_set_hook(e, NULL);
	/* the lens: each stream through the final LayerNorm and the head */
	for (int l = 0; l <= L; l++) {
		float *z = logits; /* reused: the lens's logits of one stream */
		at_head_run(w->lnf_w, w->lnf_b, w->lm_head, w->wte, ln, NULL, NULL,
			    z, s.resid + (size_t)l * BT * C, (int)BT, C, V);
		for (size_t i = 0; i < BT; i++)
			top_k(z + i * V, V, K, (int32_t *)lt.data + ((size_t)l * BT + i) * K,
			      (float *)lv.data + ((size_t)l * BT + i) * K);
	}
	at_writer out;
	cli_open_output(&c, &out);
	if (at_write_tensor(&out, &t) < 0 || at_write_tensor(&out, &lt) < 0 ||
	    at_write_tensor(&out, &lv) < 0)
		cli_fail(out.err);
	if (token >= 0) {
		/* the final stream's LayerNorm statistics at the last position */
		at_tensor at;
		uint64_t adims[2] = {(uint64_t)L, (uint64_t)H};
		if (at_tensor_init(&at, "attribution", AT_F32, 2, adims) < 0)
			cli_die("out of memory");
		double logit = 0.0, sum_heads = 0.0;
		for (int b = 0; b < B; b++) {
			const float *x = s.resid + ((size_t)L * BT + (size_t)b * T + T - 1) * C;
			double mean = 0.0, var = 0.0;
			for (int ci = 0; ci < C; ci++)
				mean += x[ci];
			mean /= C;
			for (int ci = 0; ci < C; ci++)
				var += (x[ci] - mean) * (x[ci] - mean);
			double rstd = 1.0 / sqrt(var / C + AT_LN_EPS);
			for (int ci = 0; ci < C; ci++) {
				double u = head_at(w, ci, (int)token) -
					   (versus >= 0 ? head_at(w, ci, (int)versus) : 0.0);
				logit += ((x[ci] - mean) * rstd * w->lnf_w[ci] + w->lnf_b[ci]) * u / B;
			}
			for (int k = 0; k < L * H; k++) {
				const float *r = s.shares + ((size_t)k * B + b) * C;
				double m = 0.0, a = 0.0;
				for (int ci = 0; ci < C; ci++)
					m += r[ci];
				m /= C;
				for (int ci = 0; ci < C; ci++) {
					double u = head_at(w, ci, (int)token) -
						   (versus >= 0 ? head_at(w, ci, (int)versus) : 0.0);
					a += (r[ci] - m) * rstd * w->lnf_w[ci] * u;
				}
				if (b == 0)
					((float *)at.data)[k] = 0.0f;
				((float *)at.data)[k] += (float)(a / B);
				sum_heads += a / B;
			}
		}
		at_attr_set(&at.attrs, "axes", "layer,head");
		at_attr_setf(&at.attrs, "token", "%ld", token);
		if (versus >= 0)
			at_attr_setf(&at.attrs, "versus", "%ld", versus);
		at_attr_setf(&at.attrs, "logit", "%.9g", logit);
		at_attr_setf(&at.attrs, "rest", "%.9g", logit - sum_heads);
		if (at_write_tensor(&out, &at) < 0)
			cli_fail(out.err);
		at_tensor_free(&at);
	}
	cli_finish_output(&out);
	free(s.resid);
	free(s.shares);
	free(logits);
	free(ln);
	at_tensor_free(&lt);
	at_tensor_free(&lv);
	at_tensor_free(&t);
	at_fwd_free(e);
	at_weights_free(&wts);
	at_model_close(&model);
	return 0;
}
