/* train_opts.h - andrea-train's command line, as both of its modes read
 * it (the training run: train_run.h; --forward: cmd/andrea-train.c), and
 * the model it names: a preset with its overrides, or -m MODEL. */
#ifndef ANDREA_TRAIN_OPTS_H
#define ANDREA_TRAIN_OPTS_H

#include "cli/cli.h"
#include "cli/train_ranks.h"
#include "train/train.h"

/* What the command line gave, with the defaults of what it did not. */
typedef struct {
	cli_common c;
	const cli_opt *opts; /* the command line's table: cli_given */
	const char *preset;
	at_config over;     /* --layers ... --vocab, 0 = not given */
	const char *data, *checkpoint, *log, *dump_grads, *tokens;
	const char *tokenizer; /* --tokenizer: the model file whose tokenizer */
	long steps, stop_at, eval_every, eval_batches, save_every;
	int batch, seq, resume, progress, forward, text;
	int precision;      /* AT_PREC_FP32, AT_PREC_TF32, AT_PREC_BF16 (GPU only) */
	int attention;      /* TR_ATTN_AUTO, _FUSED, _EXPLICIT */
	double val_fraction;
	tr_hparams h;
	cli_ranks ranks;    /* --gpus, --rank, --world, --init, ... */
} train_options;

/* Whether the option of long name `name` was on the command line. */
int train_given(const train_options *o, const char *name);

/* The model's shape: preset (default andrea-120m) and overrides; a shape
 * that cannot be is a usage error. */
void train_config(const train_options *o, at_config *cfg);

/* Shape options given with a model file or a checkpoint (named `what`)
 * must agree with its config: all five fields with --config (and its
 * overrides), else each override given; ends the run where they do not. */
void train_config_agrees(const train_options *o, const at_config *cfg,
			 const char *what);

/* tr_model_init, or an end naming what the config came from and what
 * it asks for where the memory is not there. */
void train_model_init(tr_model *m, const at_config *cfg, int biases,
		      int tied, const char *what);
/* Opens -m MODEL into a training model (config from the file). */
void train_load_model(const train_options *o, tr_model *m);

#endif
