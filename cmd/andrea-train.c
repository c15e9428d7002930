/* andrea-train - train an ANDREA model on the CPU or a CUDA GPU, or write
 * the activations of its forward pass.
 *
 * Training: batches of windows drawn from --data, AdamW with warmup and
 * cosine decay, global-norm clipping; the model file and a checkpoint are
 * written atomically every --save-every steps, at the end and on SIGINT or
 * SIGTERM, and --resume continues a run bit for bit.  --forward runs one
 * input through the model and writes every intermediate as a stream.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "ops/device.h"
#include "ops/ops.h"
#include "cli/stage.h"
#include "cli/tokens.h"
#include "cli/train_ranks.h"
#include "cli/train_report.h"
#include "core/clock.h"
#include "train/activations.h"
#include "train/engine.h"
#include "train/train.h"

#include "help/andrea-train.h" /* usage: the --help text */

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
} options;

/* Whether the option of long name `name` was on the command line. */
static int given(const options *o, const char *name)
{
	return cli_given(o->opts, name) > 0;
}

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
	stop_signal = sig;
}

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
static void check_mode(const options *o, cli_operands operand)
{
	static const char *const train_only[] = {
		"data", "steps", "batch", "seq", "lr", "min-lr", "warmup",
		"weight-decay", "clip", "val-fraction", "eval-every",
		"eval-batches", "save-every", "checkpoint", "resume", "stop-at",
		"log", "progress", "dump-grads", "tokenizer", "attention",
		"gpus", "rank", "world", "init", "shard-optimizer", "timeout"};
	if (o->forward) {
		for (size_t i = 0; i < sizeof train_only / sizeof *train_only; i++)
			if (given(o, train_only[i]))
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
	if (o->text || o->tokens)
		cli_usage_error("%s needs --forward", o->text ? "--text" : "--tokens");
	if (operand.n > 0)
		cli_usage_error("andrea-train takes no operands when training "
				"(see %s --help)", cli_prog);
	if (!o->c.output || strcmp(o->c.output, "-") == 0)
		cli_usage_error("no model file to write: give -o MODEL");
	if (!o->data && !(given(o, "steps") && o->steps == 0))
		cli_usage_error("no training data: give --data FILE");
	if (o->resume && o->c.model)
		cli_usage_error("--resume and -m exclude each other (the "
				"checkpoint holds the model)");
	if (o->tokenizer && (o->resume || o->c.model))
		cli_usage_error("--tokenizer is for a new model: %s carries its own",
				o->resume ? "the checkpoint" : "-m MODEL");
	if (o->dump_grads && given(o, "steps") && o->steps == 0)
		cli_usage_error("--dump-grads needs at least one step");
}

/* The model's shape: preset (default andrea-120m) and overrides. */
static void config_from_options(const options *o, at_config *cfg)
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
static void check_config_agrees(const options *o, const at_config *cfg,
				const char *what)
{
	at_config want = o->over;
	if (o->preset)
		config_from_options(o, &want);
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
static void load_model_file(const options *o, tr_model *m)
{
	at_model src;
	char err[700];
	if (at_model_open(&src, o->c.model, o->c.seed, o->over.n_head,
			  &o->c.ropts, err, sizeof err) < 0 ||
	    at_model_need_heads(&src, err, sizeof err) < 0)
		cli_die("%s", err);
	at_config cfg = src.cfg;
	if (!cfg.n_layer || !cfg.d_model || !cfg.ctx || !cfg.vocab)
		cli_die("%s: cannot tell the model's shape (no config record)",
			o->c.model);
	check_config_agrees(o, &cfg, o->c.model);
	/* GPT-2's form: the products' biases and a head tied to wte */
	int biases = at_model_has(&src, "layers.0.attn.bq");
	if (tr_model_init(m, &cfg, biases, !at_model_has(&src, "lm_head")) < 0)
		cli_die("out of memory");
	if (tr_model_load(m, &src, err, sizeof err) < 0)
		cli_die("%s", err);
	at_model_close(&src);
}

/* ------------------------------------------------------------------ */
/* --forward */

/* --forward: the model, the tokens of path (NULL: stdin) or --tokens,
 * then every activation of the forward pass to the output
 * (activations.h). */
static int forward_main(options *o, const char *path)
{
	tr_model m;
	if (o->c.model) {
		load_model_file(o, &m);
	} else {
		at_config cfg;
		config_from_options(o, &cfg);
		if (tr_model_init(&m, &cfg, 0, 0) < 0)
			cli_die("out of memory");
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
		cli_tokens_from_stream(&o->c, path, &tok);
	stage_check_device(&o->c, o->precision);
	double bytes, n = (double)tok.dims[0] * tok.dims[1];
	double madds = at_fwd_work(m.cfg.d_model, m.cfg.vocab, n, m.cfg.n_layer,
				   tok.dims[1] / 2.0, n, &bytes);
	at_device dev = stage_device_sized(&o->c, o->precision, madds, bytes);
	char err[600];
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

/* ------------------------------------------------------------------ */
/* training */

typedef struct {
	options *o;
	tr_model m;
	tr_data data;
	tr_state st;
	float *mom1, *mom2;
	tr_engine *eng;  /* where the steps compute, once the data is loaded */
	const tr_ranks *ranks; /* this process's place among the ranks, or NULL */
	int lead;        /* alone or rank 0: the one that writes and reports */
	char err[1024];  /* the reason of a failed engine call */
	char ckpt[4200];
	train_report rep; /* progress, --log, the closing line */
} trainer;

/* Ends the run when rc, the result of an engine call, is a failure, with
 * its one-line reason; running out of device memory names the batch size
 * to reduce. */
static void engine_check(const trainer *tr, int rc)
{
	if (rc == TR_ENGINE_NOMEM)
		cli_die("%s: reduce --batch (now %d; %d positions each)", tr->err,
			tr->st.batch, tr->st.seq);
	if (rc < 0)
		cli_die("%s", tr->err);
}

/* Defaults of the options not given (andrea-train(1) lists them). */
static void defaults(options *o)
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

/* Restores a checkpoint: config, state and tensors; settings given on the
 * command line must agree with the ones that fix the run. */
static void resume(trainer *tr)
{
	options *o = tr->o;
	at_reader r;
	char err[800];
	at_config cfg;
	if (at_reader_open(&r, tr->ckpt, &o->c.ropts) < 0)
		cli_fail(r.err);
	if (tr_checkpoint_read_head(&r, &tr->st, &cfg, err, sizeof err) < 0)
		cli_die("%s", err);
	char what[4300];
	snprintf(what, sizeof what, "the checkpoint %s", tr->ckpt);
	check_config_agrees(o, &cfg, what);
	tr_state *st = &tr->st;
	if (o->c.seed_given && o->c.seed != st->seed)
		cli_die("--seed %llu does not match %s (seed %llu)",
			(unsigned long long)o->c.seed, what,
			(unsigned long long)st->seed);
	if (given(o, "batch") && o->batch != st->batch)
		cli_die("--batch %d does not match %s (%d)", o->batch, what,
			st->batch);
	if (given(o, "seq") && o->seq != st->seq)
		cli_die("--seq %d does not match %s (%d)", o->seq, what, st->seq);
	if (given(o, "val-fraction") && o->val_fraction != st->val_fraction)
		cli_die("--val-fraction %g does not match %s (%g)",
			o->val_fraction, what, st->val_fraction);
	/* the schedule may be changed on resuming: what is given wins */
	if (given(o, "lr"))
		st->h.lr = o->h.lr;
	if (given(o, "min-lr") || given(o, "lr"))
		st->h.min_lr = given(o, "min-lr") ? o->h.min_lr : o->h.lr / 10;
	if (given(o, "warmup"))
		st->h.warmup = o->h.warmup;
	if (given(o, "steps"))
		st->h.steps = o->steps;
	if (given(o, "weight-decay"))
		st->h.weight_decay = o->h.weight_decay;
	if (given(o, "clip"))
		st->h.clip = o->h.clip;
	if (!given(o, "eval-every") && st->eval_every >= 0)
		o->eval_every = st->eval_every;
	if (!given(o, "eval-batches") && st->eval_batches > 0)
		o->eval_batches = st->eval_batches;
	if (tr_model_init(&tr->m, &cfg, st->biases, st->tied) < 0 ||
	    !(tr->mom1 = calloc(tr->m.total, sizeof(float))) ||
	    !(tr->mom2 = calloc(tr->m.total, sizeof(float))))
		cli_die("out of memory");
	if (tr_checkpoint_read_body(&r, &tr->m, tr->mom1, tr->mom2, err,
				    sizeof err) < 0)
		cli_die("%s", err);
	at_reader_close(&r);
}

/* --tokenizer MODEL: that file's tokenizer, for a new model of cfg, whose
 * V it sets unless --vocab did (which must then hold it). */
static at_tokenizer *tokenizer_of(const options *o, at_config *cfg)
{
	at_model src;
	char err[700];
	if (at_model_open(&src, o->tokenizer, 0, 0, &o->c.ropts, err,
			  sizeof err) < 0)
		cli_die("%s", err);
	if (!at_model_has(&src, "tokenizer.vocab"))
		cli_die("%s: --tokenizer: the file carries no tokenizer "
			"(andrea-import puts one in)", o->tokenizer);
	at_tokenizer *tok = cli_tokenizer(&src);
	at_model_close(&src);
	int n = at_tok_size(tok);
	if (!o->over.vocab)
		cfg->vocab = n;
	if (cfg->vocab < n) {
		at_tok_free(tok);
		cli_usage_error("--vocab %d: %s's tokenizer has %d tokens",
				cfg->vocab, o->tokenizer, n);
	}
	return tok;
}

/* A fresh run: seeded (or -m) parameters, zero moments, step 0. */
static void start(trainer *tr)
{
	options *o = tr->o;
	if (o->c.model) {
		load_model_file(o, &tr->m);
	} else {
		at_config cfg;
		config_from_options(o, &cfg);
		at_tokenizer *tok = o->tokenizer ? tokenizer_of(o, &cfg) : NULL;
		if (tr_model_init(&tr->m, &cfg, 0, 0) < 0)
			cli_die("out of memory");
		tr_model_seed(&tr->m, o->c.seed);
		tr->m.tok = tok;
	}
	if (!(tr->mom1 = calloc(tr->m.total, sizeof(float))) ||
	    !(tr->mom2 = calloc(tr->m.total, sizeof(float))))
		cli_die("out of memory");
	tr_state *st = &tr->st;
	st->step = 0;
	st->seed = o->c.seed;
	st->batch = o->batch;
	st->seq = o->seq ? o->seq : tr->m.cfg.ctx;
	st->val_fraction = o->val_fraction;
	st->h = o->h;
	st->h.steps = o->steps;
	if (!given(o, "min-lr"))
		st->h.min_lr = o->h.lr / 10;
	if (st->seq > tr->m.cfg.ctx)
		cli_usage_error("--seq %d exceeds the context of %d", st->seq,
				tr->m.cfg.ctx);
}

/* Writes the checkpoint (with ckpt), then the model, each atomically;
 * of several ranks, rank 0 writes while the others wait. */
static void save(trainer *tr, int ckpt)
{
	options *o = tr->o;
	at_writer w;
	if (tr->eng)
		engine_check(tr, tr_engine_pull(tr->eng, TR_PULL_PARAMS |
						TR_PULL_MOMENTS, tr->err,
						sizeof tr->err));
	if (!tr->lead) {
		engine_check(tr, tr_engine_barrier(tr->eng, tr->err,
						   sizeof tr->err));
		return;
	}
	if (ckpt && at_writer_open(&w, tr->ckpt, &o->c.wopts) < 0)
		cli_fail(w.err);
	if (ckpt && (tr_checkpoint_write(&w, &tr->m, tr->mom1, tr->mom2,
					 &tr->st) < 0 || at_writer_finish(&w) < 0)) {
		at_writer_abort(&w);
		cli_fail(w.err);
	}
	if (at_writer_open(&w, o->c.output, &o->c.wopts) < 0)
		cli_fail(w.err);
	if (tr_model_write(&tr->m, &w, 1, "", tr->m.p) < 0 ||
	    (tr->m.tok && at_tok_write(tr->m.tok, &w) < 0) ||
	    at_writer_finish(&w) < 0) {
		at_writer_abort(&w);
		cli_fail(w.err);
	}
	if (tr->eng)
		engine_check(tr, tr_engine_barrier(tr->eng, tr->err,
						   sizeof tr->err));
}

/* The mean loss over the held-out batches. */
static double evaluate(trainer *tr)
{
	double loss;
	engine_check(tr, tr_engine_eval(tr->eng, tr->o->eval_batches, &loss,
					tr->err, sizeof tr->err));
	return loss;
}

/* The first step's gradients, before clipping, with its batch and loss. */
static void dump_grads(trainer *tr, double loss)
{
	const int32_t *in, *tg;
	engine_check(tr, tr_engine_pull(tr->eng, TR_PULL_GRADS, tr->err,
					sizeof tr->err));
	tr_engine_batch(tr->eng, &in, &tg);
	at_writer w;
	if (at_writer_open(&w, tr->o->dump_grads, &tr->o->c.wopts) < 0)
		cli_fail(w.err);
	if (tr_grads_write(&w, &tr->m, in, tg, tr->st.batch, tr->st.seq, loss,
			   tr->st.step) < 0 || at_writer_finish(&w) < 0) {
		at_writer_abort(&w);
		cli_fail(w.err);
	}
}

/* One optimisation step: batch, forward, backward, clip, update; the
 * first one's gradients go to --dump-grads.  r->stop: a signal asked to
 * end the run here (of several ranks, to any of them). */
static void step(trainer *tr, tr_step_out *r)
{
	engine_check(tr, tr_engine_step(tr->eng, &tr->st, tr->o->stop_at,
					stop_signal != 0, r, tr->err,
					sizeof tr->err));
	if (tr->o->dump_grads && tr->rep.steps_run == 0)
		dump_grads(tr, r->loss);
	tr->st.step++;
}

/* The checkpoint's path: --checkpoint, or MODEL.ckpt; a fresh run must
 * not overwrite one without -f. */
static void checkpoint_path(const options *o, char *ckpt, size_t len)
{
	if (o->checkpoint)
		snprintf(ckpt, len, "%s", o->checkpoint);
	else
		snprintf(ckpt, len, "%s.ckpt", o->c.output);
	struct stat sb;
	if (!o->resume && o->data && !o->c.force && stat(ckpt, &sb) == 0)
		cli_die("%s exists: --resume continues its run, -f replaces it",
			ckpt);
}

static int train_main(options *o, at_device device, const tr_ranks *ranks)
{
	trainer tr = {.o = o, .ranks = ranks, .lead = !ranks || ranks->rank == 0};
	checkpoint_path(o, tr.ckpt, sizeof tr.ckpt);
	if (o->resume)
		resume(&tr);
	else
		start(&tr);
	tr_state *st = &tr.st;
	if (!o->stop_at || o->stop_at > st->h.steps)
		o->stop_at = st->h.steps;
	if (st->h.min_lr > st->h.lr)
		cli_usage_error("--min-lr %g exceeds --lr %g", st->h.min_lr,
				st->h.lr);
	if (!o->data) {
		if (st->step < o->stop_at)
			cli_usage_error("no training data: give --data FILE");
		save(&tr, 0);
		tr_model_free(&tr.m);
		free(tr.mom1);
		free(tr.mom2);
		return 0;
	}
	char err[800];
	if (tr_data_load(&tr.data, o->data, tr.m.tok, tr.m.cfg.vocab, st->val_fraction,
			 st->seq, &o->c.ropts, err, sizeof err) < 0)
		cli_die("%s", err);
	if (o->resume && st->data_size && (tr.data.size != st->data_size ||
					   tr.data.crc != st->data_crc))
		cli_die("%s differs from the data the checkpoint %s was trained "
			"on", o->data, tr.ckpt);
	st->data_size = tr.data.size;
	st->data_crc = tr.data.crc;
	st->eval_every = o->eval_every;
	st->eval_batches = o->eval_batches;
	if (o->resume && st->step < o->stop_at && tr.lead)
		fprintf(stderr, "%s: resuming %s at step %ld of %ld\n", cli_prog,
			tr.ckpt, st->step, st->h.steps);
	engine_check(&tr, tr_engine_new(&tr.eng, &tr.m, tr.mom1, tr.mom2,
					&tr.data, st->batch, st->seq, device,
					o->precision, o->attention, ranks,
					tr.err, sizeof tr.err));
	FILE *log = NULL;
	if (o->log && tr.lead && !(log = fopen(o->log, o->resume ? "a" : "w")))
		cli_die("%s: %s", o->log, strerror(errno));
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	train_report *rep = &tr.rep;
	train_report_start(rep, log, o->log, o->progress && tr.lead,
			   (long)st->batch * st->seq);
	int eval = st->val_fraction > 0 && o->eval_every > 0;
	tr_step_out r = {0};
	/* alone, a signal ends the run after the step it came in; ranks
	 * agree on the step through tr_engine_step (r.stop) */
	while (st->step < o->stop_at && !r.stop && (ranks || !stop_signal)) {
		double t = at_now();
		step(&tr, &r);
		rep->train_time += at_now() - t;
		rep->steps_run++;
		if (!isfinite(r.loss))
			cli_die("step %ld: the loss is %g: training diverged "
				"(lower --lr?)", st->step, r.loss);
		double val = NAN;
		if (eval && (st->step % o->eval_every == 0 || st->step == o->stop_at))
			val = evaluate(&tr);
		if (tr.lead)
			train_report_step(rep, tr.eng, st->step, o->stop_at, r.loss,
					  val, r.lr, r.norm);
		if (o->save_every > 0 && st->step % o->save_every == 0 &&
		    st->step < o->stop_at)
			save(&tr, 1);
	}
	save(&tr, st->step > 0);
	if (rep->tty && rep->progress && rep->steps_run)
		fputc('\n', stderr);
	if (!tr.lead)
		;
	else if (rep->steps_run)
		train_report_end(rep, tr.eng, st->step, st->h.steps, o->c.output,
				 tr.ckpt);
	else
		fprintf(stderr, "%s: %s is at step %ld of %ld: nothing to do (a "
			"larger --steps continues it); wrote %s\n", cli_prog,
			tr.ckpt, st->step, st->h.steps, o->c.output);
	tr_engine_free(tr.eng);
	if (log && fclose(log) != 0)
		cli_die("%s: write error: %s", o->log, strerror(errno));
	tr_data_free(&tr.data);
	tr_model_free(&tr.m);
	free(tr.mom1);
	free(tr.mom2);
	if (stop_signal || r.stop) {
		int sig = stop_signal ? stop_signal : SIGTERM; /* another rank's */
		if (tr.lead && stop_signal)
			fprintf(stderr, "%s: stopped by signal %d after step %ld; "
				"saved %s and %s\n", cli_prog, sig, st->step,
				o->c.output, tr.ckpt);
		else if (tr.lead)
			fprintf(stderr, "%s: stopped after step %ld by a signal to "
				"another rank; saved %s and %s\n", cli_prog,
				st->step, o->c.output, tr.ckpt);
		return 128 + sig;
	}
	return 0;
}

int main(int argc, char **argv)
{
	options o;
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
		CLI_INT("vocab", 0, &o.over.vocab, 1, 1 << 24),
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
		CLI_LONG("stop-at", 0, &o.stop_at, 0, LONG_MAX / 2),
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
		checkpoint_path(&o, ckpt, sizeof ckpt);
		return cli_ranks_launch(&o.ranks, argc, argv);
	}
	at_device dev = stage_device(&o.c, 1);
	stage_check_precision(dev, o.precision);
	/* a rank whose device came out the CPU: tr_engine_new refuses it */
	return train_main(&o, dev, role == CLI_RANK ? &ranks : NULL);
}
