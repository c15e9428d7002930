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

enum { OPT_PROMPT = CLI_FIRST_OWN, OPT_TEMPERATURE, OPT_TOP_K, OPT_SEED,
       OPT_MODEL_SEED };

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

int main(int argc, char **argv)
{
	cli_common c;
	cli_init("andrea-generate", &c);
	static const struct option longopts[] = {
		{"help", no_argument, 0, 'h'},
		{"version", no_argument, 0, CLI_VERSION},
		{"threads", required_argument, 0, CLI_THREADS},
		{"device", required_argument, 0, CLI_DEVICE},
		{"model", required_argument, 0, 'm'},
		{"heads", required_argument, 0, CLI_HEADS},
		{"model-seed", required_argument, 0, OPT_MODEL_SEED},
		{"prompt", required_argument, 0, OPT_PROMPT},
		{"temperature", required_argument, 0, OPT_TEMPERATURE},
		{"top-k", required_argument, 0, OPT_TOP_K},
		{"seed", required_argument, 0, OPT_SEED},
		{0}};
	const char *prompt = "";
	long n_new = 256, top_k = 0;
	double temperature = 1.0;
	uint64_t seed = AT_DEFAULT_SEED;
	int opt;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "hm:n:", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_PROMPT:
			prompt = optarg;
			break;
		case 'n':
			n_new = cli_long(optarg, 0, 1L << 24, "-n");
			break;
		case OPT_TEMPERATURE:
			temperature = cli_double(optarg, "--temperature");
			if (temperature < 0 || temperature > 1e30)
				cli_usage_error("--temperature '%s': expected a "
						"number from 0 to 1e30", optarg);
			break;
		case OPT_TOP_K:
			top_k = cli_long(optarg, 0, INT_MAX, "--top-k");
			break;
		case OPT_SEED:
			seed = (uint64_t)cli_long(optarg, 0, LONG_MAX, "--seed");
			break;
		case OPT_MODEL_SEED:
			c.seed = (uint64_t)cli_long(optarg, 0, LONG_MAX,
						    "--model-seed");
			c.seed_given = 1;
			break;
		default:
			if (!cli_common_opt(&c, opt, optarg, usage))
				cli_bad_option(argv);
		}
	}
	if (argc > optind)
		cli_usage_error("'%s': no operands are taken; give the prompt "
				"with --prompt (see %s --help)", argv[optind],
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
		double u = at_sample_uniform(seed, (uint64_t)step);
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
