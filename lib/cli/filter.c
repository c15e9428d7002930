/* filter.c - the shared read / pass-through / compute / write loop. */
#include "cli/filter.h"

#include "core/parallel.h"

#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Records passed through while a run's outputs are pending wait here, in
 * order, to follow those outputs, so that a small record between two
 * large ones (the tokens andrea-embed passes along with each x) does not
 * make the stage wait for its device to finish the last one.  Up to
 * DEFER_MAX bytes; a record that would go beyond drains first instead. */
#define DEFER_MAX ((uint64_t)64 << 20)
static struct {
	FILE *f;        /* an open_memstream over buf */
	char *buf;
	size_t size;    /* the stream's bytes so far */
	size_t whole;   /* of them, whole records */
	at_writer w;    /* writing into f */
} deferred;

/* Writes the deferred records to w and empties the buffer. */
static void write_deferred(at_writer *w)
{
	if (!deferred.f)
		return;
	fclose(deferred.f);
	deferred.f = NULL;
	int rc = at_writer_put(w, deferred.buf, deferred.whole);
	free(deferred.buf);
	deferred.buf = NULL;
	deferred.size = deferred.whole = 0;
	if (rc < 0)
		cli_fail(w->err);
}

void at_filter_drain(at_filter *f)
{
	if (f->drain && f->out && !f->draining) {
		f->draining = 1;
		f->drain(f, f->out);
		f->pending = 0;
		write_deferred(f->out);
		f->draining = 0;
	}
}

/* Ends the program on a failed input, after what was computed before. */
static _Noreturn void input_failed(at_filter *f, const char *err)
{
	at_filter_drain(f);
	cli_fail(err);
}

/* Copies record h behind f's pending outputs; 0 where it is not to wait
 * (nothing pending, or too large) and must be written now. */
static int defer_record(at_filter *f, at_reader *r, const at_header *h)
{
	if (!f->pending || h->nbytes > DEFER_MAX - deferred.whole)
		return 0;
	if (!deferred.f) {
		if (!(deferred.f = open_memstream(&deferred.buf, &deferred.size)))
			return 0;
		at_write_opts o = f->out->opts;
		at_writer_wrap(&deferred.w, deferred.f, f->out->label, &o);
	}
	if (at_copy_record(r, h, &deferred.w) < 0) /* the part is not written */
		input_failed(f, r->err[0] ? r->err : deferred.w.err);
	fflush(deferred.f);
	deferred.whole = deferred.size;
	return 1;
}

_Noreturn void at_filter_die(at_filter *f, int slot, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	at_filter_drain(f);
	cli_die("%s: record %d '%s': %s", f->label, f->index[slot],
		f->inputs[slot], msg);
}

void at_filter_expect(at_filter *f, int slot, const at_tensor *t,
		      int rank, const char *shape_letters)
{
	char shape[128];
	at_shape_str(t->rank, t->dims, shape, sizeof shape);
	if (t->dtype != AT_F32)
		at_filter_die(f, slot, "dtype %s, expected f32",
			      at_dtype_name(t->dtype));
	if (t->rank != rank)
		at_filter_die(f, slot, "shape %s, expected [%s]", shape,
			      shape_letters);
	/* the ops count in int (a tensor of no elements passes the byte
	 * cap whatever its other sizes) */
	for (int i = 0; i < t->rank; i++)
		if (t->dims[i] > INT_MAX)
			at_filter_die(f, slot, "shape %s: a size above %d is more "
				      "than this tool handles", shape, INT_MAX);
}

void at_filter_expect_count(at_filter *f, int slot, const at_tensor *t,
			    int lo, int hi, uint64_t max, const char *what,
			    const char *unit)
{
	uint64_t n = 1;
	for (int i = lo; i < hi; i++) /* saturating past 64 bits */
		n = t->dims[i] && n > UINT64_MAX / t->dims[i] ? UINT64_MAX
							      : n * t->dims[i];
	if (n > max)
		at_filter_die(f, slot, "%s=%llu %s is more than this tool "
			      "handles", what, (unsigned long long)n, unit);
}

void at_filter_expect_fits(at_filter *f, int slot, const char *name,
			   int rank, const uint64_t *dims)
{
	uint64_t bytes = 4;
	int over = 0;
	for (int i = 0; i < rank; i++) {
		if (dims[i] == 0)
			return;
		over |= bytes > f->max_bytes / dims[i];
		bytes = over ? bytes : bytes * dims[i];
	}
	if (over || bytes > f->max_bytes) {
		char shape[128];
		at_shape_str(rank, dims, shape, sizeof shape);
		at_filter_die(f, slot, "its %s %s would pass the cap of %llu bytes "
			      "a reader takes (ANDREA_MAX_BYTES)", name, shape,
			      (unsigned long long)f->max_bytes);
	}
}

void at_filter_expect_same_head(at_filter *f, int slot, const at_tensor *t,
				const at_tensor *ref)
{
	static const char *const same[] = {"layer", "head", "norm"};
	for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
		const char *ra = at_attr_get(&ref->attrs, same[i]);
		const char *ta = at_attr_get(&t->attrs, same[i]);
		if (ra && ta && strcmp(ra, ta) != 0)
			at_filter_die(f, slot, "%s=%s but %s has %s=%s", same[i],
				      ta, ref->name, same[i], ra);
	}
}

void at_filter_expect_like(at_filter *f, int slot, const at_tensor *t,
			   const at_tensor *ref)
{
	if (t->rank != ref->rank ||
	    memcmp(t->dims, ref->dims, t->rank * sizeof t->dims[0]) != 0) {
		char rs[96], ts[96];
		at_shape_str(ref->rank, ref->dims, rs, sizeof rs);
		at_shape_str(t->rank, t->dims, ts, sizeof ts);
		at_filter_die(f, slot, "shape %s does not match %s's %s", ts,
			      ref->name, rs);
	}
	at_filter_expect_same_head(f, slot, t, ref);
}

void at_filter_write(at_writer *w, const at_tensor *t)
{
	if (at_write_tensor(w, t) < 0)
		cli_fail(w->err);
}

void at_filter_begin(at_writer *w, const at_tensor *header)
{
	if (at_record_begin(w, header) < 0)
		cli_fail(w->err);
}

void at_filter_put(at_writer *w, const void *p, size_t n)
{
	if (at_record_put(w, p, n) < 0)
		cli_fail(w->err);
}

void at_filter_end(at_writer *w)
{
	if (at_record_end(w) < 0)
		cli_fail(w->err);
}

void at_filter_serial(int on)
{
	static int before;
	if (on)
		before = at_set_threads(1);
	else if (before)
		at_set_threads(before);
}

/* Bytes a streaming filter reads, transforms and writes at a time when
 * its units straddle chunks: a chunk, so that the next stage can start. */
#define STREAM_PIECE AT_DEFAULT_CHUNK

/* Units that straddle chunks are gathered into a buffer of whole units. */
static void stream_copied(at_reader *r, at_payload_in *in, at_writer *w,
			  uint64_t units, size_t unit, at_stream_fn *fn,
			  void *ctx)
{
	size_t per = unit < STREAM_PIECE ? STREAM_PIECE / unit : 1;
	if (per > units)
		per = units ? (size_t)units : 1;
	float *buf = malloc(per * unit);
	if (!buf)
		cli_die("out of memory");
	for (uint64_t u = 0; u < units; u += per) {
		size_t n = units - u < per ? (size_t)(units - u) : per;
		if (at_payload_read(in, buf, n * unit) < 0)
			cli_fail(r->err);
		fn(ctx, buf, n, u);
		at_filter_put(w, buf, n * unit);
	}
	free(buf);
}

/* Units that never straddle chunks are transformed where decoded. */
static void stream_in_place(at_reader *r, at_payload_in *in, at_writer *w,
			    size_t unit, at_stream_fn *fn, void *ctx)
{
	unsigned char *p;
	int64_t n;
	for (uint64_t u = 0; (n = at_payload_view(in, &p)) > 0;
	     u += (uint64_t)n / unit) {
		fn(ctx, (float *)p, (size_t)n / unit, u);
		at_filter_put(w, p, (size_t)n);
	}
	if (n < 0)
		cli_fail(r->err);
}

void at_filter_payload_begin(at_filter *f, at_reader *r, const at_header *h,
			     at_payload_in *in)
{
	int threads = r->opts.threads;
	if (f->stream_threads)
		r->opts.threads = f->stream_threads;
	int rc = at_payload_begin(r, h, in);
	r->opts.threads = threads;
	if (rc < 0)
		cli_fail(r->err);
}

void at_filter_stream(at_filter *f, at_reader *r, const at_header *h,
		      at_writer *w, const at_tensor *out, size_t unit,
		      at_stream_fn *fn, void *ctx)
{
	if (unit == 0 || h->nbytes % unit)
		cli_die("%s: record %d '%s': internal error: unit of %zu bytes",
			r->label, h->index, h->name, unit);
	at_payload_in in;
	at_filter_payload_begin(f, r, h, &in);
	int threads = w->opts.threads;
	if (f->stream_threads)
		w->opts.threads = f->stream_threads;
	at_filter_begin(w, out); /* the record keeps the count it began with */
	w->opts.threads = threads;
	at_filter_serial(1);
	if (h->chunk_raw % unit == 0)
		stream_in_place(r, &in, w, unit, fn, ctx);
	else
		stream_copied(r, &in, w, h->nbytes / unit, unit, fn, ctx);
	at_filter_serial(0);
	at_filter_end(w);
	at_payload_end(&in);
}

static int slot_of(const at_filter *f, const char *name)
{
	for (int i = 0; i < f->n_inputs; i++)
		if (strcmp(f->inputs[i], name) == 0)
			return i;
	return -1;
}

void at_filter_main(cli_common *c, at_filter *f, const char *path)
{
	at_reader r;
	cli_open_input(c, &r, path);
	f->label = r.label;
	f->max_bytes = c->ropts.max_bytes;
	struct stat st;
	if (!c->threads_given && fstat(fileno(r.f), &st) == 0 &&
	    (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
		f->stream_threads = c->ropts.threads > 1 ? c->ropts.threads / 2 : 1;
	at_writer w;
	cli_open_output(c, &w);
	f->out = &w;
	at_tensor in[AT_FILTER_MAX_INPUTS];
	int have[AT_FILTER_MAX_INPUTS] = {0}, filled = 0, groups = 0;
	at_header *h = malloc(sizeof *h);
	if (!h)
		cli_die("out of memory");
	int rc;
	while ((rc = at_read_header(&r, h)) == 1) {
		int s = slot_of(f, h->name);
		if (s < 0) {
			if (defer_record(f, &r, h))
				continue;
			at_filter_drain(f);
			if (at_copy_record(&r, h, &w) < 0)
				cli_fail(r.err[0] ? r.err : w.err);
			continue;
		}
		if (have[s])
			cli_die("%s: record %d '%s': a second '%s' before the rest "
				"of its group", r.label, h->index, h->name, h->name);
		f->index[s] = h->index;
		if (f->prepare)
			f->prepare(f, s, h);
		if (f->stream && !c->keep && f->n_inputs == 1) {
			at_filter_drain(f); /* it writes as it reads */
			if (f->stream(f, &r, h, &w) == 0) {
				groups++;
				continue;
			}
		}
		memset(&in[s], 0, sizeof in[s]);
		if (!f->stream_last || c->keep || filled < f->n_inputs - 1 ||
		    f->stream_last(f, in, s, &r, h, &w) != 0) {
			if (at_read_payload(&r, h, &in[s]) < 0)
				input_failed(f, r.err);
			have[s] = 1;
			if (c->keep) {
				at_filter_drain(f);
				at_filter_write(&w, &in[s]);
			}
			if (++filled < f->n_inputs)
				continue;
			f->run(f, in, &w);
		}
		for (int i = 0; i < f->n_inputs; i++) {
			at_tensor_free(&in[i]);
			have[i] = 0;
		}
		filled = 0;
		groups++;
	}
	free(h);
	if (rc < 0)
		input_failed(f, r.err);
	at_filter_drain(f);
	for (int i = 0; i < f->n_inputs; i++)
		if (have[i])
			for (int j = 0; j < f->n_inputs; j++)
				if (!have[j])
					cli_die("%s: record %d '%s': no '%s' record "
						"goes with it", r.label, f->index[i],
						f->inputs[i], f->inputs[j]);
	if (groups == 0) {
		char names[64] = "";
		for (int i = 0; i < f->n_inputs; i++)
			snprintf(names + strlen(names), sizeof names - strlen(names),
				 "%s'%s'", i ? " and " : "", f->inputs[i]);
		cli_die("%s: no %s record in the input", r.label, names);
	}
	at_reader_close(&r);
	cli_finish_output(&w);
}
