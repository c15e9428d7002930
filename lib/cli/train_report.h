/* train_report.h - what andrea-train says while it trains: the progress
 * line (rewritten on a terminal, plain lines a second apart elsewhere),
 * the --log record of each step, and the one closing line of a run
 * (andrea-train(1), Progress). */
#ifndef ANDREA_TRAIN_REPORT_H
#define ANDREA_TRAIN_REPORT_H

#include <stdio.h>

#include "train/engine.h"

typedef struct {
	FILE *log;             /* --log, or NULL */
	const char *log_path;
	int progress;          /* --progress, or stderr is a terminal */
	int tty;               /* stderr is a terminal: one line, rewritten */
	long tokens_a_step;    /* batch x sequence length */
	double t0, train_time; /* when the run began; seconds in its steps */
	double eval_time;      /* seconds measuring the held-out loss */
	long steps_run;
	double last_line;      /* when the last plain progress line went out */
	double last_val;       /* the latest held-out loss, NAN before one */
	double last_loss;
	int log_errno;         /* why --log could not be written, or 0 */
} train_report;

/* Opens --log at path for a run that starts at step `from` (0: a fresh
 * run, which empties it): a resumed run appends, after cutting off the
 * lines of steps past `from` that a run stopped without saving logged
 * (the resumed run takes them again) and a line cut short.  NULL with
 * errno set on failure. */
FILE *train_report_open_log(const char *path, long from);
/* Starts a run's report: progress as --progress or a terminal says. */
void train_report_start(train_report *r, FILE *log, const char *log_path,
			int progress, long tokens_a_step);
/* After step `step` (counting from 1) of a run that stops at `end`: its
 * loss, held-out loss (NAN: not measured), rate and gradient norm.
 * Returns 0, or -1 when --log could not be written (r->log_errno). */
int train_report_step(train_report *r, const tr_engine *e, long step,
		      long end, double loss, double val, double lr,
		      double norm);
/* The closing line: the steps and where they ran, their time, the step
 * reached of `steps`, the losses, the rate, the files written. */
void train_report_end(const train_report *r, const tr_engine *e, long step,
		      long steps, const char *model, const char *ckpt);

#endif
