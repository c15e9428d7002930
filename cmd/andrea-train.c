/* andrea-train - train an ANDREA model on the CPU or a CUDA GPU, or write
 * the activations of its forward pass.
 *
 * Training (lib/cli/train_run.c): batches of windows drawn from --data,
 * AdamW with warmup and cosine decay, global-norm clipping; the model file
 * and a checkpoint are written atomically every --save-every steps, at the
 * end and on SIGINT or SIGTERM, and --resume continues a run bit for bit.
 * --forward runs one input through the model and writes every
 * intermediate as a stream.  This file: the command line, its checks, and
 * --forward.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "cli/train_opts.h"
#include "cli/train_run.h"
#include "ops/ops.h"
#include "train/activations.h"

#include "help/andrea-train.h" /* usage: the --help text */

/* A number >= 0 into the double at `to` (--lr, --min-lr, --weight-decay,
 * --clip). */
static void nonneg_opt(void *to, const char *arg, const char *what)
{
	double d = cli_double(arg, what);
	if (d < 0 || !isfinite(d))
		cli_usage_error("%s '%s': expected a number >= 0", what, arg);
	*(double *)to = d;
}

/* --timeout: a number > 0 into the double at `to`. */
static void positive_opt(void *to, const char *arg, const char *what)
{
	nonneg_opt(to, arg, what);
	if (*(double *)to == 0)
		cli_usage_error("%s '%s': expected a number > 0", what, arg);
}

/* --val-fraction: a number in [0, 1) into the double at `to`. */
static void fraction_opt(void *to, const char *arg, const char *what)
{
	nonneg_opt(to, arg, what);
	if (*(double *)to >= 1.0)
		cli_usage_error("%s '%s': expected a number in [0, 1)", what, arg);
}

/* --attention: auto, fused or explicit into the int at `to`. */
static void attention_opt(void *to, const char *arg, const char *what)
{
	static const char *const names[] = {"auto", "fused", "explicit"};
	*(int *)to = cli_choice(arg, names, 3, what); /* TR_ATTN_AUTO, ... */
}

/* Options that belong to one mode only are misuse in the other, and so
 * are operands but one FILE with --forward (none with --tokens). */
static void check_mode(const train_options *o, cli_operands operand)
{
	static const char *const train_only[] = {
		"data", "steps", "batch", "seq", "lr", "min-lr", "warmup",
		"weight-decay", "clip", "val-fraction", "eval-every",
		"eval-batches", "save-every", "checkpoint", "resume", "stop-at",
		"log", "progress", "dump-grads", "tokenizer", "attention",
		"gpus", "rank", "world", "init", "shard-optimizer", "timeout"};
	if (o->forward) {
		for (size_t i = 0; i < sizeof train_only / sizeof *train_only; i++)
			if (train_given(o, train_only[i]))
				cli_usage_error("--%s is a training option, not for "
						"--forward", train_only[i]);
		if (o->text && o->tokens)
			cli_usage_error("--text and --tokens exclude each other");
		if (o->tokens && operand.n == 1)
			cli_usage_error("--tokens takes no input FILE");
		if (operand.n > 1)
			cli_usage_error("too many operands (see %s --help)", cli_prog);
		if (o->c.model && o->c.seed_given)
			cli_usage_error("--seed applies to the default model only, "
					"and a model file (-m) is in use");
		return;
	}
	cli_file_named("--data", o->data);
	cli_file_named("--checkpoint", o->checkpoint);
	cli_file_named("--log", o->log);
	cli_file_named("--dump-grads", o->dump_grads);
	cli_file_named("--tokenizer", o->tokenizer);
	if (o->text || o->tokens)
		cli_usage_error("%s needs --forward", o->text ? "--text" : "--tokens");
	if (operand.n > 0)
		cli_usage_error("andrea-train takes no operands when training "
				"(see %s --help)", cli_prog);
	if (!o->c.output || strcmp(o->c.output, "-") == 0)
		cli_usage_error("no model file to write: give -o MODEL");
	if (!o->data && !(train_given(o, "steps") && o->steps == 0))
		cli_usage_error("no training data: give --data FILE");
	if (o->resume && o->c.model)
		cli_usage_error("--resume and -m exclude each other (the "
				"checkpoint holds the model)");
	if (o->tokenizer && (o->resume || o->c.model))
		cli_usage_error("--tokenizer is for a new model: %s carries its own",
				o->resume ? "the checkpoint" : "-m MODEL");
	if (o->dump_grads && train_given(o, "steps") && o->steps == 0)
		cli_usage_error("--dump-grads needs at least one step");
}

/* Defaults of the options not given (andrea-train(1) lists them). */
static void defaults(train_options *o)
{
	o->steps = 1000;
	o->batch = 8;
	o->h.lr = 6e-4;
	o->h.warmup = 100;
	o->h.weight_decay = 0.1;
	o->h.clip = 1.0;
	o->h.beta1 = 0.9;
	o->h.beta2 = 0.999;
	o->h.eps = 1e-8;
	o->val_fraction = 0.1;
	o->eval_every = 100;
	o->eval_batches = 8;
	o->save_every = 500;
}

/* --forward: the model, the tokens of path (NULL: stdin) or --tokens,
 * then every activation of the forward pass to the output
 * (activations.h). */
static int forward_main(train_options *o, const char *path)
{
	tr_model m;
	if (o->c.model) {
		train_load_model(o, &m);
	} else {
		at_config cfg;
		train_config(o, &cfg);
		train_model_init(&m, &cfg, 0, 0, "the model");
		tr_model_seed(&m, o->c.seed);
	}
	at_tensor tok;
	if (o->tokens)
		cli_tokens_from_list(o->tokens, &tok);
	else if (o->text && m.tok)
		cli_tokens_from_text(path, m.tok, &tok);
	else if (o->text) {
		at_tokenizer *bytes = at_tok_bytes();
		if (!bytes)
			cli_die("out of memory");
		cli_tokens_from_text(path, bytes, &tok);
		at_tok_free(bytes);
	}
	else
		cli_tokens_from_stream(&o->c, path, &tok, NULL, 0);
	char err[600];
	if (at_tokens_check(&m.cfg, tok.data, tok.dims[0], tok.dims[1], err,
			    sizeof err) < 0)
		cli_die("%s: %s", o->tokens ? "--tokens" : path && strcmp(path, "-")
					  ? path : "<stdin>", err);
	stage_check_device(&o->c, o->precision);
	double bytes, n = (double)tok.dims[0] * tok.dims[1];
	double madds = at_fwd_work(m.cfg.d_model, m.cfg.vocab, n, m.cfg.n_layer,
				   tok.dims[1] / 2.0, n, &bytes);
	at_device dev = stage_device_sized(&o->c, o->precision, madds, bytes);
	at_writer w;
	cli_open_output(&o->c, &w);
	if (tr_activations_run(&m, &tok, dev, o->precision, &w, err,
			       sizeof err) < 0)
		cli_fail(err);
	cli_finish_output(&w);
	at_tensor_free(&tok);
	tr_model_free(&m);
	return 0;
}

int main(int argc, char **argv)
{
	train_options o;
	memset(&o, 0, sizeof o);
	cli_init("andrea-train", &o.c);
	o.c.model = NULL; /* ANDREA_MODEL is for inspecting; training starts from -m only */
	defaults(&o);
	/* the common options but --keep; --heads is the model's override,
	 * which also serves a model file without config (load_model_file) */
	cli_opt opts[] = {
		CLI_USES(CLI_USE_COMMON | CLI_USE_DEVICE | CLI_USE_MODEL_FILE |
			 CLI_USE_SEED),
		CLI_STRING("config", 0, &o.preset),
		CLI_INT("layers", 0, &o.over.n_layer, 1, 1024),
		CLI_INT("heads", 0, &o.over.n_head, 1, 4096),
		CLI_INT("d-model", 0, &o.over.d_model, 1, 1 << 16),
		CLI_INT("ctx", 0, &o.over.ctx, 1, 1 << 20),
		CLI_INT("vocab", 0, &o.over.vocab, 1, AT_MAX_CONFIG),
		CLI_STRING("tokenizer", 0, &o.tokenizer),
		CLI_STRING("data", 0, &o.data),
		CLI_LONG("steps", 0, &o.steps, 0, LONG_MAX / 2),
		CLI_INT("batch", 0, &o.batch, 1, 1 << 16),
		CLI_INT("seq", 0, &o.seq, 1, 1 << 20),
		CLI_CALL_ARG("lr", 0, nonneg_opt, &o.h.lr),
		CLI_CALL_ARG("min-lr", 0, nonneg_opt, &o.h.min_lr),
		CLI_LONG("warmup", 0, &o.h.warmup, 0, LONG_MAX / 2),
		CLI_CALL_ARG("weight-decay", 0, nonneg_opt, &o.h.weight_decay),
		CLI_CALL_ARG("clip", 0, nonneg_opt, &o.h.clip),
		CLI_CALL_ARG("val-fraction", 0, fraction_opt, &o.val_fraction),
		CLI_LONG("eval-every", 0, &o.eval_every, 0, LONG_MAX),
		CLI_LONG("eval-batches", 0, &o.eval_batches, 1, 1 << 20),
		CLI_LONG("save-every", 0, &o.save_every, 0, LONG_MAX),
		CLI_STRING("checkpoint", 0, &o.checkpoint),
		CLI_FLAG("resume", 0, &o.resume),
		CLI_LONG("stop-at", 0, &o.stop_at, 1, LONG_MAX / 2),
		CLI_STRING("log", 0, &o.log),
		CLI_FLAG("progress", 0, &o.progress),
		CLI_STRING("dump-grads", 0, &o.dump_grads),
		CLI_FLAG("forward", 0, &o.forward),
		CLI_FLAG("text", 0, &o.text),
		CLI_STRING("tokens", 0, &o.tokens),
		CLI_CALL_ARG("precision", 0, stage_precision_opt, &o.precision),
		CLI_CALL_ARG("attention", 0, attention_opt, &o.attention),
		CLI_INT("gpus", 0, &o.ranks.gpus, 1, 1024),
		CLI_INT("rank", 0, &o.ranks.rank, 0, 1 << 20),
		CLI_INT("world", 0, &o.ranks.world, 1, 1 << 20),
		CLI_STRING("init", 0, &o.ranks.init),
		CLI_FLAG("shard-optimizer", 0, &o.ranks.shard),
		CLI_CALL_ARG("timeout", 0, positive_opt, &o.ranks.timeout_s),
		CLI_END};
	o.opts = opts;
	o.ranks.rank = o.ranks.world = -1;
	cli_operands operand = cli_parse(&o.c, opts, usage, CLI_ANY, argc, argv);
	check_mode(&o, operand);
	if (o.forward) /* the device is chosen once the tokens are known */
		return forward_main(&o, operand.v[0]);
	tr_ranks ranks;
	int role = cli_ranks_resolve(&o.ranks, o.c.device,
				     o.dump_grads ? "--dump-grads" : NULL, &ranks);
	if (role == CLI_LAUNCHER) { /* the ranks do the rest; no CUDA here */
		char ckpt[4200];
		train_checkpoint_path(&o, ckpt, sizeof ckpt);
		return cli_ranks_launch(&o.ranks, argc, argv);
	}
	at_device dev = stage_device(&o.c, 1);
	stage_check_precision(dev, o.precision);
	/* a rank whose device came out the CPU: tr_engine_new refuses it */
	return train_run(&o, dev, role == CLI_RANK ? &ranks : NULL);
}
