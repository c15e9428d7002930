/* andrea-qkv - project x into per-head queries, keys and values.
 *
 * h = LN1(x) (or x itself with --no-norm); Q = h.Wq, K = h.Wk, V = h.Wv,
 * each split into heads: [B,T,C] -> [B,H,T,D].  --head I computes only the
 * D columns of head I.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cli/filter.h"
#include "ops/ops.h"
#include "ops/stages.h"
#include "cli/stage.h"

#include "help/andrea-qkv.h" /* usage: the --help text */

typedef struct {
	at_model model;
	int layer, norm, head; /* head -1: all heads */
	at_exec exec;          /* the device; --tf32: TF32 products on the GPU */
	/* loaded before any output: LN1, and Wq, Wk, Wv side by side as one
	 * [C, 3*cols] matrix (cols = C, or head's D columns with --head), so
	 * the three projections are one matrix product */
	at_tensor ln_w, ln_b;
	float *wqkv;
	int cols;
	float *bias[3];        /* bq, bk, bv: their cols, where the model has them */
} qkv_ctx;

/* Copies columns [c0, c0+n) of w[rows, cols] into columns [d0, d0+n) of
 * out, whose rows are ld floats long. */
static void copy_columns(float *out, size_t ld, int d0, const float *w,
			 int rows, int cols, int c0, int n)
{
	for (int r = 0; r < rows; r++)
		memcpy(out + (size_t)r * ld + d0, w + (size_t)r * cols + c0,
		       (size_t)n * sizeof *out);
}

static const char *const which[] = {"q", "k", "v"};

/* The attributes of an output: x's, then layer, norm, n_head, head. */
static void label(const qkv_ctx *q, at_tensor *out, const at_tensor *x)
{
	out->attrs = x->attrs;
	at_attr_setf(&out->attrs, "layer", "%d", q->layer);
	at_attr_set(&out->attrs, "norm", q->norm ? "ln1" : "none");
	at_attr_setf(&out->attrs, "n_head", "%d", q->model.cfg.n_head);
	if (q->head >= 0)
		at_attr_setf(&out->attrs, "head", "%d", q->head);
}

static void load_params(qkv_ctx *q)
{
	int C = q->model.cfg.d_model, D = C / q->model.cfg.n_head;
	char name[64];
	if (q->norm) {
		snprintf(name, sizeof name, "layers.%d.ln1.weight", q->layer);
		stage_param(&q->model, name, &q->ln_w, 1, C);
		snprintf(name, sizeof name, "layers.%d.ln1.bias", q->layer);
		stage_param(&q->model, name, &q->ln_b, 1, C);
	}
	q->cols = q->head >= 0 ? D : C;
	if (!(q->wqkv = malloc((size_t)C * 3 * q->cols * sizeof *q->wqkv)))
		cli_die("out of memory");
	for (int m = 0; m < 3; m++) {
		at_tensor wm;
		snprintf(name, sizeof name, "layers.%d.attn.w%s", q->layer, which[m]);
		stage_param(&q->model, name, &wm, 2, C, C);
		copy_columns(q->wqkv, 3 * (size_t)q->cols, m * q->cols, wm.data, C,
			     C, q->head >= 0 ? q->head * D : 0, q->cols);
		at_tensor_free(&wm);
		snprintf(name, sizeof name, "layers.%d.attn.b%s", q->layer,
			 which[m]);
		if (!at_model_has(&q->model, name))
			continue;
		stage_param(&q->model, name, &wm, 1, C);
		if (!(q->bias[m] = malloc((size_t)q->cols * sizeof *q->bias[m])))
			cli_die("out of memory");
		memcpy(q->bias[m], (float *)wm.data + (q->head >= 0 ? q->head * D : 0),
		       (size_t)q->cols * sizeof *q->bias[m]);
		at_tensor_free(&wm);
	}
}

/* t[B,heads,T,D] += b[heads*D], head by head (on the host, whichever
 * device made t). */
static void add_head_bias(float *t, const float *b, int B, int heads, int T,
			  int D)
{
	for (int i = 0; i < B * heads; i++)
		at_add_bias(t + (size_t)i * T * D, b + (size_t)(i % heads) * D,
			    (size_t)T, (size_t)D);
}

static void qkv_run(at_filter *f, at_tensor *in, at_writer *w)
{
	qkv_ctx *q = f->ctx;
	const at_config *cfg = &q->model.cfg;
	at_tensor *x = &in[0];
	at_filter_expect(f, 0, x, 3, "B,T,C");
	at_filter_expect_count(f, 0, x, 0, 2, INT_MAX, "B*T", "rows");
	int B = (int)x->dims[0], T = (int)x->dims[1], C = (int)x->dims[2];
	if (C != cfg->d_model)
		at_filter_die(f, 0, "C=%d but the model has C=%d", C, cfg->d_model);
	int H = cfg->n_head, D = C / H;
	int heads = q->head >= 0 ? 1 : H;
	at_tensor out[3];
	uint64_t dims[4] = {(uint64_t)B, (uint64_t)heads, (uint64_t)T,
			    (uint64_t)D};
	for (int m = 0; m < 3; m++)
		if (at_tensor_init(&out[m], which[m], AT_F32, 4, dims) < 0)
			cli_die("out of memory");
	const float *ln_w = q->norm ? q->ln_w.data : NULL;
	stage_check(at_stage_qkv(&q->exec, out[0].data, out[1].data, out[2].data,
				 x->data, ln_w, q->ln_b.data, q->wqkv, B, T, C,
				 heads, D));
	for (int m = 0; m < 3; m++)
		if (q->bias[m])
			add_head_bias(out[m].data, q->bias[m], B, heads, T, D);
	/* v first: andrea-attend, which needs v whole before it can use the
	 * probabilities made from q and k, then uses them as they arrive */
	static const int order[] = {2, 0, 1};
	for (int i = 0; i < 3; i++) {
		int m = order[i];
		label(q, &out[m], x);
		at_filter_write(w, &out[m]);
		at_tensor_free(&out[m]);
	}
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-qkv", &c);
	qkv_ctx q = {.layer = 0, .norm = 1, .head = -1};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE | CLI_USE_MODEL),
		CLI_INT("layer", 'l', &q.layer, 0, INT_MAX),
		CLI_UNFLAG("no-norm", 0, &q.norm),
		CLI_INT("head", 0, &q.head, 0, INT_MAX),
		CLI_FLAG("tf32", 0, &q.exec.tf32),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	q.exec.dev = stage_device_lazy(&c);
	stage_open_model(&c, &q.model);
	char err[600];
	if (at_model_need_heads(&q.model, err, sizeof err) < 0 ||
	    at_model_check_layer(&q.model, q.layer, err, sizeof err) < 0)
		cli_die("%s", err);
	if (q.head >= q.model.cfg.n_head)
		cli_die("--head %d: the model has %d heads (0..%d)", q.head,
			q.model.cfg.n_head, q.model.cfg.n_head - 1);
	load_params(&q);
	at_filter f = {.inputs = {"x"}, .n_inputs = 1, .run = qkv_run, .ctx = &q};
	at_filter_main(&c, &f, operand.v[0]);
	free(q.wqkv);
	for (int m = 0; m < 3; m++)
		free(q.bias[m]);
	at_tensor_free(&q.ln_w);
	at_tensor_free(&q.ln_b);
	at_model_close(&q.model);
	return 0;
}
