/* andrea-qkv - project x into per-head queries, keys and values.
 *
 * h = LN1(x) (or x itself with --no-norm); Q = h.Wq, K = h.Wk, V = h.Wv,
 * each split into heads: [B,T,C] -> [B,H,T,D].  --head I computes only the
 * D columns of head I.
 */
#include <stdlib.h>
#include <string.h>

#include "filter.h"
#include "ops.h"
#include "ops_cuda.h"
#include "stage.h"

static const char usage[] =
	"usage: andrea-qkv [-f] [-o FILE] [-m MODEL] [--seed S] [--heads N]\n"
	"                  [-l LAYER] [--no-norm] [--head I] [--keep]\n"
	"                  [--device DEV] [--tf32] [-z LEVEL] [--threads N]\n"
	"                  [--no-shuffle] [FILE]\n";

enum { OPT_NO_NORM = CLI_FIRST_OWN, OPT_HEAD, OPT_TF32 };

typedef struct {
	at_model model;
	int layer, norm, head; /* head -1: all heads */
	at_device dev;
	int tf32;              /* --tf32: TF32 products on the GPU */
	/* loaded before any output: LN1 and Wq, Wk, Wv (only head's D
	 * columns with --head) */
	at_tensor ln_w, ln_b;
	float *w[3];
} qkv_ctx;

/* Columns [c0, c0+n) of the row-major matrix w[rows, cols]. */
static float *columns(const float *w, int rows, int cols, int c0, int n)
{
	float *out = malloc((size_t)rows * n * sizeof *out);
	if (!out)
		cli_die("out of memory");
	for (int r = 0; r < rows; r++)
		memcpy(out + (size_t)r * n, w + (size_t)r * cols + c0,
		       (size_t)n * sizeof *out);
	return out;
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
	for (int m = 0; m < 3; m++) {
		at_tensor wm;
		snprintf(name, sizeof name, "layers.%d.attn.w%s", q->layer, which[m]);
		stage_param(&q->model, name, &wm, 2, C, C);
		if (q->head >= 0) {
			q->w[m] = columns(wm.data, C, C, q->head * D, D);
			at_tensor_free(&wm);
		} else {
			q->w[m] = wm.data; /* take the buffer over */
		}
	}
}

/* Writes the three outputs of record x, computed on the GPU. */
static void qkv_cuda(qkv_ctx *q, const at_tensor *x, int B, int T, int heads,
		     int D, at_writer *w)
{
	at_tensor out[3];
	uint64_t dims[4] = {(uint64_t)B, (uint64_t)heads, (uint64_t)T,
			    (uint64_t)D};
	for (int m = 0; m < 3; m++)
		if (at_tensor_init(&out[m], which[m], AT_F32, 4, dims) < 0)
			cli_die("out of memory");
	stage_cuda_check(at_cuda_qkv_host(
		out[0].data, out[1].data, out[2].data, x->data,
		q->norm ? q->ln_w.data : NULL, q->norm ? q->ln_b.data : NULL,
		(const float *const *)q->w, B, T, (int)x->dims[2], heads, D,
		q->tf32));
	for (int m = 0; m < 3; m++) {
		label(q, &out[m], x);
		at_filter_write(w, &out[m]);
		at_tensor_free(&out[m]);
	}
}

static void qkv_run(at_filter *f, at_tensor *in, at_writer *w)
{
	qkv_ctx *q = f->ctx;
	const at_config *cfg = &q->model.cfg;
	at_tensor *x = &in[0];
	at_filter_expect(f, 0, x, 3, "B,T,C");
	int B = (int)x->dims[0], T = (int)x->dims[1], C = (int)x->dims[2];
	if (C != cfg->d_model)
		at_filter_die(f, 0, "C=%d but the model has C=%d", C, cfg->d_model);
	int H = cfg->n_head, D = C / H;
	int heads = q->head >= 0 ? 1 : H, cols = heads * D;
	size_t rows = (size_t)B * T;

	if (q->dev == AT_DEV_CUDA) {
		qkv_cuda(q, x, B, T, heads, D, w);
		return;
	}
	float *h = x->data, *normed = NULL;
	if (q->norm) {
		if (!(normed = malloc(rows * C * sizeof *normed + 1)))
			cli_die("out of memory");
		at_layernorm_forward(normed, x->data, q->ln_w.data, q->ln_b.data,
				     (int)rows, C, 1e-5f);
		h = normed;
	}
	float *proj = malloc(rows * cols * sizeof *proj + 1);
	if (!proj)
		cli_die("out of memory");
	for (int m = 0; m < 3; m++) {
		at_tensor out;
		at_matmul(proj, h, q->w[m], (int)rows, C, cols, 0, 1.0f);
		uint64_t dims[4] = {(uint64_t)B, (uint64_t)heads, (uint64_t)T,
				    (uint64_t)D};
		if (at_tensor_init(&out, which[m], AT_F32, 4, dims) < 0)
			cli_die("out of memory");
		at_split_heads(out.data, proj, B, T, heads, D);
		label(q, &out, x);
		at_filter_write(w, &out);
		at_tensor_free(&out);
	}
	free(proj);
	free(normed);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-qkv", &c);
	static const struct option longopts[] = {
		CLI_COMMON_LONG, CLI_STAGE_LONG, CLI_MODEL_LONG,
		{"layer", required_argument, 0, 'l'},
		{"no-norm", no_argument, 0, OPT_NO_NORM},
		{"head", required_argument, 0, OPT_HEAD},
		{"tf32", no_argument, 0, OPT_TF32},
		{0}};
	qkv_ctx q = {.layer = 0, .norm = 1, .head = -1};
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, CLI_COMMON_SHORT CLI_STAGE_SHORT "l:",
				  longopts, NULL)) != -1) {
		if (opt == 'l')
			q.layer = (int)cli_long(optarg, 0, 1 << 20, "-l/--layer");
		else if (opt == OPT_NO_NORM)
			q.norm = 0;
		else if (opt == OPT_HEAD)
			q.head = (int)cli_long(optarg, 0, 1 << 20, "--head");
		else if (opt == OPT_TF32)
			q.tf32 = 1;
		else if (!cli_common_opt(&c, opt, optarg, usage))
			cli_bad_option(argv);
	}
	if (argc - optind > 1)
		cli_usage_error("too many operands (see %s --help)", cli_prog);
	q.dev = stage_device(&c, 1);
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
	at_filter_main(&c, &f, argc > optind ? argv[optind] : NULL);
	for (int m = 0; m < 3; m++)
		free(q.w[m]);
	at_tensor_free(&q.ln_w);
	at_tensor_free(&q.ln_b);
	at_model_close(&q.model);
	return 0;
}
