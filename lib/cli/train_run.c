/* train_run.c - andrea-train's training run (train_run.h). */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/tokens.h"
#include "cli/train_report.h"
#include "cli/train_run.h"
#include "core/clock.h"
#include "train/engine.h"

static volatile sig_atomic_t stop_signal;
/* --log could not be written (a full disk, its reader gone): the run
 * stops as a signal stops it, saved, and then fails */
static int log_failed;

static void on_signal(int sig)
{
	stop_signal = sig;
}

typedef struct {
	train_options *o;
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

/* Restores a checkpoint: config, state and tensors; settings given on the
 * command line must agree with the ones that fix the run. */
static void resume(trainer *tr)
{
	train_options *o = tr->o;
	at_reader r;
	char err[800];
	at_config cfg;
	if (at_reader_open(&r, tr->ckpt, &o->c.ropts) < 0)
		cli_fail(r.err);
	if (tr_checkpoint_read_head(&r, &tr->st, &cfg, err, sizeof err) < 0)
		cli_die("%s", err);
	char what[4300];
	snprintf(what, sizeof what, "the checkpoint %s", tr->ckpt);
	train_config_agrees(o, &cfg, what);
	tr_state *st = &tr->st;
	if (o->c.seed_given && o->c.seed != st->seed)
		cli_die("--seed %llu does not match %s (seed %llu)",
			(unsigned long long)o->c.seed, what,
			(unsigned long long)st->seed);
	if (train_given(o, "batch") && o->batch != st->batch)
		cli_die("--batch %d does not match %s (%d)", o->batch, what,
			st->batch);
	if (train_given(o, "seq") && o->seq != st->seq)
		cli_die("--seq %d does not match %s (%d)", o->seq, what, st->seq);
	if (train_given(o, "val-fraction") && o->val_fraction != st->val_fraction)
		cli_die("--val-fraction %g does not match %s (%g)",
			o->val_fraction, what, st->val_fraction);
	/* the schedule may be changed on resuming: what is given wins; a
	 * --min-lr given to the run stays, its default (a tenth of --lr)
	 * follows a new --lr */
	if (train_given(o, "min-lr")) {
		st->h.min_lr = o->h.min_lr;
		st->min_lr_given = 1;
	} else if (train_given(o, "lr") && !st->min_lr_given)
		st->h.min_lr = o->h.lr / 10;
	else if (train_given(o, "lr") && st->h.min_lr > o->h.lr)
		cli_usage_error("--lr %g is below the --min-lr %g of %s: give "
				"--min-lr too", o->h.lr, st->h.min_lr, what);
	if (train_given(o, "lr"))
		st->h.lr = o->h.lr;
	if (train_given(o, "warmup"))
		st->h.warmup = o->h.warmup;
	if (train_given(o, "steps"))
		st->h.steps = o->steps;
	if (train_given(o, "weight-decay"))
		st->h.weight_decay = o->h.weight_decay;
	if (train_given(o, "clip"))
		st->h.clip = o->h.clip;
	if (!train_given(o, "eval-every") && st->eval_every >= 0)
		o->eval_every = st->eval_every;
	if (!train_given(o, "eval-batches") && st->eval_batches > 0)
		o->eval_batches = st->eval_batches;
	train_model_init(&tr->m, &cfg, st->biases, st->tied, tr->ckpt);
	if (!(tr->mom1 = calloc(tr->m.total, sizeof(float))) ||
	    !(tr->mom2 = calloc(tr->m.total, sizeof(float))))
		cli_die("out of memory for the moments of %s", tr->ckpt);
	if (tr_checkpoint_read_body(&r, &tr->m, tr->mom1, tr->mom2, err,
				    sizeof err) < 0)
		cli_die("%s", err);
	at_reader_close(&r);
}

/* --tokenizer MODEL: that file's tokenizer, for a new model of cfg, whose
 * V it sets unless --vocab did (which must then hold it). */
static at_tokenizer *tokenizer_of(const train_options *o, at_config *cfg)
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
	train_options *o = tr->o;
	if (o->c.model) {
		train_load_model(o, &tr->m);
	} else {
		at_config cfg;
		train_config(o, &cfg);
		at_tokenizer *tok = o->tokenizer ? tokenizer_of(o, &cfg) : NULL;
		train_model_init(&tr->m, &cfg, 0, 0, "the model");
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
	st->min_lr_given = train_given(o, "min-lr");
	if (!st->min_lr_given)
		st->h.min_lr = o->h.lr / 10;
	if (st->seq > tr->m.cfg.ctx)
		cli_usage_error("--seq %d exceeds the context of %d", st->seq,
				tr->m.cfg.ctx);
}

/* Ends the run, writing nothing, where an update left a parameter that
 * is not finite: a diverged run's last step, whose loss was taken
 * before it. */
static void check_finite(const trainer *tr)
{
	const tr_model *m = &tr->m;
	for (int i = 0; i < m->n_params; i++) {
		const tr_param *p = &m->params[i];
		for (size_t j = 0; j < p->n; j++)
			if (!isfinite(m->p[p->off + j]))
				cli_die("step %ld: %s[%zu] is %s%s; nothing written",
					tr->st.step, p->name, j,
					isnan(m->p[p->off + j]) ? "NaN" : "infinite",
					tr->rep.steps_run ? ": training diverged "
					"(lower --lr?)" : "");
	}
}

/* Writes the checkpoint (with ckpt), then the model, each atomically;
 * of several ranks, rank 0 writes while the others wait. */
static void save(trainer *tr, int ckpt)
{
	train_options *o = tr->o;
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
	check_finite(tr);
	at_write_opts wo = cli_write_opts(&o->c, tr->ckpt);
	if (ckpt && at_writer_open(&w, tr->ckpt, &wo) < 0)
		cli_fail(w.err);
	if (ckpt && (tr_checkpoint_write(&w, &tr->m, tr->mom1, tr->mom2,
					 &tr->st) < 0 || at_writer_finish(&w) < 0)) {
		at_writer_abort(&w);
		cli_fail(w.err);
	}
	wo = cli_write_opts(&o->c, o->c.output);
	if (at_writer_open(&w, o->c.output, &wo) < 0)
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
	at_write_opts wo = cli_write_opts(&tr->o->c, tr->o->dump_grads);
	if (at_writer_open(&w, tr->o->dump_grads, &wo) < 0)
		cli_fail(w.err);
	if (tr_grads_write(&w, &tr->m, in, tg, tr->st.batch, tr->st.seq, loss,
			   tr->st.step) < 0 || at_writer_finish(&w) < 0) {
		at_writer_abort(&w);
		cli_fail(w.err);
	}
}

/* A loss as the error messages print it: printf writes a NaN's sign
 * ("-nan", as some BLAS builds' sums make it), which means nothing. */
static double shown(double loss)
{
	return isnan(loss) ? fabs(loss) : loss;
}

/* Whether the held-out loss is measured once `steps` steps are done. */
static int eval_due(const trainer *tr, long steps)
{
	const train_options *o = tr->o;
	return tr->st.val_fraction > 0 && o->eval_every > 0 &&
	       (steps % o->eval_every == 0 || steps == o->stop_at);
}

/* Whether a checkpoint is written once `steps` steps are done (the last
 * one's is written in any case). */
static int save_due(const trainer *tr, long steps)
{
	long every = tr->o->save_every;
	return every > 0 && steps % every == 0 && steps < tr->o->stop_at;
}

/* One optimisation step: batch, forward, backward, clip, update; the
 * first one's gradients go to --dump-grads.  The next step may start on
 * the device before this one's loss is read when nothing comes between
 * (the same on every rank: no signal counts).  r->stop: a signal asked
 * to end the run here (of several ranks, to any of them). */
static void step(trainer *tr, tr_step_out *r)
{
	const train_options *o = tr->o;
	long next = tr->st.step + 1;
	int dump = o->dump_grads && tr->rep.steps_run == 0;
	int ahead = !dump && !eval_due(tr, next) && !save_due(tr, next);
	engine_check(tr, tr_engine_step(tr->eng, &tr->st, o->stop_at, ahead,
					stop_signal != 0 || log_failed, r, tr->err,
					sizeof tr->err));
	if (dump)
		dump_grads(tr, r->loss);
	tr->st.step++;
}

/* What the training data is, in the refusal of an output over it. */
static const char *const data_what[] = {"the training data (--data)"};

/* Refuses an output that cannot hold what is written to it before any
 * work: a directory, a name in a folder that does not exist or cannot
 * be written, a terminal, the training data itself. */
static void check_output(const train_options *o, const char *path,
			 const char *what)
{
	struct stat sb;
	int exists = stat(path, &sb) == 0;
	if (exists && S_ISDIR(sb.st_mode))
		cli_usage_error("%s %s is a directory", what, path);
	if (!exists || S_ISREG(sb.st_mode)) { /* made in its folder */
		char where[8200];
		if (cli_resolve_path(path, where, sizeof where) < 0)
			cli_die("%s %s: its folder: %s", what, path,
				strerror(errno));
		*strrchr(where, '/') = 0;
		if (access(where[0] ? where : "/", W_OK | X_OK) != 0)
			cli_die("%s %s: its folder %s: %s", what, path,
				where[0] ? where : "/", strerror(errno));
	}
	cli_output_not_input(what, path, 1, data_what, &o->data);
	cli_refuse_terminal(&o->c, path);
}

/* The checkpoint's path: --checkpoint, or MODEL.ckpt; a fresh run must
 * not overwrite one without -f, and neither output may be what
 * check_output refuses. */
void train_checkpoint_path(const train_options *o, char *ckpt, size_t len)
{
	struct stat sb;
	check_output(o, o->c.output, "-o");
	if (o->checkpoint) {
		snprintf(ckpt, len, "%s", o->checkpoint);
	} else {
		/* MODEL.ckpt beside a device or a fifo would be a stray file */
		if (o->data && stat(o->c.output, &sb) == 0 &&
		    !S_ISREG(sb.st_mode))
			cli_usage_error("-o %s is not a regular file: name the "
					"checkpoint with --checkpoint",
					o->c.output);
		snprintf(ckpt, len, "%s.ckpt", o->c.output);
	}
	if (o->data)
		check_output(o, ckpt, "the checkpoint");
	if (o->dump_grads)
		check_output(o, o->dump_grads, "--dump-grads");
	cli_output_not_input("--log", o->log, 1, data_what, &o->data);
	/* no file written twice over: one name for each */
	const char *path[] = {o->c.output, o->data ? ckpt : NULL, o->log,
			      o->dump_grads};
	static const char *what[] = {"-o", "the checkpoint", "--log",
				     "--dump-grads"};
	for (int i = 1; i < 4; i++)
		for (int j = 0; j < i; j++)
			if (path[i] && path[j] && (strcmp(path[i], path[j]) == 0 ||
						   cli_same_file(path[i], path[j])))
				cli_usage_error("%s %s is %s too", what[i],
						path[i], what[j]);
	if (!o->resume && o->data && !o->c.force && stat(ckpt, &sb) == 0 &&
	    S_ISREG(sb.st_mode)) /* a device keeps no run to lose */
		cli_die("%s exists: --resume continues its run, -f replaces it",
			ckpt);
}

int train_run(train_options *o, at_device device, const tr_ranks *ranks)
{
	trainer tr = {.o = o, .ranks = ranks, .lead = !ranks || ranks->rank == 0};
	train_checkpoint_path(o, tr.ckpt, sizeof tr.ckpt);
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
	if (o->log && tr.lead &&
	    !(log = train_report_open_log(o->log, o->resume ? st->step : 0)))
		cli_die("%s: %s", o->log, strerror(errno));
	struct sigaction sa = {.sa_handler = on_signal};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL); /* a closed terminal, a dropped ssh */
	/* a --log pipe whose reader left fails its write, not the run */
	struct sigaction ign = {.sa_handler = SIG_IGN}, pipe_was;
	sigemptyset(&ign.sa_mask);

	train_report *rep = &tr.rep;
	train_report_start(rep, log, o->log, o->progress && tr.lead,
			   (long)st->batch * st->seq);
	tr_step_out r = {0};
	/* alone, a signal ends the run after the step it came in; ranks
	 * agree on the step through tr_engine_step (r.stop) */
	while (st->step < o->stop_at && !r.stop &&
	       (ranks || (!stop_signal && !log_failed))) {
		double t = at_now();
		step(&tr, &r);
		rep->train_time += at_now() - t;
		rep->steps_run++;
		if (!isfinite(r.loss))
			cli_die("step %ld: the loss is %g: training diverged "
				"(lower --lr?)", st->step, shown(r.loss));
		double val = NAN;
		if (eval_due(&tr, st->step)) {
			t = at_now();
			val = evaluate(&tr);
			rep->eval_time += at_now() - t;
			if (!isfinite(val))
				cli_die("step %ld: the held-out loss is %g: training "
					"diverged (lower --lr?)", st->step, shown(val));
		}
		if (tr.lead) {
			sigaction(SIGPIPE, &ign, &pipe_was);
			log_failed |= train_report_step(rep, tr.eng, st->step,
							o->stop_at, r.loss, val,
							r.lr, r.norm) < 0;
			sigaction(SIGPIPE, &pipe_was, NULL);
		}
		if (save_due(&tr, st->step))
			save(&tr, 1);
	}
	/* a resumed run that made no step leaves its checkpoint as it was */
	save(&tr, st->step > 0 && (rep->steps_run || !o->resume));
	if (rep->tty && rep->progress && rep->steps_run)
		fputc('\n', stderr);
	if (!tr.lead)
		;
	else if (rep->steps_run)
		train_report_end(rep, tr.eng, st->step, st->h.steps, o->c.output,
				 tr.ckpt);
	else if (stop_signal || r.stop)
		; /* stopped before its first step: said below */
	else if (!o->resume) /* --steps 0: no step, so no checkpoint */
		fprintf(stderr, "%s: --steps 0: nothing to train; wrote %s\n",
			cli_prog, o->c.output);
	else if (st->step < st->h.steps)
		fprintf(stderr, "%s: %s is at step %ld, and --stop-at is %ld: "
			"nothing to do; wrote %s\n", cli_prog, tr.ckpt,
			st->step, o->stop_at, o->c.output);
	else
		fprintf(stderr, "%s: %s is at step %ld of %ld: nothing to do (a "
			"larger --steps continues it); wrote %s\n", cli_prog,
			tr.ckpt, st->step, st->h.steps, o->c.output);
	tr_engine_free(tr.eng);
	if (log && fclose(log) != 0 && !log_failed)
		cli_die("%s: write error: %s", o->log, strerror(errno));
	tr_data_free(&tr.data);
	tr_model_free(&tr.m);
	free(tr.mom1);
	free(tr.mom2);
	if (log_failed) {
		fprintf(stderr, "%s: %s: write error: %s; stopped after step %ld, "
			"saved %s and %s\n", cli_prog, o->log,
			strerror(rep->log_errno), st->step, o->c.output, tr.ckpt);
		return 1;
	}
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
