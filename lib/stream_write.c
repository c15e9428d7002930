/* stream_write.c - writing records.
 *
 * Chunks are cut at fixed offsets and each is compressed on its own, so the
 * bytes written are the same whatever the thread count.  A path given to
 * at_writer_open is written through a temporary file in the same directory
 * and renamed into place by at_writer_finish: an earlier file of that name
 * survives any failure (a full disk, a dead upstream stage).
 */
#include "stream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "le.h"
#include "parallel.h"


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
}

int at_writer_open(at_writer *w, const char *path, const at_write_opts *o)
{
	at_writer_wrap(w, NULL, path, o);
	struct stat st;
	/* devices and fifos are written in place; regular files atomically */
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		w->f = fopen(path, "wb");
	} else {
		int n = snprintf(w->tmp, sizeof w->tmp, "%s.XXXXXX", path);
		if (n < 0 || (size_t)n >= sizeof w->tmp)
			return wfail(w, "path too long");
		int fd = mkstemp(w->tmp);
		if (fd < 0) {
			w->tmp[0] = 0;
			return wfail(w, "%s", strerror(errno));
		}
		fchmod(fd, 0644 & ~at_umask());
		w->f = fdopen(fd, "wb");
		snprintf(w->path, sizeof w->path, "%s", path);
	}
	if (!w->f)
		return wfail(w, "%s", strerror(errno));
	w->owns_file = 1;
	return 0;
}

int at_writer_put(at_writer *w, const void *p, size_t n)
{
	if (n && fwrite(p, 1, n, w->f) != n)
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

/* One batch of chunks for at_parallel_for: slot i is chunk c0 + i, its
 * 16-byte header and stored bytes going to out + i * (bound + 16). */
typedef struct {
	const unsigned char *data;
	uint64_t nbytes, c0;
	uint32_t chunk_raw;
	size_t elem;
	int plain; /* level 0: only the header is built, data goes as is */
	const at_write_opts *o;
	unsigned char *out;
	size_t bound;
	unsigned char *scratch; /* chunk_raw bytes per thread */
} encode_batch;

static void encode_one(void *ctx, int i, int tid)
{
	encode_batch *b = ctx;
	uint64_t off = (b->c0 + (uint64_t)i) * b->chunk_raw;
	size_t raw_len = b->nbytes - off < b->chunk_raw ? b->nbytes - off
							: b->chunk_raw;
	unsigned char *hdr = b->out + (size_t)i * (b->bound + AT_CHUNK_HEADER);
	size_t stored = b->plain ? raw_len
				 : at_chunk_encode(b->data + off, raw_len,
						   hdr + AT_CHUNK_HEADER, b->elem, b->o,
						   b->scratch + (size_t)tid * b->chunk_raw);
	put32(hdr, (uint32_t)raw_len);
	put32(hdr + 4, (uint32_t)stored);
	put32(hdr + 8, (uint32_t)crc32(0L, b->data + off, (uInt)raw_len));
	put32(hdr + 12, (uint32_t)crc32(0L, hdr, 12));
}

int at_write_tensor(at_writer *w, const at_tensor *t)
{
	size_t elem = at_dtype_size(t->dtype);
	if (!elem || t->rank < 0 || t->rank > AT_MAX_RANK ||
	    !at_name_valid(t->name, strlen(t->name)))
		return wfail(w, "internal error: invalid tensor '%.64s'", t->name);
	const at_write_opts *o = &w->opts;
	uint32_t chunk_raw = o->chunk_raw ? o->chunk_raw : AT_DEFAULT_CHUNK;
	chunk_raw -= chunk_raw % elem;
	unsigned flags = o->shuffle && o->level > 0 && elem > 1 ? AT_FLAG_SHUFFLE : 0;
	at_write_opts eff = *o;
	eff.shuffle = flags != 0;

	unsigned char header[AT_MAX_HEADER];
	size_t hlen = build_header(t, flags, chunk_raw, header);
	if (at_writer_put(w, header, hlen) < 0)
		return -1;

	const unsigned char *data = t->data;
	uint64_t nbytes = at_nbytes(t);
	uint64_t nchunks = (nbytes + chunk_raw - 1) / chunk_raw;
	int threads = o->threads;
	if ((uint64_t)threads > nchunks)
		threads = nchunks ? (int)nchunks : 1;
	uint64_t batch = (uint64_t)threads * 4;
	if (batch > nchunks)
		batch = nchunks ? nchunks : 1;
	/* level 0 writes every chunk straight from the tensor: no copy */
	int plain = eff.level == 0;
	size_t bound = plain ? 0 : at_chunk_bound(chunk_raw);
	unsigned char *out = malloc(batch * (bound + AT_CHUNK_HEADER));
	unsigned char *scratch = malloc((size_t)threads * chunk_raw);
	if (!out || !scratch) {
		free(out);
		free(scratch);
		return wfail(w, "out of memory compressing '%.64s'", t->name);
	}
	int rc = 0;
	for (uint64_t c0 = 0; c0 < nchunks && rc == 0; c0 += batch) {
		uint64_t nb = nchunks - c0 < batch ? nchunks - c0 : batch;
		encode_batch job = {data, nbytes, c0, chunk_raw, elem, plain, &eff,
				    out, bound, scratch};
		at_parallel_for((int)nb, threads, encode_one, &job);
		for (uint64_t i = 0; i < nb && rc == 0; i++) {
			unsigned char *hdr = out + i * (bound + AT_CHUNK_HEADER);
			if (plain && at_writer_put(w, hdr, AT_CHUNK_HEADER) == 0)
				rc = at_writer_put(w, data + (c0 + i) * chunk_raw,
						   le32(hdr + 4));
			else if (plain)
				rc = -1;
			else
				rc = at_writer_put(w, hdr, AT_CHUNK_HEADER + le32(hdr + 4));
		}
	}
	free(out);
	free(scratch);
	return rc;
}

int at_writer_finish(at_writer *w)
{
	unsigned char end[AT_FIXED_HEADER + 4] = {0};
	memcpy(end, AT_MAGIC, 4);
	end[4] = AT_VERSION;
	end[5] = AT_KIND_END;
	put32(end + AT_FIXED_HEADER, (uint32_t)crc32(0L, end, AT_FIXED_HEADER));
	if (at_writer_put(w, end, sizeof end) < 0)
		return -1;
	if (fflush(w->f) != 0 || ferror(w->f))
		return wfail(w, "write error: %s", strerror(errno));
	if (w->owns_file) {
		FILE *f = w->f;
		w->f = NULL;
		if (w->tmp[0] && fsync(fileno(f)) != 0) {
			fclose(f);
			return wfail(w, "write error: %s", strerror(errno));
		}
		if (fclose(f) != 0)
			return wfail(w, "write error: %s", strerror(errno));
		if (w->tmp[0]) {
			if (rename(w->tmp, w->path) != 0)
				return wfail(w, "cannot rename into place: %s",
					     strerror(errno));
			w->tmp[0] = 0;
		}
	}
	return 0;
}

void at_writer_abort(at_writer *w)
{
	if (w->owns_file && w->f)
		fclose(w->f);
	w->f = NULL;
	if (w->tmp[0])
		unlink(w->tmp);
	w->tmp[0] = 0;
}
