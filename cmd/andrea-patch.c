/* andrea-patch - activation patching swept over a model: which heads, or
 * which positions of which layers, carry what a clean input's answer
 * needs.
 *
 * A clean and a corrupted input of the same shape, and a metric: the
 * logit of --answer minus that of --wrong at the last position, averaged
 * over the batch's rows.  The clean and the corrupted runs' activations
 * are kept; then for each head of each layer (--sweep heads: its output,
 * out, before Wo), or each position of the residual stream entering each
 * layer (--sweep positions), the corrupted input runs with that one
 * activation put back from the clean run.  The effect of each is
 * (patched - corrupted) / (clean - corrupted): 1 where the patch restores
 * the clean answer, 0 where it changes nothing.  Written as an `effect`
 * record [L,H] or [L,T], or with --table as a table.
 *
 * A patch in layer l leaves the layers below it as the corrupted run had
 * them, so each patched run starts from the corrupted stream entering
 * layer l; and the patches of one layer run side by side as the rows of
 * one batch (row g*B + b: the g-th patch of the group on row b).
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

/* Positions, and score elements, one batch of patched runs may hold. */
#define GROUP_POSITIONS (1 << 15)
#define GROUP_SCORES ((double)(1 << 26))

typedef struct {
	int L, H, B, T, D, C;
	float **out;   /* the clean run's out of each layer, [B,H,T,D] */
	float **pre[2]; /* the clean [0] and corrupted [1] runs' x entering
			 * each layer, [B,T,C], and [L] leaving the last */
	int run;       /* which run keeps its activations: 0, 1, or -1 for
			* a batch of patched heads */
	int layer, first; /* a batch: the layer, its first head */
} sweep_ctx;

/* The hook.  The clean and corrupted runs keep (x at layer l-1, -1 the
 * embedding, is what enters layer l); a batch of patched heads puts head
 * first + g back into its rows g*B .. g*B + B-1. */
static int hook_fn(void *ctx, const char *name, int layer, float *data,
		   int rank, const uint64_t *dims)
{
	sweep_ctx *s = ctx;
	size_t BTC = (size_t)s->B * s->T * s->C, TD = (size_t)s->T * s->D;
	int enters = layer + 1; /* the layer an x enters */
	if (s->run >= 0) {
		if (strcmp(name, "out") == 0 && s->run == 0)
			memcpy(s->out[layer], data, BTC * sizeof *data);
		if (strcmp(name, "x") == 0 && enters <= s->L)
			memcpy(s->pre[s->run][enters], data, BTC * sizeof *data);
		return 0;
	}
	if (strcmp(name, "out") != 0 || layer != s->layer)
		return 0;
	size_t rows = dims[0];
	for (size_t r = 0; r < rows; r++) {
		size_t b = r % s->B, h = (size_t)s->first + r / s->B;
		memcpy(data + (r * s->H + h) * TD,
		       s->out[layer] + (b * s->H + h) * TD, TD * sizeof *data);
	}
	(void)rank;
	return 0;
}

static int hook_wants(void *ctx, const char *name, int layer)
{
	sweep_ctx *s = ctx;
	if (s->run >= 0)
		return strcmp(name, "x") == 0 || (s->run == 0 &&
						  strcmp(name, "out") == 0) ?
			AT_HOOK_READ : AT_HOOK_SKIP;
	return strcmp(name, "out") == 0 && layer == s->layer ? AT_HOOK_WRITE
							      : AT_HOOK_SKIP;
}

/* The logit difference of each row's last position: the head's sink. */
typedef struct {
	const float *x;
	float *metric;
	size_t row, V;
	int answer, wrong;
} metric_sink;

static int take_logits(void *ctx, const void *p, size_t n)
{
	metric_sink *m = ctx;
	const float *z = p;
	for (size_t i = 0; i < n / sizeof *z / m->V; i++, z += m->V)
		m->metric[m->row++] = z[m->answer] - z[m->wrong];
	return 0;
}

/* The metric of each of N rows of T positions of x [N,T,C] after the
 * model's last layer, into metric[N]; last [N,C] is scratch. */
static void row_metrics(at_fwd *e, const float *x, float *last, float *metric,
			int N, int T, int C, int V, int answer, int wrong)
{
	char err[600];
	for (int r = 0; r < N; r++)
		memcpy(last + (size_t)r * C, x + ((size_t)r * T + T - 1) * C,
		       (size_t)C * sizeof *last);
	metric_sink m = {.metric = metric, .V = (size_t)V, .answer = answer,
			 .wrong = wrong};
	if (at_fwd_head(e, last, N, take_logits, &m, err, sizeof err) != 0)
		cli_die("%s", err);
}

/* Layers l .. L-1 over x [N,T,C] in place. */
static void run_from(at_fwd *e, float *x, int l, int L, int N, int T)
{
	char err[600];
	int *layers = malloc((size_t)L * sizeof *layers + 1);
	if (!layers)
		cli_die("out of memory");
	for (int i = l; i < L; i++)
		layers[i - l] = i;
	int rc = at_fwd_blocks(e, x, N, T, layers, L - l, err, sizeof err);
	free(layers);
	if (rc)
		cli_die("%s", rc < 0 ? err : "the sweep's hook stopped the pass");
}

/* A whole run of tokens [B,T], keeping its activations (run 0 clean, 1
 * corrupted). */
static void keep_run(at_fwd *e, sweep_ctx *s, int run, const int32_t *tok,
		     float *logits)
{
	char err[600];
	s->run = run;
	if (at_fwd_logits(e, logits, tok, s->B, s->T, err, sizeof err) != 0)
		cli_die("%s", err);
}

/* The mean over the g-th B rows of metric. */
static double mean_of(const float *metric, int g, int B)
{
	double m = 0.0;
	for (int b = 0; b < B; b++)
		m += metric[(size_t)g * B + b];
	return m / B;
}

static int token_id(const char *arg, const char *what, int V)
{
	long id = cli_long(arg, 0, 1L << 30, what);
	if (id >= V)
		cli_usage_error("%s %ld: the model has V=%d", what, id, V);
	return (int)id;
}

static float *alloc_floats(size_t n)
{
	float *p = malloc(n * sizeof *p + 1);
	if (!p)
		cli_die("out of memory");
	return p;
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
	cli_stdin_once((const char *[]){clean_path, corrupt_path}, 2);
	int heads = strcmp(sweep, "heads") == 0;
	if (!heads && strcmp(sweep, "positions") != 0)
		cli_usage_error("--sweep '%s': expected heads or positions", sweep);
	if (table && c.output)
		cli_usage_error("--table prints to standard output; -o writes the "
				"record");
	stage_check_device(&c, AT_PREC_FP32);
	at_model model;
	stage_open_model_heads(&c, &model);
	const at_config *cfg = &model.cfg;
	int V = cfg->vocab, answer = token_id(answer_arg, "--answer", V);
	int wrong = token_id(wrong_arg, "--wrong", V);
	at_tensor clean, corrupt;
	char clean_label[4400], corrupt_label[4400];
	cli_tokens_from_stream(&c, clean_path, &clean, clean_label,
			       sizeof clean_label);
	cli_tokens_from_stream(&c, corrupt_path, &corrupt, corrupt_label,
			       sizeof corrupt_label);
	if (clean.dims[0] != corrupt.dims[0] || clean.dims[1] != corrupt.dims[1])
		cli_die("%s and %s: the clean and corrupted tokens must have the "
			"same shape", clean_path, corrupt_path);
	stage_check_tokens(&model, &clean, clean_label);
	stage_check_tokens(&model, &corrupt, corrupt_label);
	cli_tokens_whole_rows(&clean, clean_label);
	cli_tokens_whole_rows(&corrupt, corrupt_label);
	int B = (int)clean.dims[0], T = (int)clean.dims[1];
	int L = cfg->n_layer, H = cfg->n_head, C = cfg->d_model;
	int W = heads ? H : T;
	size_t BT = (size_t)B * T, BTC = BT * C;
	/* the groups of patches run side by side: G of them a batch */
	double by_pos = GROUP_POSITIONS / (double)BT;
	double by_scores = GROUP_SCORES / ((double)BT * H * T);
	int G = (int)fmin(fmin(by_pos, by_scores), W);
	G = G < 1 ? 1 : G;
	at_loaded wts;
	/* the work: two whole runs and, on average, half the layers for
	 * each of the L x W patches */
	at_fwd *e = stage_whole_model(&c, &model, &wts,
				      (double)BT * (2 + W * (L + 1) / 2.0), T,
				      (double)BT * 2 + (double)B * L * W);
	sweep_ctx s = {.L = L, .H = H, .B = B, .T = T, .D = C / H, .C = C};
	float ***bufs[3] = {&s.out, &s.pre[0], &s.pre[1]};
	for (int i = 0; i < 3; i++) {
		if (!(*bufs[i] = calloc((size_t)L + 1, sizeof **bufs[i])))
			cli_die("out of memory");
		for (int l = 0; l <= L; l++)
			(*bufs[i])[l] = alloc_floats(BTC);
	}
	float *logits = alloc_floats(BT * V);
	float *batch = alloc_floats(BTC * G), *last = alloc_floats((size_t)B * G * C);
	float *metric = alloc_floats((size_t)B * G);
	float *effect = alloc_floats((size_t)L * W);
	at_hook hook = {.fn = hook_fn, .wants = hook_wants, .ctx = &s};
	at_fwd_set_hook(e, &hook);
	keep_run(e, &s, 0, clean.data, logits);
	keep_run(e, &s, 1, corrupt.data, logits);
	/* the two metrics through the head as the patched runs' go */
	double m[2];
	for (int run = 0; run < 2; run++) {
		row_metrics(e, s.pre[run][L], last, metric, B, T, C, V, answer, wrong);
		m[run] = mean_of(metric, 0, B);
	}
	double m_clean = m[0], m_corrupt = m[1], span = m_clean - m_corrupt;
	s.run = -1;
	for (int l = 0; l < L; l++)
		for (int first = 0; first < W; first += G) {
			int g_n = W - first < G ? W - first : G;
			s.layer = heads ? l : -1; /* positions: no hook */
			s.first = first;
			for (int g = 0; g < g_n; g++) {
				float *x = batch + (size_t)g * BTC;
				memcpy(x, s.pre[1][l], BTC * sizeof *x);
				for (int b = 0; !heads && b < B; b++) {
					size_t at = ((size_t)b * T + first + g) * C;
					memcpy(x + at, s.pre[0][l] + at, C * sizeof *x);
				}
			}
			run_from(e, batch, l, L, g_n * B, T);
			row_metrics(e, batch, last, metric, g_n * B, T, C, V,
				    answer, wrong);
			for (int g = 0; g < g_n; g++)
				effect[(size_t)l * W + first + g] = span != 0.0 ?
					(float)((mean_of(metric, g, B) - m_corrupt) /
						span) : NAN;
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
		at_attr_set(&t.attrs, "axes", heads ? "layer,head" : "layer,position");
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
	for (int i = 0; i < 3; i++) {
		for (int l = 0; l <= L; l++)
			free((*bufs[i])[l]);
		free(*bufs[i]);
	}
	free(logits);
	free(batch);
	free(last);
	free(metric);
	free(effect);
	at_fwd_free(e);
	at_weights_free(&wts);
	at_tensor_free(&clean);
	at_tensor_free(&corrupt);
	at_model_close(&model);
	return 0;
}
