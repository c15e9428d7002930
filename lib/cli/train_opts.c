/* train_opts.c - the model andrea-train's command line names
 * (train_opts.h). */
#include "cli/train_opts.h"

/* Whether the option of long name `name` was on the command line. */
int train_given(const train_options *o, const char *name)
{
	return cli_given(o->opts, name) > 0;
}

/* The model's shape: preset (default andrea-120m) and overrides. */
void train_config(const train_options *o, at_config *cfg)
{
	if (at_config_preset(o->preset ? o->preset : "andrea-120m", cfg) < 0)
		cli_usage_error("--config '%s': expected tiny, andrea-12m, "
				"andrea-120m or andrea-480m", o->preset);
	if (o->over.n_layer)
		cfg->n_layer = o->over.n_layer;
	if (o->over.n_head)
		cfg->n_head = o->over.n_head;
	if (o->over.d_model)
		cfg->d_model = o->over.d_model;
	if (o->over.ctx)
		cfg->ctx = o->over.ctx;
	if (o->over.vocab)
		cfg->vocab = o->over.vocab;
	if (cfg->d_model % cfg->n_head)
		cli_usage_error("d_model %d is not a multiple of %d heads",
				cfg->d_model, cfg->n_head);
}

/* Shape options given with a model file or a checkpoint must agree with
 * its config: all five fields with --config (and its overrides), else
 * each override given. */
void train_config_agrees(const train_options *o, const at_config *cfg,
			 const char *what)
{
	at_config want = o->over;
	if (o->preset)
		train_config(o, &want);
	const struct {
		const char *name;
		int want, have;
	} f[] = {
		{"n_layer", want.n_layer, cfg->n_layer},
		{"n_head", want.n_head, cfg->n_head},
		{"d_model", want.d_model, cfg->d_model},
		{"ctx", want.ctx, cfg->ctx},
		{"vocab", want.vocab, cfg->vocab},
	};
	for (size_t i = 0; i < sizeof f / sizeof *f; i++)
		if (f[i].want && f[i].want != f[i].have)
			cli_die("the command line asks for %s=%d, but %s has %s=%d",
				f[i].name, f[i].want, what, f[i].name, f[i].have);
}

/* Opens -m MODEL into a training model (config from the file). */
void train_model_init(tr_model *m, const at_config *cfg, int biases,
		      int tied, const char *what)
{
	if (tr_model_init(m, cfg, biases, tied) == 0)
		return;
	double C = cfg->d_model, per_layer = 12.0 * C * C,
	       n = cfg->n_layer * per_layer + (2.0 * cfg->vocab + cfg->ctx) * C;
	cli_die("out of memory for %s: n_layer=%d, d_model=%d, vocab=%d and "
		"ctx=%d make about %.3g GiB of parameters", what, cfg->n_layer,
		cfg->d_model, cfg->vocab, cfg->ctx, n * 4 / (1 << 30));
}

void train_load_model(const train_options *o, tr_model *m)
{
	at_model src;
	char err[700];
	if (at_model_open(&src, o->c.model, o->c.seed, o->over.n_head,
			  &o->c.ropts, err, sizeof err) < 0 ||
	    at_model_need_heads(&src, err, sizeof err) < 0 ||
	    at_model_check_held(&src, src.cfg.n_layer, err, sizeof err) < 0)
		cli_die("%s", err);
	at_config cfg = src.cfg;
	if (!cfg.n_layer || !cfg.d_model || !cfg.ctx || !cfg.vocab)
		cli_die("%s: cannot tell the model's shape (no config record)",
			o->c.model);
	train_config_agrees(o, &cfg, o->c.model);
	/* GPT-2's form: the products' biases and a head tied to wte */
	int biases = at_model_has(&src, "layers.0.attn.bq");
	train_model_init(m, &cfg, biases, !at_model_has(&src, "lm_head"),
			 o->c.model);
	if (tr_model_load(m, &src, err, sizeof err) < 0)
		cli_die("%s", err);
	at_model_close(&src);
}
