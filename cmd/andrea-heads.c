/* andrea-heads - what each attention head of a model does.
 *
 * Runs the whole model once over a batch of tokens and scores every head
 * from its attention pattern (view/heads.h): previous-token, duplicate-
 * token and induction scores, the mass on the first position and the
 * mean row entropy.  The tokens are the first `tokens` record of FILE (or
 * stdin), or --text, --tokens, or with --random N a random sequence of N
 * tokens repeated twice (on it an induction head is plain to see, and the
 * loss of the second half says how well the model copies).  Writes the tokens and one [L,H] record a
 * score, or with --table a table.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/capture.h"
#include "cli/cli.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "ops/forward.h"
#include "ops/sample.h"
#include "ops/weights.h"
#include "view/heads.h"

#include "help/andrea-heads.h" /* usage: the --help text */

typedef struct {
	hd_acc *acc; /* [L*H] */
	const int32_t *tok;
	int B, T, H, L;
} scoring;

/* The hook: each layer's attention into its heads' sums. */
static int take_attn(void *ctx, const char *name, int layer, float *data,
		     int rank, const uint64_t *dims)
{
	scoring *s = ctx;
	if (strcmp(name, "attn") != 0 || layer < 0 || layer >= s->L)
		return 0;
	hd_add(s->acc + (size_t)layer * s->H, data, s->tok, s->B, s->H, s->T);
	return 0;
}

static int wanted(void *ctx, const char *name, int layer)
{
	(void)ctx, (void)layer;
	return strcmp(name, "attn") == 0 ? AT_HOOK_READ : AT_HOOK_SKIP;
}

/* B rows of BOS (where lead: the tokenizer has one the model's V
 * holds), then n tokens drawn uniformly from the tokenizer's (BOS and
 * added ones aside), then the same n again. */
static void random_tokens(at_tensor *t, const at_tokenizer *tok, int V,
			  int lead, int n, int B, long seed)
{
	int bos = at_tok_bos(tok);
	int range = at_tok_size(tok) < V ? at_tok_size(tok) : V;
	uint64_t dims[2] = {(uint64_t)B, (uint64_t)(lead + 2 * n)};
	if (at_tensor_init(t, "tokens", AT_I32, 2, dims) < 0)
		cli_die("out of memory");
	int32_t *id = t->data;
	uint64_t draw = 0;
	for (int b = 0; b < B; b++) {
		int32_t *row = id + (size_t)b * dims[1];
		if (lead)
			row[0] = bos;
		for (int i = 0; i < n; i++) {
			int32_t v;
			do /* a token that has text and starts nothing */
				v = (int32_t)(at_sample_uniform((uint64_t)seed,
								(uint32_t)b, draw++) * range);
			while (v == bos && range > 1);
			row[lead + i] = row[lead + n + i] = v;
		}
	}
	at_attr_setf(&t->attrs, "repeat", "%d", n);
}

/* n where every row of tok [B,T] is a sequence of n tokens written twice
 * (after BOS, where it begins with one), as --random makes them; else 0. */
static int repeated_length(const int32_t *tok, int B, int T, int bos)
{
	int lead = T > 0 && tok[0] == bos, n = (T - lead) / 2;
	if (n < 1 || lead + 2 * n != T)
		return 0;
	for (int b = 0; b < B; b++) {
		const int32_t *r = tok + (size_t)b * T;
		if ((r[0] == bos) != lead ||
		    memcmp(r + lead, r + lead + n, (size_t)n * sizeof *r) != 0)
			return 0;
	}
	return n;
}

/* The mean cross-entropy (nats) of the second repetition: each position
 * whose token is in it predicting the next, logits [B,T,V]. */
static double second_half_loss(const float *logits, const int32_t *tok, int B,
			       int T, int V, int n)
{
	double sum = 0.0;
	long count = 0;
	for (int b = 0; b < B; b++)
		for (int i = T - n; i + 1 < T; i++) {
			const float *z = logits + ((size_t)b * T + i) * V;
			double max = z[0], e = 0.0;
			for (int v = 1; v < V; v++)
				max = z[v] > max ? z[v] : max;
			for (int v = 0; v < V; v++)
				e += exp((double)z[v] - max);
			sum += max + log(e) - z[tok[(size_t)b * T + i + 1]];
			count++;
		}
	return count ? sum / count : NAN;
}

static void print_table(const float *score, int L, int H, double loss)
{
	printf("layer head  prev    dup     induction first   entropy\n");
	for (int l = 0; l < L; l++)
		for (int h = 0; h < H; h++) {
			const float *s = score + ((size_t)l * H + h) * HD_SCORES;
			printf("%5d %4d", l, h);
			for (int k = 0; k < HD_SCORES; k++)
				printf(k == HD_INDUCTION ? "  %-9.4f" : "  %-6.4f", s[k]);
			putchar('\n');
		}
	if (!isnan(loss))
		printf("second-half loss %.4f nats\n", loss);
}

static void write_records(cli_common *c, const at_tensor *tok,
			  const float *score, int L, int H, double loss)
{
	at_writer w;
	cli_open_output(c, &w);
	if (at_write_tensor(&w, tok) < 0)
		cli_fail(w.err);
	uint64_t dims[2] = {(uint64_t)L, (uint64_t)H};
	for (int k = 0; k < HD_SCORES; k++) {
		at_tensor t;
		if (at_tensor_init(&t, hd_names[k], AT_F32, 2, dims) < 0)
			cli_die("out of memory");
		for (int i = 0; i < L * H; i++)
			((float *)t.data)[i] = score[(size_t)i * HD_SCORES + k];
		at_attr_set(&t.attrs, "axes", "layer,head");
		if (k == HD_INDUCTION && !isnan(loss))
			at_attr_setf(&t.attrs, "loss", "%.9g", loss);
		if (at_write_tensor(&w, &t) < 0)
			cli_fail(w.err);
		at_tensor_free(&t);
	}
	cli_finish_output(&w);
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-heads", &c);
	int text = 0, table = 0, n_random = 0, B = 4;
	long seq_seed = 1;
	const char *list = NULL;
	static capture cap; /* --ablate, --patch */
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_DEVICE | CLI_USE_MODEL),
		CLI_INT("random", 0, &n_random, 1, 1 << 20),
		CLI_INT("batch", 0, &B, 1, 1 << 16),
		CLI_LONG("sequence-seed", 0, &seq_seed, 0, 1L << 62),
		CLI_FLAG("text", 0, &text),
		CLI_STRING("tokens", 0, &list),
		CLI_FLAG("table", 0, &table),
		CLI_CALL_ARG("ablate", 0, ablate_opt, &cap),
		CLI_CALL_ARG("patch", 0, patch_opt, &cap),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, 1, argc, argv);
	if ((text != 0) + (list != NULL) + (n_random > 0) > 1)
		cli_usage_error("--text, --tokens and --random exclude each other");
	if (cli_given(opts, "batch") && !n_random)
		cli_usage_error("--batch is the number of --random sequences");
	if ((list || n_random) && operand.n)
		cli_usage_error("%s takes no input FILE", list ? "--tokens" : "--random");
	if (table && c.output)
		cli_usage_error("--table prints to standard output; -o writes the "
				"records");
	stage_check_device(&c, AT_PREC_FP32);
	at_model model;
	stage_open_model_heads(&c, &model);
	const at_config *cfg = &model.cfg;
	at_tokenizer *tok = cli_tokenizer(&model);
	int random = n_random > 0;
	int bos = at_tok_bos(tok), lead = bos >= 0 && bos < cfg->vocab;
	if (random && cfg->ctx > 0 && lead + 2L * n_random > cfg->ctx)
		cli_die("--random %d: %ld positions (twice the sequence%s) "
			"exceed the model's context of %d", n_random,
			lead + 2L * n_random, lead ? " and BOS" : "", cfg->ctx);
	at_tensor t;
	char label[4400]; /* what stage_check_tokens names */
	snprintf(label, sizeof label, "%s", operand.n ? operand.v[0] : "<stdin>");
	if (random)
		random_tokens(&t, tok, cfg->vocab, lead, n_random, B, seq_seed);
	else if (list)
		cli_tokens_from_list(list, &t);
	else if (text)
		cli_tokens_from_text(operand.n ? operand.v[0] : NULL, tok, &t);
	else
		cli_tokens_from_stream(&c, operand.n ? operand.v[0] : NULL, &t,
				       label, sizeof label);
	stage_check_tokens(&model, &t, random ? "--random" : list ? "--tokens" :
			   label);
	cli_tokens_whole_rows(&t, label);
	B = (int)t.dims[0];
	int T = (int)t.dims[1], L = cfg->n_layer, H = cfg->n_head, V = cfg->vocab;
	at_loaded wts;
	at_fwd *e = stage_whole_model(&c, &model, &wts, (double)B * T, T,
				      (double)B * T);
	char err[600];
	hd_acc *acc = calloc((size_t)L * H, sizeof *acc);
	float *logits = malloc((size_t)B * T * V * sizeof *logits);
	float *score = malloc((size_t)L * H * HD_SCORES * sizeof *score);
	if (!acc || !logits || !score)
		cli_die("out of memory");
	scoring s = {acc, t.data, B, T, H, L};
	at_hook hook = {.fn = take_attn, .wants = wanted, .ctx = &s};
	at_fwd_set_hook(e, capture_wanted(&cap) ?
			capture_start(&cap, L, H, cfg->d_model / H, e, &hook) : &hook);
	if (at_fwd_logits(e, logits, t.data, B, T, err, sizeof err) != 0)
		cli_die("%s", err);
	for (int i = 0; i < L * H; i++)
		hd_scores(&acc[i], score + (size_t)i * HD_SCORES);
	int n = repeated_length(t.data, B, T, at_tok_bos(tok));
	double loss = n ? second_half_loss(logits, t.data, B, T, V, n) : NAN;
	if (table) {
		print_table(score, L, H, loss);
		cli_finish_text();
	} else {
		write_records(&c, &t, score, L, H, loss);
	}
	free(acc);
	free(logits);
	free(score);
	at_fwd_free(e);
	at_weights_free(&wts);
	at_tensor_free(&t);
	at_tok_free(tok);
	capture_free(&cap);
	at_model_close(&model);
	return 0;
}
