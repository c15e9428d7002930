/* andrea-generate - sample text from the model, one token at a time.
 *
 * Each sequence starts as the tokenizer's BOS (256 for the byte
 * tokenizer, <|endoftext|> for GPT-2's) followed by its prompt's tokens.
 * The prompt goes through the model in one pass that fills the KV cache
 * (prefill); then each step feeds the last token at the next position,
 * draws the next token from the logits (sample.h) and, unless it is BOS
 * or has no text, writes its text and appends it.  Such a token ends that
 * sequence.  With --prompts, the sequences of a file's lines
 * decode side by side as one batch.  Beyond the model's context the
 * window slides by halves (andrea-generate(1)).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/capture.h"
#include "cli/cli.h"
#include "core/clock.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "ops/sample.h"
#include "ops/weights.h"
#include "stream/stream.h"

#include "help/andrea-generate.h" /* usage: the --help text */

#define MAX_PROMPTS 4096

/* One sequence of the batch. */
typedef struct {
	int32_t *tok;   /* BOS, the prompt, what was drawn */
	size_t n, cap;  /* tokens held; room */
	size_t w0;      /* where the model's window starts */
	int done;       /* drew BOS or a token without text */
	char *out;      /* --prompts: the text drawn so far */
	size_t out_n, out_cap;
} seq;

typedef struct {
	const char *prompt, *prompts, *logits_path, *capture_path;
	long n_new, top_k, seed;
	double temperature, top_p;
	int no_cache, stats, precision;
	/* the run */
	at_model model;
	at_tokenizer *tok;
	at_loaded weights;
	at_fwd *engine;
	seq *s;
	int rows, ctx, V;
	float *logits;  /* [rows,V] */
	float *window;  /* --no-cache: [ctx,V], the logits of a whole window */
	int32_t *last;  /* [rows] the token each row feeds next */
	int *scratch;
	at_writer lw;   /* --logits */
	capture cap;    /* --capture */
	at_writer cw;   /* --capture-file */
	int tty;
	int mid_line;      /* a single prompt's text so far ends inside a line */
	double t_prefill, t_decode;
	long steps, fed;
} gen;

/* The model's name in errors. */
static const char *model_name(const gen *g)
{
	return g->model.seeded ? "default model" : g->model.path;
}

static void append(seq *q, int32_t tok)
{
	if (q->n == q->cap) {
		q->cap = q->cap * 2 + 16;
		if (!(q->tok = realloc(q->tok, q->cap * sizeof *q->tok)))
			cli_die("out of memory");
	}
	q->tok[q->n++] = tok;
}

/* Row r starts as BOS (where the tokenizer has one) and the tokens of
 * text[0, len), of which it keeps the last ctx (the window never sees
 * the others, so a long prompt holds no memory); `where` names the
 * prompt in errors. */
static void start_row(gen *g, int r, const char *text, size_t len,
		      const char *where)
{
	seq *q = &g->s[r];
	int bos = at_tok_bos(g->tok);
	if (bos >= 0)
		append(q, bos);
	int32_t *ids = malloc((len + 1) * sizeof *ids);
	char err[300];
	long n = ids ? at_tok_encode(g->tok, (const unsigned char *)text, len,
				     ids, err, sizeof err) : -1;
	if (n < 0)
		cli_die("%s: %s", where, ids ? err : "out of memory");
	long ctx = g->model.cfg.ctx > 0 ? g->model.cfg.ctx : LONG_MAX;
	long from = (long)q->n + n > ctx ? (long)q->n + n - ctx : 0;
	if (from > 0 && q->n) /* BOS is out of view */
		q->n = 0, from--;
	for (long i = from; i < n; i++)
		append(q, ids[i]);
	free(ids);
	if (q->n == 0)
		cli_die("%s: an empty prompt, and the model's tokenizer has no "
			"token that starts a sequence", where);
}

/* The lines of path, one prompt each (a last line without a newline
 * too); dies on a read error or more than MAX_PROMPTS lines. */
static void read_prompts(gen *g, const char *path)
{
	FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
	if (!f)
		cli_die("%s: cannot open: %s", path, strerror(errno));
	if (f == stdin) /* named as the other tools name it */
		path = "<stdin>";
	if (!(g->s = calloc(MAX_PROMPTS, sizeof *g->s)))
		cli_die("out of memory");
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	while ((len = getline(&line, &cap, f)) >= 0) {
		if (g->rows == MAX_PROMPTS)
			cli_die("%s: more than %d prompts", path, MAX_PROMPTS);
		if (len > 0 && line[len - 1] == '\n')
			len--;
		char where[4200];
		snprintf(where, sizeof where, "%s: line %d", path, g->rows + 1);
		start_row(g, g->rows++, line, (size_t)len, where);
	}
	if (ferror(f))
		cli_die("%s: read error: %s", path, strerror(errno));
	if (f != stdin)
		fclose(f);
	free(line);
	if (g->rows == 0)
		cli_die("%s: no prompts (the file is empty)", path);
}

/* Dies with the engine's reason (rc < 0) or the --capture-file writer's
 * (rc > 0: a hook's capture failed to write). */
static void check(const gen *g, int rc, const char *err)
{
	if (rc < 0)
		cli_die("%s", err);
	if (rc > 0)
		cli_fail(g->cw.err);
}

/* Slides row r's window when its next token would fall outside the
 * context: the newest ctx/2 tokens are kept, at positions 0... Returns 1
 * when it slid. */
static int slide(gen *g, seq *q)
{
	if (q->n - q->w0 <= (size_t)g->ctx)
		return 0;
	size_t keep = g->ctx / 2 > 0 ? (size_t)g->ctx / 2 : 1;
	q->w0 = q->n - keep;
	return 1;
}

/* Fills row r's cache with its window but the last token, which the next
 * decoding step feeds. */
static void refill(gen *g, int r)
{
	seq *q = &g->s[r];
	char err[600];
	int T = (int)(q->n - q->w0 - 1);
	char row[16];
	snprintf(row, sizeof row, "%d", r);
	capture_tag(&g->cap, "step", "prompt");
	capture_tag(&g->cap, "row", row);
	double t0 = at_now();
	check(g, at_fwd_prefill(g->engine, r, q->tok + q->w0, T, NULL, err,
			     sizeof err), err);
	g->t_prefill += at_now() - t0;
	g->fed += T;
}

/* The logits of every row's next token into g->logits: one decoding step
 * over the KV cache, or (--no-cache) the whole window again per row. */
static void next_logits(gen *g)
{
	char err[600];
	for (int r = 0; r < g->rows; r++) {
		seq *q = &g->s[r];
		if (q->done) /* a finished row idles at position 0 */
			q->w0 = q->n - 1;
		if (slide(g, q) || q->done)
			if (!g->no_cache)
				refill(g, r);
		g->last[r] = q->tok[q->n - 1];
	}
	char step[24];
	snprintf(step, sizeof step, "%ld", g->steps);
	capture_tag(&g->cap, "step", step);
	capture_tag(&g->cap, "row", NULL);
	double t0 = at_now();
	if (!g->no_cache) {
		check(g, at_fwd_decode(g->engine, g->last, g->rows, g->logits, err,
				    sizeof err), err);
	} else {
		for (int r = 0; r < g->rows; r++) {
			seq *q = &g->s[r];
			int T = (int)(q->n - q->w0);
			char row[16]; /* a pass per row: say whose */
			snprintf(row, sizeof row, "%d", r);
			capture_tag(&g->cap, "row", row);
			check(g, at_fwd_logits(g->engine, g->window, q->tok + q->w0, 1,
					    T, err, sizeof err), err);
			memcpy(g->logits + (size_t)r * g->V,
			       g->window + (size_t)(T - 1) * g->V,
			       g->V * sizeof *g->window);
		}
	}
	g->t_decode += at_now() - t0;
}

/* --logits: step's logits [rows,V] as one record. */
static void write_logits(gen *g, long step)
{
	uint64_t dims[2] = {(uint64_t)g->rows, (uint64_t)g->V};
	at_tensor t = {.dtype = AT_F32, .rank = 2, .data = g->logits};
	memcpy(t.dims, dims, sizeof dims);
	snprintf(t.name, sizeof t.name, "logits");
	at_attr_setf(&t.attrs, "step", "%ld", step);
	if (at_write_tensor(&g->lw, &t) < 0)
		cli_fail(g->lw.err);
}

/* Writes the text of a --prompts row as one line: backslash and newline
 * as \\ and \n. */
static void put_line(const seq *q)
{
	for (size_t i = 0; i < q->out_n; i++) {
		char ch = q->out[i];
		if (ch == '\\' || ch == '\n')
			printf("\\%c", ch == '\n' ? 'n' : '\\');
		else
			putchar(ch);
	}
	putchar('\n');
}

/* Records the text of row r's drawn token: printed at once for a single
 * prompt (flushed per token on a terminal, per line otherwise), kept for
 * the line of a --prompts row. */
static void emit(gen *g, int r, const unsigned char *text, size_t len)
{
	seq *q = &g->s[r];
	if (!g->prompts) {
		fwrite(text, 1, len, stdout);
		if (len)
			g->mid_line = text[len - 1] != '\n';
		if (g->tty || memchr(text, '\n', len))
			cli_finish_text();
		return;
	}
	while (q->out_n + len > q->out_cap) {
		q->out_cap = q->out_cap * 2 + 64;
		if (!(q->out = realloc(q->out, q->out_cap)))
			cli_die("out of memory");
	}
	memcpy(q->out + q->out_n, text, len);
	q->out_n += len;
}

static void run(gen *g)
{
	for (int r = 0; r < g->rows && !g->no_cache; r++)
		refill(g, r);
	int live = g->rows;
	for (long step = 0; step < g->n_new && live > 0; step++) {
		next_logits(g);
		g->steps++;
		if (g->logits_path)
			write_logits(g, step);
		for (int r = 0; r < g->rows; r++) {
			seq *q = &g->s[r];
			if (q->done)
				continue;
			double u = at_sample_uniform((uint64_t)g->seed, (uint32_t)r,
						     (uint64_t)step);
			int tok = at_sample(g->logits + (size_t)r * g->V, g->V,
					    g->temperature, (int)g->top_k,
					    g->top_p, u, g->scratch);
			if (tok < 0)
				cli_die("%s: step %ld, row %d: logits that are "
					"not finite (a NaN, or no finite "
					"maximum)", model_name(g), step, r);
			size_t len;
			const unsigned char *text = at_tok_piece(g->tok, tok, &len);
			if (tok == at_tok_bos(g->tok) || !text) {
				q->done = 1;
				live--;
				continue;
			}
			append(q, tok);
			emit(g, r, text, len);
		}
	}
	if (g->prompts)
		for (int r = 0; r < g->rows; r++)
			put_line(&g->s[r]);
	cli_finish_text();
}

/* --temperature F into the double at ctx: from 0 to 1e30. */
static void temperature_opt(void *ctx, const char *arg, const char *what)
{
	double *t = ctx;
	*t = cli_double(arg, what);
	if (*t < 0 || *t > 1e30)
		cli_usage_error("%s '%s': expected a number from 0 to 1e30", what,
				arg);
}

/* --top-p P into the double at ctx: above 0, at most 1. */
static void top_p_opt(void *ctx, const char *arg, const char *what)
{
	double *p = ctx;
	*p = cli_double(arg, what);
	if (!(*p > 0 && *p <= 1))
		cli_usage_error("%s '%s': expected a number above 0 and at most 1",
				what, arg);
}

/* --model-seed S: the default model's seed, into the cli_common at ctx
 * (--seed is the sampler's here). */
static void model_seed_opt(void *ctx, const char *arg, const char *what)
{
	cli_common *c = ctx;
	c->seed = (uint64_t)cli_long(arg, 0, LONG_MAX, what);
	c->seed_given = 1;
}

/* Loads every parameter the forward pass needs and makes the engine;
 * dies naming the first parameter missing or misshapen. */
static void load(gen *g, const cli_common *c)
{
	const at_config *cfg = &g->model.cfg;
	char err[700];
	if (at_model_need_heads(&g->model, err, sizeof err) < 0)
		cli_die("%s", err);
	if (cfg->n_layer <= 0 || cfg->ctx <= 0 || cfg->vocab <= 0)
		cli_die("%s: the model's layer count, context or vocabulary is "
			"unknown (no config, wte, wpe or layers)", g->model.path);
	if (cfg->vocab < at_tok_size(g->tok))
		cli_die("%s: V=%d, but its tokenizer (%s) has %d tokens",
			model_name(g),
			cfg->vocab, at_tok_kind(g->tok), at_tok_size(g->tok));
	g->ctx = cfg->ctx;
	g->V = cfg->vocab;
	check(g, at_weights_load(&g->weights, &g->model, AT_LOAD_ALL, NULL, err,
			      sizeof err), err);
	/* auto decides by the whole run: every row's prompt and steps */
	double positions = 0, bytes;
	for (int r = 0; r < g->rows; r++)
		positions += (double)g->s[r].n + g->n_new;
	double madds = at_fwd_work(g->weights.w.C, g->V, positions, cfg->n_layer,
				   g->ctx / 2.0, positions, &bytes);
	at_device dev = stage_device_sized(c, g->precision, madds, bytes);
	check(g, at_fwd_new(&g->engine, &g->weights.w, dev, g->precision,
			 g->no_cache ? 0 : g->rows, err, sizeof err), err);
	g->logits = malloc((size_t)g->rows * g->V * sizeof *g->logits);
	g->last = malloc((size_t)g->rows * sizeof *g->last);
	g->scratch = malloc((size_t)g->V * sizeof *g->scratch);
	if (g->no_cache)
		g->window = malloc((size_t)g->ctx * g->V * sizeof *g->window);
	if (!g->logits || !g->last || !g->scratch || (g->no_cache && !g->window))
		cli_die("out of memory");
}

static void report(const gen *g)
{
	char where[300];
	at_fwd_describe(g->engine, where, sizeof where);
	long drawn = g->steps * g->rows;
	fprintf(stderr, "%s: %d row%s, %ld prompt tokens encoded in %.1f ms; "
		"%ld step%s in %.1f ms: %.0f tokens/s (%s%s)\n", cli_prog,
		g->rows, g->rows == 1 ? "" : "s", g->fed, g->t_prefill * 1e3,
		g->steps, g->steps == 1 ? "" : "s", g->t_decode * 1e3,
		g->t_decode > 0 ? drawn / g->t_decode : 0.0, where,
		g->no_cache ? ", no cache" : "");
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-generate", &c);
	gen g = {.prompt = NULL, .n_new = 256, .seed = AT_DEFAULT_SEED,
		 .temperature = 1.0, .top_p = 1.0};
	cli_opt opts[] = {
		CLI_USES(CLI_USE_BASIC | CLI_USE_DEVICE | CLI_USE_MODEL_FILE |
			 CLI_USE_HEADS),
		CLI_CALL_ARG("model-seed", 0, model_seed_opt, &c),
		CLI_STRING("prompt", 0, &g.prompt),
		CLI_STRING("prompts", 0, &g.prompts),
		CLI_LONG(NULL, 'n', &g.n_new, 0, 1L << 24),
		CLI_CALL_ARG("temperature", 0, temperature_opt, &g.temperature),
		CLI_LONG("top-k", 0, &g.top_k, 0, INT_MAX),
		CLI_CALL_ARG("top-p", 0, top_p_opt, &g.top_p),
		CLI_LONG("seed", 0, &g.seed, 0, LONG_MAX),
		CLI_FLAG("no-cache", 0, &g.no_cache),
		CLI_STRING("logits", 0, &g.logits_path),
		CLI_CALL_ARG("capture", 0, capture_opt, &g.cap),
		CLI_STRING("capture-file", 0, &g.capture_path),
		CLI_FLAG("stats", 0, &g.stats),
		CLI_CALL_ARG("precision", 0, stage_precision_opt, &g.precision),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, CLI_ANY, argc, argv);
	cli_env_level(&c); /* no -z, but --logits and --capture-file */
	if (operand.n)
		cli_usage_error("'%s': no operands are taken; give the prompt "
				"with --prompt (see %s --help)", operand.v[0],
				cli_prog);
	if (g.prompt && g.prompts)
		cli_usage_error("--prompt and --prompts exclude each other");
	if (!g.cap.n_spec != !g.capture_path)
		cli_usage_error("--capture and --capture-file go together");
	if (g.capture_path && strcmp(g.capture_path, "-") == 0)
		cli_usage_error("--capture-file: give a file of its own (standard "
				"output carries the text)");
	cli_file_named("--logits", g.logits_path);
	cli_file_named("--capture-file", g.capture_path);
	cli_file_named("--prompts", g.prompts);
	/* ./c.ats and c.ats too: the renamed --logits would replace it */
	if (cli_same_file(g.capture_path, g.logits_path))
		cli_usage_error("--capture-file %s is the --logits file too: give "
				"each a file of its own", g.capture_path);
	if (g.logits_path && strcmp(g.logits_path, "-") == 0)
		cli_usage_error("--logits -: standard output carries the text; "
				"give --logits a file");
	if (c.model && c.seed_given)
		cli_usage_error("--model-seed applies to the default model only, "
				"and a model file (-m or ANDREA_MODEL) is in use");
	stage_check_device(&c, g.precision);
	stage_open_model(&c, &g.model);
	/* the model and the prompts are read; the outputs replace files */
	const char *in_what[] = {"the model file", "the --prompts file"};
	const char *in[] = {g.model.seeded ? NULL : g.model.path, g.prompts};
	cli_output_not_input("--logits", g.logits_path, 2, in_what, in);
	cli_output_not_input("--capture-file", g.capture_path, 2, in_what, in);
	g.tok = cli_tokenizer(&g.model);
	if (g.prompts) {
		read_prompts(&g, g.prompts);
	} else {
		if (!(g.s = calloc(1, sizeof *g.s)))
			cli_die("out of memory");
		g.rows = 1;
		const char *p = g.prompt ? g.prompt : "";
		start_row(&g, 0, p, strlen(p), "--prompt");
	}
	load(&g, &c);
	if (g.logits_path) {
		c.output = g.logits_path;
		cli_open_output(&c, &g.lw);
	}
	if (g.capture_path) {
		const at_config *cfg = &g.model.cfg;
		g.cap.decoding = !g.no_cache;
		at_fwd_set_hook(g.engine, capture_start(&g.cap, cfg->n_layer,
							cfg->n_head,
							cfg->d_model / cfg->n_head,
							g.engine, NULL));
		cli_refuse_terminal(&c, g.capture_path);
		at_write_opts wo = cli_write_opts(&c, g.capture_path);
		if (at_writer_open(&g.cw, g.capture_path, &wo) < 0)
			cli_fail(g.cw.err);
		capture_to(&g.cap, &g.cw);
	}
	g.tty = isatty(STDOUT_FILENO);
	run(&g);
	if (g.capture_path && at_writer_finish(&g.cw) < 0)
		cli_fail(g.cw.err);
	if (g.logits_path)
		cli_finish_output(&g.lw);
	if (g.stats) {
		/* on a terminal the line goes below the text, not onto it */
		if (g.tty && g.mid_line) {
			putchar('\n');
			cli_finish_text();
		}
		report(&g);
	}
	for (int r = 0; r < g.rows; r++) {
		free(g.s[r].tok);
		free(g.s[r].out);
	}
	free(g.s);
	free(g.logits);
	free(g.window);
	free(g.last);
	free(g.scratch);
	at_fwd_free(g.engine);
	at_weights_free(&g.weights);
	at_model_close(&g.model);
	at_tok_free(g.tok);
	return 0;
}
