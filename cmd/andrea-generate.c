/* andrea-generate - sample text from the model, one byte at a time.
 *
 * The sequence starts as BOS (256) followed by the prompt's bytes.  Each
 * step runs the whole model (embedding, every block, the head) over the
 * last ctx tokens, draws the next token from the logits of the last
 * position (sample.h) and, unless it is 256 or above, writes it as a byte
 * and appends it.  A token of 256 or more ends the text early.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ops/block.h"
#include "cli/cli.h"
#include "ops/ops.h"
#include "ops/sample.h"
#include "cli/stage.h"

static const char usage[] =
	"usage: andrea-generate [-m MODEL] [--model-seed S] [--heads N]\n"
	"                       [--prompt TEXT] [-n N] [--temperature F]\n"
	"                       [--top-k K] [--seed S] [--device DEV]\n"
	"                       [--threads N]\n";

typedef struct {
	at_model model;
	at_tensor wte, wpe;
	at_block *blocks;
	at_head head;
} gen_model;

/* Loads every parameter the forward pass needs; dies naming the first
 * one missing or misshapen. */
static void load_model(gen_model *g)
{
	const at_config *cfg = &g->model.cfg;
	char err[700];
	if (at_model_need_heads(&g->model, err, sizeof err) < 0)
		cli_die("%s", err);
	if (cfg->n_layer <= 0 || cfg->ctx <= 0 || cfg->vocab <= 0)
		cli_die("%s: the model's layer count, context or vocabulary is "
			"unknown (no config, wte, wpe or layers)", g->model.path);
	if (cfg->vocab <= AT_BOS)
		cli_die("%s: V=%d, but generating needs the byte tokens and BOS "
			"(V >= %d)", g->model.seeded ? "default model" :
			g->model.path, cfg->vocab, AT_BOS + 1);
	stage_param(&g->model, "wte", &g->wte, 2, cfg->vocab, cfg->d_model);
	stage_param(&g->model, "wpe", &g->wpe, 2, cfg->ctx, cfg->d_model);
	if (!(g->blocks = calloc((size_t)cfg->n_layer, sizeof *g->blocks)))
		cli_die("out of memory");
	for (int l = 0; l < cfg->n_layer; l++)
		if (at_block_load(&g->blocks[l], &g->model, l, err, sizeof err) < 0)
			cli_die("%s", err);
	if (at_head_load(&g->head, &g->model, err, sizeof err) < 0)
		cli_die("%s", err);
}

/* Logits [V] of the position after tokens[0..T) (T <= ctx). */
static void forward(const gen_model *g, const int32_t *tokens, int T,
		    float *logits)
{
	int C = g->model.cfg.d_model;
	float *x = malloc((size_t)T * C * sizeof *x);
	if (!x)
		cli_die("out of memory");
	at_embed_forward(x, tokens, g->wte.data, g->wpe.data, 1, T, C);
	for (int l = 0; l < g->model.cfg.n_layer; l++)
		if (at_block_forward(&g->blocks[l], x, 1, T) < 0)
			cli_die("out of memory");
	if (at_head_forward(&g->head, logits, x + (size_t)(T - 1) * C, 1) < 0)
		cli_die("out of memory");
	free(x);
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

/* --model-seed S: the default model's seed, into the cli_common at ctx
 * (--seed is the sampler's here). */
static void model_seed_opt(void *ctx, const char *arg, const char *what)
{
	cli_common *c = ctx;
	c->seed = (uint64_t)cli_long(arg, 0, LONG_MAX, what);
	c->seed_given = 1;
}

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-generate", &c);
	const char *prompt = "";
	long n_new = 256, top_k = 0, seed = AT_DEFAULT_SEED;
	double temperature = 1.0;
	cli_opt opts[] = {
		CLI_USES(CLI_USE_BASIC | CLI_USE_DEVICE | CLI_USE_MODEL_FILE |
			 CLI_USE_HEADS),
		CLI_CALL_ARG("model-seed", 0, model_seed_opt, &c),
		CLI_STRING("prompt", 0, &prompt),
		CLI_LONG(NULL, 'n', &n_new, 0, 1L << 24),
		CLI_CALL_ARG("temperature", 0, temperature_opt, &temperature),
		CLI_LONG("top-k", 0, &top_k, 0, INT_MAX),
		CLI_LONG("seed", 0, &seed, 0, LONG_MAX),
		CLI_END};
	cli_operands operand = cli_parse(&c, opts, usage, CLI_ANY, argc, argv);
	if (operand.n)
		cli_usage_error("'%s': no operands are taken; give the prompt "
				"with --prompt (see %s --help)", operand.v[0],
				cli_prog);
	if (c.model && c.seed_given)
		cli_usage_error("--model-seed applies to the default model only, "
				"and a model file (-m or ANDREA_MODEL) is in use");
	stage_device(&c, 0);
	gen_model g = {0};
	stage_open_model(&c, &g.model);
	load_model(&g);
	const at_config *cfg = &g.model.cfg;

	size_t len = strlen(prompt), cap = len + 1 + (size_t)n_new;
	int32_t *seq = malloc(cap * sizeof *seq);
	float *logits = malloc((size_t)cfg->vocab * sizeof *logits);
	int *scratch = malloc((size_t)cfg->vocab * sizeof *scratch);
	if (!seq || !logits || !scratch)
		cli_die("out of memory");
	seq[0] = AT_BOS;
	for (size_t i = 0; i < len; i++)
		seq[i + 1] = (unsigned char)prompt[i];
	len++;
	int tty = isatty(STDOUT_FILENO);
	for (long step = 0; step < n_new; step++) {
		/* a sliding window: the last ctx tokens, at positions 0.. */
		size_t T = len < (size_t)cfg->ctx ? len : (size_t)cfg->ctx;
		forward(&g, seq + len - T, (int)T, logits);
		double u = at_sample_uniform((uint64_t)seed, (uint64_t)step);
		int tok = at_sample(logits, cfg->vocab, temperature, (int)top_k,
				    u, scratch);
		if (tok < 0)
			cli_die("step %ld: the model's logits are not finite", step);
		if (tok >= AT_BOS)
			break;
		seq[len++] = tok;
		putchar(tok);
		if (tty)
			cli_finish_text();
	}
	cli_finish_text();
	free(seq);
	free(logits);
	free(scratch);
	for (int l = 0; l < cfg->n_layer; l++)
		at_block_free(&g.blocks[l]);
	free(g.blocks);
	at_head_free(&g.head);
	at_tensor_free(&g.wte);
	at_tensor_free(&g.wpe);
	at_model_close(&g.model);
	return 0;
}
