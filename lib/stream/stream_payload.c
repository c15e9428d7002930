/* stream_payload.c - reading a record's payload, whole (its chunks
 * inflated in parallel batches) or a piece at a time, and skipping or
 * copying it unread (stream_read.c opens the stream and reads headers).
 *
 * The payload buffer grows only as chunks actually arrive, so a header
 * that lies about its size costs at most what the input really holds; a
 * large tensor that is decoded (not copied or skipped) must also fit in the
 * memory available (RAM and swap, /proc/meminfo) or it is refused up front.
 */
#include "stream/stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/le.h"
#include "core/parallel.h"
#include "stream/pump.h"
#include "stream/reader.h"

static uint64_t chunk_count(const at_header *h)
{
	return (h->nbytes + h->chunk_raw - 1) / h->chunk_raw;
}

static uint32_t chunk_raw_len(const at_header *h, uint64_t c)
{
	uint64_t left = h->nbytes - c * h->chunk_raw;
	return left < h->chunk_raw ? (uint32_t)left : h->chunk_raw;
}

/* Reads and checks chunk c's header into hdr; sets stored length and CRC. */
static int get_chunk_header(at_reader *r, const at_header *h, uint64_t c,
			    unsigned char *hdr, uint32_t *stored, uint32_t *crc)
{
	if (at_reader_get_exact(r, hdr, AT_CHUNK_HEADER, h->index, h->name) < 0)
		return -1;
	if (le32(hdr + 12) != (uint32_t)crc32(0L, hdr, 12))
		return at_reader_fail(r, h->index, h->name,
			    "chunk %llu: header CRC32 mismatch",
			    (unsigned long long)c);
	uint32_t raw = le32(hdr), want = chunk_raw_len(h, c);
	*stored = le32(hdr + 4);
	*crc = le32(hdr + 8);
	if (raw != want)
		return at_reader_fail(r, h->index, h->name,
			    "chunk %llu: raw length %u, expected %u",
			    (unsigned long long)c, raw, want);
	if (*stored == 0 || *stored > raw)
		return at_reader_fail(r, h->index, h->name,
			    "chunk %llu: stored length %u not in 1..%u",
			    (unsigned long long)c, *stored, raw);
	return 0;
}

/* What decoding a batch of chunks needs, per batch slot: a buffer for
 * deflated or shuffled chunks (stored plain chunks are read straight into
 * place), the chunk's facts and its verdict; and scratch per thread. */
typedef struct {
	int threads;
	uint64_t size; /* chunks per batch */
	unsigned char **slot;
	const unsigned char **stored;
	uint32_t *stored_len, *crc;
	unsigned char *scratch; /* chunk_raw bytes per thread */
	int *bad;
	char (*why)[128];
} batch_bufs;

static void bufs_free(batch_bufs *b)
{
	for (uint64_t i = 0; b->slot && i < b->size; i++)
		free(b->slot[i]);
	free(b->slot);
	free(b->stored);
	free(b->stored_len);
	free(b->crc);
	free(b->scratch);
	free(b->bad);
	free(b->why);
	memset(b, 0, sizeof *b);
}

/* Sets up batches of per_thread chunks per thread for h. */
static int bufs_init(at_reader *r, const at_header *h, batch_bufs *b,
		     uint64_t per_thread)
{
	memset(b, 0, sizeof *b);
	uint64_t nchunks = chunk_count(h);
	b->threads = r->opts.threads;
	/* no more scratch than there are chunks to decode */
	if ((uint64_t)b->threads > nchunks)
		b->threads = nchunks ? (int)nchunks : 1;
	b->size = (uint64_t)b->threads * per_thread;
	b->slot = calloc(b->size, sizeof *b->slot);
	b->stored = calloc(b->size, sizeof *b->stored);
	b->stored_len = calloc(b->size, sizeof *b->stored_len);
	b->crc = calloc(b->size, sizeof *b->crc);
	b->scratch = malloc((size_t)b->threads * h->chunk_raw);
	b->bad = calloc(b->size, sizeof *b->bad);
	b->why = calloc(b->size, sizeof *b->why);
	if (!b->slot || !b->stored || !b->stored_len || !b->crc || !b->scratch ||
	    !b->bad || !b->why) {
		bufs_free(b);
		return at_reader_fail(r, h->index, h->name, "out of memory");
	}
	return 0;
}

/* One batch of chunks for at_parallel_for: slot i is chunk c0 + i, which
 * goes to dst + i * chunk_raw. */
typedef struct {
	const at_header *h;
	unsigned char *dst;
	uint64_t c0;
	size_t elem;
	const batch_bufs *b;
} decode_batch;

static void decode_one(void *ctx, int i, int tid)
{
	decode_batch *d = ctx;
	const at_header *h = d->h;
	const batch_bufs *b = d->b;
	b->bad[i] = at_chunk_decode(b->stored[i], b->stored_len[i],
				    d->dst + (size_t)i * h->chunk_raw,
				    chunk_raw_len(h, d->c0 + (uint64_t)i), d->elem,
				    h->flags & AT_FLAG_SHUFFLE, b->crc[i],
				    b->scratch + (size_t)tid * h->chunk_raw,
				    b->why[i], sizeof b->why[i]);
}

/* Makes *buf hold at least end bytes, growing geometrically up to the
 * tensor's size, so memory follows the data that has really arrived. */
static int grow(unsigned char **buf, size_t *cap, size_t end, size_t nbytes)
{
	if (end <= *cap)
		return 0;
	size_t want = *cap * 2 > end ? *cap * 2 : end;
	if (want > nbytes)
		want = nbytes;
	unsigned char *nbuf = realloc(*buf, want);
	if (!nbuf)
		return -1;
	*buf = nbuf;
	*cap = want;
	return 0;
}

/* Bytes of memory this process could still be given: MemAvailable plus
 * SwapFree from /proc/meminfo, or UINT64_MAX when that cannot be read (not
 * Linux, no /proc): the check is then left to malloc. */
static uint64_t memory_available(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	if (!f)
		return UINT64_MAX;
	char line[256];
	unsigned long long kb, mem = 0, swap = 0;
	int found = 0;
	while (fgets(line, sizeof line, f)) {
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			mem = kb, found |= 1;
		else if (sscanf(line, "SwapFree: %llu kB", &kb) == 1)
			swap = kb, found |= 2;
	}
	fclose(f);
	if (!(found & 1) || mem > UINT64_MAX / 1024 - swap)
		return UINT64_MAX;
	return (mem + swap) * 1024;
}

/* Reads chunks c0 .. c0+nb-1 of h and decodes them into *buf, chunk c at
 * offset (c - first) * chunk_raw.  With cap set, *buf grows (grow) as each
 * chunk's header arrives; without, it already holds the batch. */
static int read_batch(at_reader *r, const at_header *h, batch_bufs *b,
		      uint64_t c0, uint64_t nb, unsigned char **buf,
		      uint64_t first, size_t *cap)
{
	size_t elem = at_dtype_size(h->dtype);
	int shuffled = (h->flags & AT_FLAG_SHUFFLE) && elem > 1;
	for (uint64_t i = 0; i < nb; i++) {
		uint64_t c = c0 + i;
		unsigned char hdr[AT_CHUNK_HEADER];
		if (get_chunk_header(r, h, c, hdr, &b->stored_len[i], &b->crc[i]) < 0)
			return -1;
		size_t off = (size_t)((c - first) * h->chunk_raw);
		if (cap && grow(buf, cap, off + chunk_raw_len(h, c), h->nbytes) < 0)
			return at_reader_fail(r, h->index, h->name, "out of memory");
		unsigned char *dst;
		if (b->stored_len[i] == chunk_raw_len(h, c) && !shuffled) {
			dst = *buf + off;
		} else {
			if (!b->slot[i] && !(b->slot[i] = malloc(h->chunk_raw)))
				return at_reader_fail(r, h->index, h->name, "out of memory");
			dst = b->slot[i];
		}
		if (at_reader_get_exact(r, dst, b->stored_len[i], h->index, h->name) < 0)
			return -1;
		b->stored[i] = dst;
	}
	/* buf may have moved while growing: in-place chunks follow it */
	unsigned char *dst = *buf + (size_t)((c0 - first) * h->chunk_raw);
	for (uint64_t i = 0; i < nb; i++)
		if (b->stored[i] != b->slot[i])
			b->stored[i] = dst + i * h->chunk_raw;
	decode_batch job = {h, dst, c0, elem, b};
	at_parallel_for((int)nb, b->threads, decode_one, &job);
	for (uint64_t i = 0; i < nb; i++)
		if (b->bad[i])
			return at_reader_fail(r, h->index, h->name, "chunk %llu: %s",
				    (unsigned long long)(c0 + i), b->why[i]);
	return 0;
}

void at_tensor_from_header(at_tensor *t, const at_header *h)
{
	memset(t, 0, sizeof *t);
	snprintf(t->name, sizeof t->name, "%s", h->name);
	t->dtype = h->dtype;
	t->rank = h->rank;
	memcpy(t->dims, h->dims, sizeof t->dims);
	t->attrs = h->attrs;
}

int at_payload_within_cap(at_reader *r, const at_header *h)
{
	if (h->nbytes > r->opts.max_bytes)
		return at_reader_fail(r, h->index, h->name,
			    "tensor of %llu bytes exceeds the cap of %llu bytes "
			    "(ANDREA_MAX_BYTES)",
			    (unsigned long long)h->nbytes,
			    (unsigned long long)r->opts.max_bytes);
	return 0;
}

int at_read_payload(at_reader *r, const at_header *h, at_tensor *t)
{
	memset(t, 0, sizeof *t);
	/* the cap is on what is held: a record copied through or read as it
	 * arrives (at_payload_begin) is never held whole */
	if (at_payload_within_cap(r, h) < 0)
		return -1;
	/* a tensor that cannot fit is refused now, with a reason, rather
	 * than after its chunks have been read; small ones skip the look */
	uint64_t avail;
	if (h->nbytes >= AT_MEMCHECK_MIN &&
	    h->nbytes > (avail = memory_available()))
		return at_reader_fail(r, h->index, h->name,
			    "tensor of %llu bytes exceeds the memory available "
			    "(%llu bytes of RAM and swap)",
			    (unsigned long long)h->nbytes,
			    (unsigned long long)avail);
	uint64_t nchunks = chunk_count(h);
	batch_bufs b;
	if (bufs_init(r, h, &b, 4) < 0)
		return -1;
	unsigned char *buf = malloc(h->nbytes ? 0 : 1);
	size_t cap = 0;
	int rc = -1;
	for (uint64_t c0 = 0; c0 < nchunks; c0 += b.size) {
		uint64_t nb = nchunks - c0 < b.size ? nchunks - c0 : b.size;
		if (read_batch(r, h, &b, c0, nb, &buf, 0, &cap) < 0)
			goto out;
	}
	if (!buf) {
		at_reader_fail(r, h->index, h->name, "out of memory");
		goto out;
	}
	at_tensor_from_header(t, h);
	t->data = buf;
	buf = NULL;
	rc = 0;
out:
	bufs_free(&b);
	free(buf);
	return rc;
}

int at_payload_begin(at_reader *r, const at_header *h, at_payload_in *in)
{
	memset(in, 0, sizeof *in);
	in->r = r;
	in->h = h;
	batch_bufs *b = malloc(sizeof *b);
	if (!b)
		return at_reader_fail(r, h->index, h->name, "out of memory");
	/* one chunk per thread at a time: the stage upstream need not get
	 * far ahead before this one starts */
	if (bufs_init(r, h, b, 1) < 0) {
		free(b);
		return -1;
	}
	in->bufs = b;
	in->batch = malloc(b->size * h->chunk_raw);
	if (!in->batch) {
		at_payload_end(in);
		return at_reader_fail(r, h->index, h->name, "out of memory");
	}
	return 0;
}

/* Decodes the next batch when the current one is used up; returns the
 * bytes left in it, 0 at the end of the payload, -1 on error. */
static int64_t refill(at_payload_in *in)
{
	const at_header *h = in->h;
	batch_bufs *b = in->bufs;
	if (in->pos < in->have)
		return (int64_t)(in->have - in->pos);
	uint64_t left = chunk_count(h) - in->next;
	uint64_t nb = left < b->size ? left : b->size;
	if (nb == 0)
		return 0;
	if (read_batch(in->r, h, b, in->next, nb, &in->batch, in->next,
		       NULL) < 0)
		return -1;
	in->have = (size_t)(nb - 1) * h->chunk_raw +
		   chunk_raw_len(h, in->next + nb - 1);
	in->pos = 0;
	in->next += nb;
	return (int64_t)in->have;
}

int64_t at_payload_view(at_payload_in *in, unsigned char **p)
{
	int64_t n = refill(in);
	*p = in->batch + in->pos;
	if (n > 0)
		in->pos = in->have;
	return n;
}

int at_payload_read(at_payload_in *in, void *p, size_t n)
{
	unsigned char *dst = p;
	while (n) {
		int64_t have = refill(in);
		if (have <= 0)
			return have < 0 ? -1
					: at_reader_fail(in->r, in->h->index, in->h->name,
					       "internal error: read past the payload");
		size_t m = (size_t)have < n ? (size_t)have : n;
		memcpy(dst, in->batch + in->pos, m);
		in->pos += m;
		dst += m;
		n -= m;
	}
	return 0;
}

void at_payload_end(at_payload_in *in)
{
	if (in->bufs)
		bufs_free(in->bufs);
	free(in->bufs);
	free(in->batch);
	memset(in, 0, sizeof *in);
}

/* Walks the chunks of h; with w set, copies each one there verbatim. */
static int walk_chunks(at_reader *r, const at_header *h, at_writer *w)
{
	unsigned char piece[1 << 16];
	uint64_t nchunks = chunk_count(h);
	for (uint64_t c = 0; c < nchunks; c++) {
		unsigned char hdr[AT_CHUNK_HEADER];
		uint32_t left, crc;
		if (get_chunk_header(r, h, c, hdr, &left, &crc) < 0)
			return -1;
		if (w && at_writer_put(w, hdr, sizeof hdr) < 0)
			return -1;
		while (left) {
			uint32_t n = left < sizeof piece ? left : sizeof piece;
			if (at_reader_get_exact(r, piece, n, h->index, h->name) < 0)
				return -1;
			if (w && at_writer_put(w, piece, n) < 0)
				return -1;
			left -= n;
		}
	}
	return 0;
}

int at_skip_payload(at_reader *r, const at_header *h)
{
	return walk_chunks(r, h, NULL);
}

int at_check_payload(at_reader *r, const at_header *h)
{
	at_payload_in in;
	if (at_payload_begin(r, h, &in) < 0)
		return -1;
	unsigned char *p;
	int64_t n;
	while ((n = at_payload_view(&in, &p)) > 0)
		;
	at_payload_end(&in);
	return n < 0 ? -1 : 0;
}

int at_copy_record(at_reader *r, const at_header *h, at_writer *w)
{
	if (at_writer_put(w, h->raw, h->raw_len) < 0)
		return -1;
	return walk_chunks(r, h, w);
}
