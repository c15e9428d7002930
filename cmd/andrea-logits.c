/* andrea-logits - the model's head: logits = LNf(x) . lm_head.
 *
 * Consumes x [B,T,C] (after the last block) and writes logits [B,T,V];
 * --last keeps only the last position, [B,1,V].
 */
#include <stdlib.h>
#include <string.h>

#include "cli/filter.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "ops/weights.h"

#include "help/andrea-logits.h" /* usage: the --help text */

typedef struct {
	at_model model;
	at_loaded weights; /* the head, loaded before any output */
	stage_engine engine;
	int C, V, last, precision;
} logits_ctx;

/* The head's engine for `rows` rows of x (or, prepare, only begun). */
static at_fwd *engine(logits_ctx *l, double rows, int prepare)
{
	double bytes, madds = at_fwd_work(l->C, l->V, 0, 0, 0, rows, &bytes);
	if (prepare) {
		stage_engine_prepare(&l->engine, madds, bytes);
		return NULL;
	}
	return stage_engine_get(&l->engine, madds, bytes);
}

/* Auto's engine begins while the first x arrives. */
static void logits_prepare(at_filter *f, int slot, const at_header *h)
{
	logits_ctx *l = f->ctx;
	if (h->rank == 3)
		engine(l, (double)h->dims[0] * (l->last ? 1 : (double)h->dims[1]),
		       1);
}

/* Logits as the head hands them over: into the record. */
static int put_logits(void *w, const void *p, size_t n)
{
	at_filter_put(w, p, n);
	return 0;
}

/* Checks one x and writes its logits (only row T-1 with --last). */
static void logits_run(at_filter *f, at_tensor *in, at_writer *w)
{
	logits_ctx *l = f->ctx;
	at_tensor *x = &in[0];
	at_filter_expect(f, 0, x, 3, "B,T,C");
	uint64_t B = x->dims[0], T = x->dims[1], C = x->dims[2];
	if (C != (uint64_t)l->C)
		at_filter_die(f, 0, "C=%llu but the model has C=%d",
			      (unsigned long long)C, l->C);
	if (l->last && T == 0)
		at_filter_die(f, 0, "--last: no positions (T = 0)");
	uint64_t rows = l->last ? B : B * T;
	if (rows > 1u << 30 || rows * (uint64_t)l->V > 1ull << 36)
		at_filter_die(f, 0, "shape too large for [B,T,V] logits");
	/* --last: each row's last position, its own where the rows were
	 * padded (the lengths attribute of andrea-embed --lines) */
	uint64_t len[AT_MAX_VALUE];
	char why[200];
	int padded = l->last ?
		at_attr_lengths(&x->attrs, B, T, len, why, sizeof why) : 0;
	if (padded < 0)
		at_filter_die(f, 0, "%s", why);
	const float *src = x->data;
	float *lastrows = NULL;
	if (l->last && (T > 1 || padded)) { /* gather the last rows */
		if (!(lastrows = malloc(B * C * sizeof *lastrows + 1)))
			cli_die("out of memory");
		for (uint64_t b = 0; b < B; b++)
			memcpy(lastrows + b * C,
			       src + (b * T + (padded ? len[b] : T) - 1) * C,
			       C * sizeof *lastrows);
		src = lastrows;
	}
	at_tensor out = {.dtype = AT_F32, .rank = 3,
			 .dims = {B, l->last ? 1 : T, (uint64_t)l->V}};
	snprintf(out.name, sizeof out.name, "logits");
	out.attrs = x->attrs;
	if (l->last && !padded)
		at_attr_setf(&out.attrs, "position", "%llu",
			     (unsigned long long)(T - 1));
	/* written as the rows reach host memory: [B,T,V] is never held */
	at_fwd *e = engine(l, (double)rows, 0);
	char err[600];
	at_filter_begin(w, &out);
	if (at_fwd_head(e, src, (int)rows, put_logits, w, err, sizeof err) < 0)
		at_filter_die(f, 0, "%s", err);
	at_filter_end(w);
	free(lastrows);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-logits", &c);
	logits_ctx l = {0};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE | CLI_USE_MODEL_FILE |
			 CLI_USE_SEED),
		CLI_FLAG("last", 0, &l.last),
		CLI_CALL_ARG("precision", 0, stage_precision_opt, &l.precision),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	/* a bad --device or --precision fails before any input */
	stage_check_device(&c, l.precision);
	stage_open_model(&c, &l.model);
	if (!l.model.cfg.d_model || !l.model.cfg.vocab)
		cli_die("%s: the model's C or V is unknown (no config, wte or "
			"lm_head)", c.model);
	char err[700];
	l.C = l.model.cfg.d_model;
	l.V = l.model.cfg.vocab;
	if (at_weights_load(&l.weights, &l.model, AT_LOAD_HEAD, NULL, err,
			    sizeof err) < 0)
		cli_die("%s", err);
	stage_engine_init(&l.engine, &c, &l.weights.w, l.precision);
	at_filter f = {.inputs = {"x"}, .n_inputs = 1, .run = logits_run,
		       .prepare = logits_prepare, .ctx = &l};
	at_filter_main(&c, &f, operand.v[0]);
	stage_engine_free(&l.engine);
	at_weights_free(&l.weights);
	at_model_close(&l.model);
	return 0;
}
