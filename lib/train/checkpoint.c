/* checkpoint.c - the resumable state of a training run as an andrea
 * stream: train_state, config, the parameters, the AdamW moments. */
#include "train/train.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stream/stream.h"

#define CKPT_FORMAT 1

/* A zero-size i32 record that carries only attributes. */
static void attr_record(at_tensor *t, const char *name)
{
	memset(t, 0, sizeof *t);
	t->dtype = AT_I32;
	t->rank = 1;
	snprintf(t->name, sizeof t->name, "%s", name);
	static int32_t none;
	t->data = &none;
}

int tr_grads_write(at_writer *w, const tr_model *m, const int32_t *inputs,
		   const int32_t *targets, int B, int T, double loss, long step)
{
	at_tensor t;
	uint64_t dims[2] = {(uint64_t)B, (uint64_t)T + 1};
	if (at_tensor_init(&t, "tokens", AT_I32, 2, dims) < 0) {
		snprintf(w->err, sizeof w->err, "out of memory");
		return -1;
	}
	int32_t *d = t.data;
	for (int b = 0; b < B; b++) {
		memcpy(d + (size_t)b * (T + 1), inputs + (size_t)b * T,
		       (size_t)T * sizeof *d);
		d[(size_t)b * (T + 1) + T] = targets[(size_t)b * T + T - 1];
	}
	at_attr_setf(&t.attrs, "loss", "%.17g", loss);
	at_attr_setf(&t.attrs, "step", "%ld", step);
	int rc = at_write_tensor(w, &t) < 0 ||
		 tr_model_write(m, w, 0, "", m->g) < 0 ? -1 : 0;
	at_tensor_free(&t);
	return rc;
}

int tr_checkpoint_write(at_writer *w, const tr_model *m, const float *mom1,
			const float *mom2, const tr_state *st)
{
	at_tensor t;
	attr_record(&t, "train_state");
	at_attrs *a = &t.attrs;
	at_attr_setf(a, "format", "%d", CKPT_FORMAT);
	at_attr_setf(a, "step", "%ld", st->step);
	at_attr_setf(a, "seed", "%" PRIu64, st->seed);
	at_attr_setf(a, "batch", "%d", st->batch);
	at_attr_setf(a, "seq", "%d", st->seq);
	at_attr_setf(a, "val_fraction", "%.17g", st->val_fraction);
	at_attr_setf(a, "data_size", "%" PRIu64, st->data_size);
	at_attr_setf(a, "data_crc", "%" PRIu32, st->data_crc);
	at_attr_setf(a, "lr", "%.17g", st->h.lr);
	at_attr_setf(a, "min_lr", "%.17g", st->h.min_lr);
	at_attr_setf(a, "warmup", "%ld", st->h.warmup);
	at_attr_setf(a, "steps", "%ld", st->h.steps);
	at_attr_setf(a, "weight_decay", "%.17g", st->h.weight_decay);
	at_attr_setf(a, "clip", "%.17g", st->h.clip);
	at_attr_setf(a, "beta1", "%.17g", st->h.beta1);
	at_attr_setf(a, "beta2", "%.17g", st->h.beta2);
	at_attr_setf(a, "eps", "%.17g", st->h.eps);
	if (st->eval_every >= 0)
		at_attr_setf(a, "eval_every", "%ld", st->eval_every);
	if (st->eval_batches >= 1)
		at_attr_setf(a, "eval_batches", "%ld", st->eval_batches);
	if (st->min_lr_given)
		at_attr_set(a, "min_lr_given", "1");
	if (m->biases) /* GPT-2's form; absent: the ANDREA model's */
		at_attr_set(a, "biases", "1");
	if (m->tied)
		at_attr_set(a, "tied", "1");
	if (at_write_tensor(w, &t) < 0)
		return -1;
	return tr_model_write(m, w, 1, "", m->p) < 0 ||
	       tr_model_write(m, w, 0, "adam.m.", mom1) < 0 ||
	       tr_model_write(m, w, 0, "adam.v.", mom2) < 0 ||
	       (m->tok && at_tok_write(m->tok, w) < 0) ? -1 : 0;
}

/* Reads a whole-number or real attribute that must be present. */
static int need_long(const at_attrs *a, const char *key, long *out, char *why,
		     size_t len)
{
	if (at_attr_long(a, key, out) == 0)
		return 0;
	snprintf(why, len, "train_state: %s missing or not a number", key);
	return -1;
}

static int need_double(const at_attrs *a, const char *key, double *out,
		       char *why, size_t len)
{
	if (at_attr_double(a, key, out) == 0)
		return 0;
	snprintf(why, len, "train_state: %s missing or not a number", key);
	return -1;
}

/* The train_state attributes into st. */
static int state_from_attrs(const at_attrs *a, tr_state *st, char *why,
			    size_t len)
{
	long format, seed, batch, seq, size, crc;
	if (need_long(a, "format", &format, why, len) < 0)
		return -1;
	if (format != CKPT_FORMAT) {
		snprintf(why, len, "train_state: format %ld, this version reads %d",
			 format, CKPT_FORMAT);
		return -1;
	}
	if (need_long(a, "step", &st->step, why, len) < 0 ||
	    need_long(a, "seed", &seed, why, len) < 0 ||
	    need_long(a, "batch", &batch, why, len) < 0 ||
	    need_long(a, "seq", &seq, why, len) < 0 ||
	    need_double(a, "val_fraction", &st->val_fraction, why, len) < 0 ||
	    need_long(a, "data_size", &size, why, len) < 0 ||
	    need_long(a, "data_crc", &crc, why, len) < 0 ||
	    need_double(a, "lr", &st->h.lr, why, len) < 0 ||
	    need_double(a, "min_lr", &st->h.min_lr, why, len) < 0 ||
	    need_long(a, "warmup", &st->h.warmup, why, len) < 0 ||
	    need_long(a, "steps", &st->h.steps, why, len) < 0 ||
	    need_double(a, "weight_decay", &st->h.weight_decay, why, len) < 0 ||
	    need_double(a, "clip", &st->h.clip, why, len) < 0 ||
	    need_double(a, "beta1", &st->h.beta1, why, len) < 0 ||
	    need_double(a, "beta2", &st->h.beta2, why, len) < 0 ||
	    need_double(a, "eps", &st->h.eps, why, len) < 0)
		return -1;
	if (st->step < 0 || seed < 0 || batch < 1 || seq < 1 || size < 0 ||
	    crc < 0 || crc > (long)UINT32_MAX || st->h.warmup < 0 ||
	    st->h.steps < 0) {
		snprintf(why, len, "train_state: a value is out of range");
		return -1;
	}
	/* the ranges of the options they come from: a value past them (a
	 * hand-edited checkpoint) would crash or poison the run */
	const struct {
		const char *key;
		double v, lo, hi; /* lo <= v <= hi; lo_open: lo < v */
		int lo_open, hi_open;
	} range[] = {
		{"val_fraction", st->val_fraction, 0, 1, 0, 1},
		{"lr", st->h.lr, 0, HUGE_VAL, 0, 1},
		{"min_lr", st->h.min_lr, 0, st->h.lr, 0, 0},
		{"weight_decay", st->h.weight_decay, 0, HUGE_VAL, 0, 1},
		{"clip", st->h.clip, 0, HUGE_VAL, 0, 1},
		{"beta1", st->h.beta1, 0, 1, 0, 1},
		{"beta2", st->h.beta2, 0, 1, 0, 1},
		{"eps", st->h.eps, 0, HUGE_VAL, 1, 1},
	};
	for (size_t i = 0; i < sizeof range / sizeof *range; i++) {
		double v = range[i].v;
		if (range[i].lo_open ? v > range[i].lo : v >= range[i].lo) {
			if (range[i].hi_open ? v < range[i].hi : v <= range[i].hi)
				continue;
		}
		snprintf(why, len, "train_state: %s=%.17g is not in %s%g, %g%s",
			 range[i].key, v,
			 range[i].lo_open ? "(" : "[", range[i].lo, range[i].hi,
			 range[i].hi_open ? ")" : "]");
		return -1;
	}
	long form;
	/* written by later versions only: absent, the command line's apply */
	if (at_attr_long(a, "eval_every", &st->eval_every) != 0 || st->eval_every < 0)
		st->eval_every = -1;
	if (at_attr_long(a, "eval_batches", &st->eval_batches) != 0 ||
	    st->eval_batches < 1 || st->eval_batches > 1 << 20)
		st->eval_batches = -1;
	/* absent (and in checkpoints before it): given unless it is a tenth
	 * of lr, the default */
	if (at_attr_long(a, "min_lr_given", &form) == 0)
		st->min_lr_given = form == 1;
	else
		st->min_lr_given = st->h.min_lr != st->h.lr / 10;
	st->biases = at_attr_long(a, "biases", &form) == 0 && form == 1;
	st->tied = at_attr_long(a, "tied", &form) == 0 && form == 1;
	st->seed = (uint64_t)seed;
	st->batch = (int)batch;
	st->seq = (int)seq;
	st->data_size = (uint64_t)size;
	st->data_crc = (uint32_t)crc;
	return 0;
}

int tr_checkpoint_read_head(at_reader *r, tr_state *st, at_config *cfg,
			    char *err, size_t errlen)
{
	static const char *want[] = {"train_state", "config"};
	at_header h;
	char why[300];
	for (int i = 0; i < 2; i++) {
		int rc = at_read_header(r, &h);
		if (rc < 0) {
			snprintf(err, errlen, "%s", r->err);
			return -1;
		}
		if (rc == 0 || strcmp(h.name, want[i]) != 0) {
			snprintf(err, errlen, "%s: not a checkpoint: record %d is %s%s%s, "
				 "expected '%s'", r->label, i + 1, rc ? "'" : "missing",
				 rc ? h.name : "", rc ? "'" : "", want[i]);
			return -1;
		}
		int bad = i == 0 ? state_from_attrs(&h.attrs, st, why, sizeof why)
				 : at_config_from_attrs(&h.attrs, cfg, why, sizeof why);
		if (!bad && i == 1 && st->seq > cfg->ctx) {
			snprintf(err, errlen, "%s: record 1: train_state: seq=%d "
				 "exceeds the context of %d (record %d 'config')",
				 r->label, st->seq, cfg->ctx, h.index);
			return -1;
		}
		if (bad) {
			snprintf(err, errlen, "%s: record %d: %s", r->label, h.index,
				 why);
			return -1;
		}
		if (at_skip_payload(r, &h) < 0) {
			snprintf(err, errlen, "%s", r->err);
			return -1;
		}
	}
	return 0;
}

/* Reads the next record, which must be prefix+p's name with p's shape,
 * into buf. */
static int read_one(at_reader *r, const tr_param *p, const char *prefix,
		    float *buf, char *err, size_t errlen)
{
	at_header h;
	char name[TR_NAME + 16], got[128], want[128];
	snprintf(name, sizeof name, "%s%s", prefix, p->name);
	at_shape_str(p->rank, p->dims, want, sizeof want);
	int rc = at_read_header(r, &h);
	if (rc < 0) {
		snprintf(err, errlen, "%s", r->err);
		return -1;
	}
	if (rc == 0) {
		snprintf(err, errlen, "%s: checkpoint ends before '%s'", r->label,
			 name);
		return -1;
	}
	at_shape_str(h.rank, h.dims, got, sizeof got);
	if (strcmp(h.name, name) != 0 || h.dtype != AT_F32 || h.rank != p->rank ||
	    memcmp(h.dims, p->dims, (size_t)p->rank * sizeof *h.dims) != 0) {
		snprintf(err, errlen, "%s: record %d: '%s' %s %s, expected '%s' f32 "
			 "%s", r->label, h.index, h.name, at_dtype_name(h.dtype) ?
			 at_dtype_name(h.dtype) : "?", got, name, want);
		return -1;
	}
	at_tensor t;
	if (at_read_payload(r, &h, &t) < 0) {
		snprintf(err, errlen, "%s", r->err);
		return -1;
	}
	memcpy(buf + p->off, t.data, p->n * sizeof *buf);
	at_tensor_free(&t);
	return 0;
}

int tr_checkpoint_read_body(at_reader *r, tr_model *m, float *mom1,
			    float *mom2, char *err, size_t errlen)
{
	const char *prefix[3] = {"", "adam.m.", "adam.v."};
	float *buf[3] = {m->p, mom1, mom2};
	for (int k = 0; k < 3; k++)
		for (int i = 0; i < m->n_params; i++)
			if (read_one(r, &m->params[i], prefix[k], buf[k], err,
				     errlen) < 0)
				return -1;
	/* then the tokenizer's records (three, or four with added tokens),
	 * or nothing */
	at_tensor rec[AT_TOK_RECORDS] = {{0}};
	at_header h;
	int n = 0, rc, ok = -1;
	char why[300];
	while ((rc = at_read_header(r, &h)) == 1) {
		if (n == AT_TOK_RECORDS || strcmp(h.name, at_tok_record_name(n)) != 0) {
			snprintf(err, errlen, "%s: record %d '%s': unexpected after "
				 "the %s", r->label, h.index, h.name,
				 n ? at_tok_record_name(n - 1) : "moments");
			goto out;
		}
		if (at_read_payload(r, &h, &rec[n++]) < 0) {
			rc = -1;
			break;
		}
	}
	if (rc < 0)
		snprintf(err, errlen, "%s", r->err);
	else if (n > 0 && n < 3)
		snprintf(err, errlen, "%s: the checkpoint ends after %s", r->label,
			 at_tok_record_name(n - 1));
	else if (n >= 3 && !(m->tok = at_tok_from_records(&rec[0], &rec[1], &rec[2],
							   n == 4 ? &rec[3] : NULL,
							   why, sizeof why)))
		snprintf(err, errlen, "%s: %s", r->label, why);
	else
		ok = 0;
out:
	for (int i = 0; i < AT_TOK_RECORDS; i++)
		at_tensor_free(&rec[i]);
	return ok;
}
