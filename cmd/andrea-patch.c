/* andrea-patch - activation patching swept over a model: which heads, or
 * which positions of which layers, carry what a clean input's answer
 * needs.
 *
 * A clean and a corrupted input of the same shape, and a metric: the
 * logit of --answer minus that of --wrong at the last position, averaged
 * over the batch's rows.  The clean run's activations are kept; then for
 * each head of each layer (--sweep heads: its output, out, before Wo), or
 * each position of the residual stream entering each layer (--sweep
 * positions), the corrupted input runs with that one activation put back
 * from the clean run.  The effect of each is (patched - corrupted) /
 * (clean - corrupted): 1 where the patch restores the clean answer, 0
 * where it changes nothing.  Written as an `effect` record [L,H] or
 * [L,T], or with --table as a table.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "ops/forward.h"
#include "ops/weights.h"

#include "help/andrea-patch.h" /* usage: the --help text */

typedef enum { KEEP, PATCH } mode;

typedef struct {
	mode mode;
	int L, H, B, T, D, C;
	float **out;  /* the clean run's out of each layer, [B,H,T,D] */
	float **pre;  /* the clean run's x entering each layer, [B,T,C] */
	int layer, head, pos; /* PATCH: the one activation put back */
	int heads;    /* sweeping heads (else positions) */
} run_ctx;

/* The hook: the clean run keeps, a patched run puts one activation back.
 * x at layer l-1 (-1: the embedding) is what enters layer l. */
static int hook_fn(void *ctx, const char *name, int layer, float *data,
		   int rank, const uint64_t *dims)
{
	run_ctx *r = ctx;
	int is_out = strcmp(name, "out") == 0, is_x = strcmp(name, "x") == 0;
	int enters = layer + 1; /* the layer an x enters */
	if (r->mode == KEEP) {
		if (is_out && layer >= 0 && layer < r->L)
			memcpy(r->out[layer], data,
			       (size_t)r->B * r->H * r->T * r->D * sizeof *data);
		if (is_x && enters < r->L)
			memcpy(r->pre[enters], data,
			       (size_t)r->B * r->T * r->C * sizeof *data);
		return 0;
	}
	size_t TD = (size_t)r->T * r->D;
	if (r->heads && is_out && layer == r->layer)
		for (int b = 0; b < r->B; b++) {
			size_t at = ((size_t)b * r->H + r->head) * TD;
			memcpy(data + at, r->out[layer] + at, TD * sizeof *data);
		}
	if (!r->heads && is_x && enters == r->layer)
		for (int b = 0; b < r->B; b++) {
			size_t at = ((size_t)b * r->T + r->pos) * r->C;
			memcpy(data + at, r->pre[enters] + at, r->C * sizeof *data);
		}
	(void)rank, (void)dims;
	return 0;
}

/* The metric of one run: mean over rows of the answer's logit minus the
 * wrong one's, at the last position. */
static double run_metric(at_fwd *e, float *logits, const int32_t *tok, int B,
			 int T, int V, int answer, int wrong)
{
	char err[600];
	if (at_fwd_logits(e, logits, tok, B, T, err, sizeof err) != 0)
		cli_die("%s", err);
	double sum = 0.0;
	for (int b = 0; b < B; b++) {
		const float *z = logits + ((size_t)b * T + T - 1) * V;
		sum += (double)z[answer] - z[wrong];
	}
	return sum / B;
}

static int token_id(const char *arg, const char *what, int V)
{
	long id = cli_long(arg, 0, 1L << 30, what);
	if (id >= V)
		cli_usage_error("%s %ld: the model has V=%d", what, id, V);
	return (int)id;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-patch", &c);
	const char *clean_path = NULL, *corrupt_path = NULL, *sweep = "heads";
	const char *answer_arg = NULL, *wrong_arg = NULL;
	int table = 0;
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_DEVICE | CLI_USE_MODEL),
		CLI_STRING("clean", 0, &clean_path),
		CLI_STRING("corrupted", 0, &corrupt_path),
		CLI_STRING("answer", 0, &answer_arg),
		CLI_STRING("wrong", 0, &wrong_arg),
		CLI_STRING("sweep", 0, &sweep),
		CLI_FLAG("table", 0, &table),
		CLI_END};
	cli_parse(&c, opts, usage, 0, argc, argv);
	if (!clean_path || !corrupt_path || !answer_arg || !wrong_arg)
		cli_usage_error("--clean, --corrupted, --answer and --wrong are "
				"all needed (see %s --help)", cli_prog);
	int heads = strcmp(sweep, "heads") == 0;
	if (!heads && strcmp(sweep, "positions") != 0)
		cli_usage_error("--sweep '%s': expected heads or positions", sweep);
	if (table && c.output)
		cli_usage_error("--table prints to standard output; -o writes the "
				"record");
	stage_check_device(&c, AT_PREC_FP32);
	if (c.device && strcmp(c.device, "cuda") == 0)
		cli_usage_error("device cuda (--device or ANDREA_DEVICE): patching "
				"changes activations on the CPU only in this version");
	c.device = "cpu";
	at_model model;
	stage_open_model_heads(&c, &model);
	const at_config *cfg = &model.cfg;
	int V = cfg->vocab, answer = token_id(answer_arg, "--answer", V);
	int wrong = token_id(wrong_arg, "--wrong", V);
	at_tensor clean, corrupt;
	cli_tokens_from_stream(&c, clean_path, &clean);
	cli_tokens_from_stream(&c, corrupt_path, &corrupt);
	if (clean.dims[0] != corrupt.dims[0] || clean.dims[1] != corrupt.dims[1])
		cli_die("%s and %s: the clean and corrupted tokens must have the "
			"same shape", clean_path, corrupt_path);
	stage_check_tokens(&model, &clean, clean_path);
	stage_check_tokens(&model, &corrupt, corrupt_path);
	int B = (int)clean.dims[0], T = (int)clean.dims[1];
	int L = cfg->n_layer, H = cfg->n_head, C = cfg->d_model;
	at_loaded wts;
	at_fwd *e = stage_whole_model(&c, &model, &wts, (double)B * T, T,
				      (double)B * T); /* c.device is cpu */
	run_ctx r = {.mode = KEEP, .L = L, .H = H, .B = B, .T = T, .D = C / H,
		     .C = C, .heads = heads};
	r.out = calloc((size_t)L, sizeof *r.out);
	r.pre = calloc((size_t)L, sizeof *r.pre);
	float *logits = malloc((size_t)B * T * V * sizeof *logits);
	int W = heads ? H : T;
	float *effect = malloc((size_t)L * W * sizeof *effect);
	if (!r.out || !r.pre || !logits || !effect)
		cli_die("out of memory");
	for (int l = 0; l < L; l++)
		if (!(r.out[l] = malloc((size_t)B * C * T * sizeof(float))) ||
		    !(r.pre[l] = malloc((size_t)B * C * T * sizeof(float))))
			cli_die("out of memory");
	at_hook hook = {hook_fn, &r};
	at_fwd_set_hook(e, &hook);
	double m_clean = run_metric(e, logits, clean.data, B, T, V, answer, wrong);
	r.mode = PATCH;
	r.layer = -1; /* nothing put back */
	double m_corrupt = run_metric(e, logits, corrupt.data, B, T, V, answer,
				      wrong);
	double span = m_clean - m_corrupt;
	for (int l = 0; l < L; l++)
		for (int i = 0; i < W; i++) {
			r.layer = l;
			r.head = i;
			r.pos = i;
			double m = run_metric(e, logits, corrupt.data, B, T, V, answer,
					      wrong);
			effect[(size_t)l * W + i] = span != 0.0 ?
				(float)((m - m_corrupt) / span) : NAN;
		}
	if (table) {
		printf("# logit difference: clean %.6g, corrupted %.6g\n", m_clean,
		       m_corrupt);
		printf("layer %s  effect\n", heads ? "head" : "position");
		for (int l = 0; l < L; l++)
			for (int i = 0; i < W; i++)
				printf("%5d %*d  %.4f\n", l, heads ? 4 : 8, i,
				       effect[(size_t)l * W + i]);
		cli_finish_text();
	} else {
		uint64_t dims[2] = {(uint64_t)L, (uint64_t)W};
		at_tensor t = {.dtype = AT_F32, .rank = 2, .data = effect};
		memcpy(t.dims, dims, sizeof dims);
		snprintf(t.name, sizeof t.name, "effect");
		at_attr_set(&t.attrs, "sweep", heads ? "heads" : "positions");
		at_attr_setf(&t.attrs, "clean", "%.9g", m_clean);
		at_attr_setf(&t.attrs, "corrupted", "%.9g", m_corrupt);
		at_attr_setf(&t.attrs, "answer", "%d", answer);
		at_attr_setf(&t.attrs, "wrong", "%d", wrong);
		at_writer w;
		cli_open_output(&c, &w);
		if (at_write_tensor(&w, &t) < 0)
			cli_fail(w.err);
		cli_finish_output(&w);
	}
	for (int l = 0; l < L; l++) {
		free(r.out[l]);
		free(r.pre[l]);
	}
	free(r.out);
	free(r.pre);
	free(logits);
	free(effect);
	at_fwd_free(e);
	at_weights_free(&wts);
	at_tensor_free(&clean);
	at_tensor_free(&corrupt);
	at_model_close(&model);
	return 0;
}
