/* andrea-embed - token ids to embeddings: x = wte[token] + wpe[position].
 *
 * Tokens come from a `tokens` record (i32 [B,T] or [T]), from text with
 * --text (through the model's tokenizer: without one, every byte is a
 * token, newlines included), or from --tokens.
 * The tokens record is always written ahead of x.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/filter.h"
#include "ops/stages.h"
#include "cli/stage.h"
#include "cli/tokens.h"

#include "help/andrea-embed.h" /* usage: the --help text */

typedef struct {
	at_model model;
	at_tensor wte, wpe; /* loaded before any output is written */
	int bos; /* the token --bos prepends; -1: not asked */
	at_exec exec;
} embed_ctx;

/* The lengths attribute of B padded rows of T tokens, read into len:
 * 1, or 0 where there is none; a malformed one ends the program. */
static int row_lengths(at_filter *f, const at_attrs *a, uint64_t B,
		       uint64_t T, uint64_t *len)
{
	char err[300];
	int rc = at_attr_lengths(a, B, T, len, err, sizeof err);
	if (rc < 0)
		at_filter_die(f, 0, "%s", err);
	return rc;
}

/* Makes tokens [B,T] (a [T] record becomes [1,T]), prepends BOS to every
 * row when asked (one more for each padded row's length), then checks
 * every id against V and T against the context. */
static void prepare_tokens(at_filter *f, embed_ctx *e, at_tensor *tok)
{
	const at_config *cfg = &e->model.cfg;
	if (tok->dtype != AT_I32 || tok->rank < 1 || tok->rank > 2)
		at_filter_die(f, 0, "expected i32 [B,T] or [T], got %s rank %d",
			      at_dtype_name(tok->dtype), tok->rank);
	at_tokens_as_batch(tok);
	uint64_t B = tok->dims[0], T = tok->dims[1], len[AT_MAX_VALUE];
	if (T == 0)
		at_filter_die(f, 0, "no tokens to embed (T = 0)");
	if (B == 0)
		at_filter_die(f, 0, "no sequences to embed (B = 0)");
	int padded = row_lengths(f, &tok->attrs, B, T, len);
	uint64_t x_dims[3] = {B, T + (e->bos >= 0), (uint64_t)cfg->d_model};
	at_filter_expect_fits(f, 0, "x", 3, x_dims);
	if (e->bos >= 0) {
		uint64_t dims[2] = {B, T + 1};
		at_tensor t2;
		if (at_tensor_init(&t2, "tokens", AT_I32, 2, dims) < 0)
			cli_die("out of memory");
		t2.attrs = tok->attrs;
		int32_t *dst = t2.data, *src = tok->data;
		for (uint64_t b = 0; b < B; b++) {
			dst[b * (T + 1)] = e->bos;
			memcpy(dst + b * (T + 1) + 1, src + b * T, T * sizeof *src);
			if (padded) /* then B <= AT_MAX_VALUE */
				len[b]++;
		}
		if (padded && at_attr_set_lengths(&t2.attrs, len, B) < 0)
			at_filter_die(f, 0, "--bos: the rows' lengths no longer "
				      "fit their attribute");
		at_tensor_free(tok);
		*tok = t2;
		T++;
	}
	char err[200];
	if (at_tokens_check(cfg, tok->data, B, T, err, sizeof err) < 0)
		at_filter_die(f, 0, "%s", err);
}

static void embed_run(at_filter *f, at_tensor *in, at_writer *w)
{
	embed_ctx *e = f->ctx;
	at_tensor *tok = &in[0];
	prepare_tokens(f, e, tok);
	int B = (int)tok->dims[0], T = (int)tok->dims[1];
	int C = e->model.cfg.d_model;
	at_tensor x;
	uint64_t dims[3] = {(uint64_t)B, (uint64_t)T, (uint64_t)C};
	if (at_tensor_init(&x, "x", AT_F32, 3, dims) < 0)
		cli_die("out of memory");
	const char *lengths = at_attr_get(&tok->attrs, "lengths");
	if (lengths) /* the padded rows' own lengths go on with x */
		at_attr_set(&x.attrs, "lengths", lengths);
	stage_check(at_stage_embed(&e->exec, x.data, tok->data, e->wte.data,
				   e->wpe.data, e->model.cfg.vocab, B, T, C));
	at_filter_write(w, tok);
	at_filter_write(w, &x);
	at_tensor_free(&x);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-embed", &c);
	embed_ctx e = {0};
	int text = 0, bos = 0, lines = 0;
	const char *list = NULL;
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_STAGE | CLI_USE_MODEL),
		CLI_FLAG("text", 0, &text),
		CLI_FLAG("lines", 0, &lines),
		CLI_STRING("tokens", 0, &list),
		CLI_FLAG("bos", 0, &bos),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	text |= lines; /* each line a row: text too */
	if (text && list)
		cli_usage_error("--text (--lines) and --tokens exclude each other");
	if (list && operand.n == 1)
		cli_usage_error("--tokens takes no input FILE");
	const char *path = operand.v[0];
	e.exec.dev = stage_device_lazy(&c);
	stage_open_model(&c, &e.model);
	at_config *cfg = &e.model.cfg;
	if (!cfg->vocab || !cfg->d_model || !cfg->ctx)
		cli_die("%s: no 'wte' and 'wpe' parameters to embed with",
			c.model);
	stage_param(&e.model, "wte", &e.wte, 2, cfg->vocab, cfg->d_model);
	stage_param(&e.model, "wpe", &e.wpe, 2, cfg->ctx, cfg->d_model);
	at_tokenizer *tok = text || bos ? cli_tokenizer(&e.model) : NULL;
	e.bos = bos ? at_tok_bos(tok) : -1;
	if (bos && e.bos < 0)
		cli_die("%s: --bos: the model's tokenizer has no token that "
			"starts a sequence", c.model);

	at_filter f = {.inputs = {"tokens"}, .n_inputs = 1, .run = embed_run,
		       .ctx = &e, .max_bytes = c.ropts.max_bytes};
	c.keep = 0; /* the tokens are always written */
	if (!text && !list) {
		at_filter_main(&c, &f, path);
	} else {
		at_tensor in;
		if (lines)
			cli_tokens_from_lines(path, tok, &in);
		else if (text)
			cli_tokens_from_text(path, tok, &in);
		else
			cli_tokens_from_list(list, &in);
		f.label = text ? (path ? path : "<stdin>") : "--tokens";
		f.index[0] = 1;
		at_writer w;
		prepare_tokens(&f, &e, &in); /* all checks before any output */
		e.bos = -1;
		cli_open_output(&c, &w);
		embed_run(&f, &in, &w);
		cli_finish_output(&w);
		at_tensor_free(&in);
	}
	at_tok_free(tok);
	at_tensor_free(&e.wte);
	at_tensor_free(&e.wpe);
	at_model_close(&e.model);
	return 0;
}
