/* train_report.c - andrea-train's progress, log and closing line. */
#include "cli/train_report.h"

#include <errno.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/clock.h"

/* The bytes of the log at path to keep for a run resumed at step
 * `from`: up to its first line of a later step or cut short; the whole
 * file where it cannot be read or holds lines no log of ours has. */
static off_t log_kept(const char *path, long from, off_t size)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return size;
	char line[4096];
	off_t keep = 0;
	long step;
	while (fgets(line, sizeof line, f)) {
		size_t n = strlen(line);
		if (n == 0 || line[n - 1] != '\n') { /* cut short: it goes */
			if (n == 0 || !feof(f))
				keep = size; /* a NUL, a long line: kept whole */
			break;
		}
		if (sscanf(line, "{\"step\": %ld", &step) == 1 && step > from)
			break;
		keep += (off_t)n;
	}
	if (ferror(f))
		keep = size;
	fclose(f);
	return keep;
}

FILE *train_report_open_log(const char *path, long from)
{
	/* "a", not "a+": a process reading its own log pipe would never
	 * see its reader go */
	FILE *f = fopen(path, from == 0 ? "w" : "a");
	struct stat st;
	if (!f || from == 0 || fstat(fileno(f), &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return f; /* a pipe or a device keeps nothing to cut */
	off_t keep = log_kept(path, from, st.st_size);
	if (keep < st.st_size && ftruncate(fileno(f), keep) != 0) {
		int e = errno;
		fclose(f);
		errno = e;
		return NULL;
	}
	return f; /* appending: writes go to the (new) end */
}

void train_report_start(train_report *r, FILE *log, const char *log_path,
			int progress, long tokens_a_step)
{
	*r = (train_report){.log = log, .log_path = log_path,
			    .tokens_a_step = tokens_a_step, .last_val = NAN,
			    .last_loss = NAN, .t0 = at_now()};
	r->tty = isatty(STDERR_FILENO);
	r->progress = progress || r->tty;
}

/* "1h02m", "3m04s" or "12s". */
static void duration(char *buf, size_t len, double s)
{
	long t = (long)(s + 0.5);
	if (t >= 3600)
		snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
	else if (t >= 60)
		snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
	else
		snprintf(buf, len, "%lds", t);
}

/* The training throughput so far. */
static double tokens_per_s(const train_report *r)
{
	return r->train_time > 0 ? (double)r->steps_run * r->tokens_a_step /
	       r->train_time : 0.0;
}

int train_report_step(train_report *r, const tr_engine *e, long s, long end,
		      double loss, double val, double lr, double norm)
{
	double tps = tokens_per_s(r);
	r->last_loss = loss;
	if (!isnan(val))
		r->last_val = val;
	/* on a terminal one line rewritten each step; elsewhere a plain line
	 * a second at most, and the last step's */
	double t = at_now();
	if (r->progress && (r->tty || s == end || t - r->last_line >= 1.0)) {
		char eta[32], vbuf[32] = "";
		duration(eta, sizeof eta, r->steps_run ?
			 r->train_time / r->steps_run * (end - s) : 0);
		if (!isnan(r->last_val))
			snprintf(vbuf, sizeof vbuf, "  val %.4f", r->last_val);
		fprintf(stderr, "%sstep %ld/%ld  loss %.4f%s  %.0f tok/s  ETA %s%s",
			r->tty ? "\r" : "", s, end, loss, vbuf, tps, eta,
			r->tty ? "\033[K" : "\n");
		fflush(stderr);
		r->last_line = t;
	}
	if (!r->log)
		return 0;
	fprintf(r->log, "{\"step\": %ld, \"loss\": %.6f", s, loss);
	if (!isnan(val))
		fprintf(r->log, ", \"val_loss\": %.6f", val);
	fprintf(r->log, ", \"lr\": %.6g, \"grad_norm\": %.6g, "
		"\"tokens_per_s\": %.1f, \"elapsed\": %.6f", lr, norm, tps,
		t - r->t0);
	size_t buf, peak;
	if (tr_engine_memory(e, &buf, &peak))
		fprintf(r->log, ", \"device_buffers\": %zu, \"device_peak\": %zu",
			buf, peak);
	fputs("}\n", r->log);
	if (fflush(r->log) == 0 && !ferror(r->log))
		return 0;
	r->log_errno = errno ? errno : EIO;
	return -1;
}

void train_report_end(const train_report *r, const tr_engine *e, long step,
		      long steps, const char *model, const char *ckpt)
{
	char where[600], mem[120] = "", val[40] = "", took[64];
	size_t buf, peak;
	tr_engine_describe(e, where, sizeof where);
	if (tr_engine_memory(e, &buf, &peak))
		snprintf(mem, sizeof mem, ", peak device memory %.2f GiB (buffers "
			 "%.2f GiB)", peak / 1073741824.0, buf / 1073741824.0);
	if (!isnan(r->last_val))
		snprintf(val, sizeof val, ", held-out %.4f", r->last_val);
	duration(took, sizeof took, r->train_time);
	if (r->eval_time >= 1.0) { /* a run can spend more on it than on steps */
		size_t n = strlen(took);
		snprintf(took + n, sizeof took - n, " (held-out ");
		n = strlen(took);
		duration(took + n, sizeof took - n, r->eval_time);
		n = strlen(took);
		snprintf(took + n, sizeof took - n, ")");
	}
	fprintf(stderr, "%s: %ld step%s on %s in %s, to step %ld of %ld: loss "
		"%.4f%s, %.0f tokens/s%s; wrote %s and %s\n", cli_prog,
		r->steps_run, r->steps_run == 1 ? "" : "s", where, took, step,
		steps, r->last_loss, val, tokens_per_s(r), mem, model, ckpt);
}
