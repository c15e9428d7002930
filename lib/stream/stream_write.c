/* stream_write.c - writing records.
 *
 * Chunks are cut at fixed offsets and each is compressed on its own, so the
 * bytes written are the same whatever the thread count.  A path given to
 * at_writer_open is written through a temporary file in the same directory
 * and renamed into place by at_writer_finish: an earlier file of that name
 * survives any failure (a full disk, a dead upstream stage).
 */
#include "stream/stream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/atomic_file.h"
#include "core/le.h"
#include "core/parallel.h"
#include "stream/pump.h"


static int wfail(at_writer *w, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static int wfail(at_writer *w, const char *fmt, ...)
{
	char msg[AT_ERR_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	snprintf(w->err, sizeof w->err, "%s: %s", w->label, msg);
	return -1;
}

void at_writer_wrap(at_writer *w, FILE *f, const char *label,
		    const at_write_opts *o)
{
	memset(w, 0, sizeof *w);
	w->f = f;
	w->opts = *o;
	if (w->opts.threads < 1)
		w->opts.threads = 1;
	snprintf(w->label, sizeof w->label, "%s", label);
	if (f && at_is_pipe(fileno(f)) && fflush(f) == 0)
		w->pump = at_pump_writer(fileno(f));
}

int at_writer_open(at_writer *w, const char *path, const at_write_opts *o)
{
	at_writer_wrap(w, NULL, path, o);
	if (at_afile_open(&w->file, path) < 0)
		return wfail(w, "%s", errno == EINVAL ? "no file name"
						      : strerror(errno));
	w->f = w->file.f;
	w->owns_file = 1;
	return 0;
}

int at_writer_put(at_writer *w, const void *p, size_t n)
{
	if (n && (w->pump ? at_pump_write(w->pump, p, n) < 0
			  : fwrite(p, 1, n, w->f) != n))
		return wfail(w, "write error: %s", strerror(errno));
	return 0;
}

/* Builds the header bytes of t into buf; returns their length. */
static size_t build_header(const at_tensor *t, unsigned flags,
			   uint32_t chunk_raw, unsigned char *buf)
{
	size_t name_len = strlen(t->name), attr_len = at_attrs_size(&t->attrs);
	memcpy(buf, AT_MAGIC, 4);
	buf[4] = AT_VERSION;
	buf[5] = AT_KIND_TENSOR;
	buf[6] = (unsigned char)t->dtype;
	buf[7] = (unsigned char)t->rank;
	buf[8] = (unsigned char)flags;
	buf[9] = (unsigned char)name_len;
	put16(buf + 10, (uint16_t)attr_len);
	put32(buf + 12, chunk_raw);
	unsigned char *q = buf + AT_FIXED_HEADER;
	for (int i = 0; i < t->rank; i++, q += 8)
		put64(q, t->dims[i]);
	memcpy(q, t->name, name_len);
	q += name_len;
	at_attrs_write(&t->attrs, (char *)q);
	q += attr_len;
	put32(q, (uint32_t)crc32(0L, buf, (uInt)(q - buf)));
	return (size_t)(q - buf) + 4;
}

/* One batch of chunks for at_parallel_for: slot i is chunk i of data, its
 * 16-byte header and stored bytes going to rec->out + i * (bound + 16). */
typedef struct {
	const unsigned char *data;
	size_t len; /* whole chunks, the last one short only at the record's end */
	const at_record_out *rec;
	int plain;  /* level 0: only the header is built, data goes as is */
} encode_batch;

static unsigned char *chunk_slot(const at_record_out *rec, int i)
{
	return rec->out + (size_t)i * (rec->bound + AT_CHUNK_HEADER);
}

static void encode_one(void *ctx, int i, int tid)
{
	encode_batch *b = ctx;
	const at_record_out *rec = b->rec;
	size_t off = (size_t)i * rec->chunk_raw;
	size_t raw_len = b->len - off < rec->chunk_raw ? b->len - off
						       : rec->chunk_raw;
	unsigned char *hdr = chunk_slot(rec, i);
	size_t stored = b->plain ? raw_len
				 : at_chunk_encode(b->data + off, raw_len,
						   hdr + AT_CHUNK_HEADER, rec->elem,
						   &rec->eff,
						   rec->scratch + (size_t)tid * rec->chunk_raw);
	put32(hdr, (uint32_t)raw_len);
	put32(hdr + 4, (uint32_t)stored);
	put32(hdr + 8, (uint32_t)crc32(0L, b->data + off, (uInt)raw_len));
	put32(hdr + 12, (uint32_t)crc32(0L, hdr, 12));
}

/* Encodes data[0, len) of the open record on its threads and writes the
 * chunks in order; level 0 writes every chunk straight from data. */
static int encode_chunks(at_writer *w, const unsigned char *data, size_t len)
{
	at_record_out *rec = &w->rec;
	int n = (int)((len + rec->chunk_raw - 1) / rec->chunk_raw);
	encode_batch job = {data, len, rec, rec->eff.level == 0};
	at_parallel_for(n, rec->eff.threads, encode_one, &job);
	for (int i = 0; i < n; i++) {
		unsigned char *hdr = chunk_slot(rec, i);
		size_t stored = le32(hdr + 4);
		if (!job.plain) {
			if (at_writer_put(w, hdr, AT_CHUNK_HEADER + stored) < 0)
				return -1;
		} else if (at_writer_put(w, hdr, AT_CHUNK_HEADER) < 0 ||
			   at_writer_put(w, data + (size_t)i * rec->chunk_raw,
					 stored) < 0) {
			return -1;
		}
	}
	rec->done += len;
	return 0;
}

static void record_free(at_record_out *rec)
{
	free(rec->stage);
	free(rec->out);
	free(rec->scratch);
	memset(rec, 0, sizeof *rec);
}

/* Chunks per batch taken straight from a caller's buffer. */
static uint64_t batch_chunks(const at_record_out *rec)
{
	uint64_t nchunks = (rec->nbytes + rec->chunk_raw - 1) / rec->chunk_raw;
	uint64_t batch = (uint64_t)rec->eff.threads * 4;
	return batch < nchunks ? batch : nchunks ? nchunks : 1;
}

int at_record_begin(at_writer *w, const at_tensor *t)
{
	size_t elem = at_dtype_size(t->dtype);
	if (!elem || t->rank < 0 || t->rank > AT_MAX_RANK ||
	    !at_name_valid(t->name, strlen(t->name)))
		return wfail(w, "internal error: invalid tensor '%.64s'", t->name);
	if (t->attrs.lost[0])
		return wfail(w, "record '%.64s': its attributes could not hold "
			     "'%s' (a record holds %d attributes in %d bytes at "
			     "most, each a valid key and value)",
			     t->name, t->attrs.lost, AT_MAX_ATTRS,
			     AT_MAX_ATTR_BYTES);
	at_record_out *rec = &w->rec;
	if (rec->open)
		return wfail(w, "internal error: '%.64s' begun inside '%.64s'",
			     t->name, rec->name);
	const at_write_opts *o = &w->opts;
	uint32_t chunk_raw = o->chunk_raw ? o->chunk_raw : AT_DEFAULT_CHUNK;
	chunk_raw -= chunk_raw % elem;
	unsigned flags = o->shuffle && o->level > 0 && elem > 1 ? AT_FLAG_SHUFFLE : 0;

	unsigned char header[AT_MAX_HEADER];
	size_t hlen = build_header(t, flags, chunk_raw, header);
	if (at_writer_put(w, header, hlen) < 0)
		return -1;

	snprintf(rec->name, sizeof rec->name, "%s", t->name);
	rec->elem = elem;
	rec->chunk_raw = chunk_raw;
	rec->nbytes = at_nbytes(t);
	rec->eff = *o;
	rec->eff.shuffle = flags != 0;
	/* no more threads, and so no more scratch, than there are chunks */
	uint64_t nchunks = (rec->nbytes + chunk_raw - 1) / chunk_raw;
	if ((uint64_t)rec->eff.threads > nchunks)
		rec->eff.threads = nchunks ? (int)nchunks : 1;
	int plain = rec->eff.level == 0;
	rec->bound = plain ? 0 : at_chunk_bound(chunk_raw);
	rec->out = malloc(batch_chunks(rec) * (rec->bound + AT_CHUNK_HEADER));
	rec->scratch = plain ? NULL
			     : malloc((size_t)rec->eff.threads * chunk_raw);
	if (!rec->out || (!plain && !rec->scratch)) {
		record_free(rec);
		return wfail(w, "out of memory compressing '%.64s'", t->name);
	}
	rec->open = 1;
	return 0;
}

int at_record_put(at_writer *w, const void *p, size_t n)
{
	at_record_out *rec = &w->rec;
	const unsigned char *src = p;
	if (!rec->open || n > rec->nbytes - rec->done - rec->staged)
		return wfail(w, "internal error: more bytes than '%.64s' holds",
			     rec->name);
	/* the stage holds one chunk per thread: enough to keep them busy,
	 * little enough that the next stage of a pipeline need not wait */
	size_t cap = (size_t)rec->eff.threads * rec->chunk_raw;
	size_t most = (size_t)batch_chunks(rec) * rec->chunk_raw;
	while (n) {
		int last = rec->done + rec->staged + n == rec->nbytes;
		if (rec->staged == 0 && (n >= cap || last)) {
			/* straight from the caller: whole chunks, or the end */
			size_t take = n < most ? n : most;
			if (take < n || !last)
				take -= take % rec->chunk_raw;
			if (encode_chunks(w, src, take) < 0)
				return -1;
			src += take;
			n -= take;
			continue;
		}
		if (!rec->stage && !(rec->stage = malloc(cap)))
			return wfail(w, "out of memory compressing '%.64s'",
				     rec->name);
		size_t m = cap - rec->staged < n ? cap - rec->staged : n;
		memcpy(rec->stage + rec->staged, src, m);
		rec->staged += m;
		src += m;
		n -= m;
		if (rec->staged == cap || rec->done + rec->staged == rec->nbytes) {
			if (encode_chunks(w, rec->stage, rec->staged) < 0)
				return -1;
			rec->staged = 0;
		}
	}
	return 0;
}

int at_record_end(at_writer *w)
{
	at_record_out *rec = &w->rec;
	if (!rec->open || rec->done != rec->nbytes) {
		wfail(w, "internal error: '%.64s' ended after %llu of %llu bytes",
		      rec->name, (unsigned long long)rec->done,
		      (unsigned long long)rec->nbytes);
		record_free(rec);
		return -1;
	}
	record_free(rec);
	return 0;
}

int at_write_tensor(at_writer *w, const at_tensor *t)
{
	if (at_record_begin(w, t) < 0)
		return -1;
	if (at_record_put(w, t->data, (size_t)at_nbytes(t)) < 0) {
		record_free(&w->rec);
		return -1;
	}
	return at_record_end(w);
}

int at_writer_finish(at_writer *w)
{
	if (w->rec.open)
		return wfail(w, "internal error: record '%.64s' not ended",
			     w->rec.name);
	unsigned char end[AT_FIXED_HEADER + 4] = {0};
	memcpy(end, AT_MAGIC, 4);
	end[4] = AT_VERSION;
	end[5] = AT_KIND_END;
	put32(end + AT_FIXED_HEADER, (uint32_t)crc32(0L, end, AT_FIXED_HEADER));
	if (at_writer_put(w, end, sizeof end) < 0)
		return -1;
	if (w->pump) {
		int failed = at_pump_flush(w->pump) < 0;
		int e = errno;
		at_pump_free(w->pump);
		w->pump = NULL;
		if (failed)
			return wfail(w, "write error: %s", strerror(e));
	}
	if (fflush(w->f) != 0 || ferror(w->f))
		return wfail(w, "write error: %s", strerror(errno));
	if (w->owns_file) {
		char msg[AT_ERR_LEN];
		w->f = NULL;
		if (at_afile_commit(&w->file, msg, sizeof msg) < 0)
			return wfail(w, "%s", msg);
	}
	return 0;
}

void at_writer_abort(at_writer *w)
{
	record_free(&w->rec);
	at_pump_free(w->pump); /* what was written goes out */
	w->pump = NULL;
	if (w->owns_file)
		at_afile_abort(&w->file);
	w->f = NULL;
}
