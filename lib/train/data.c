/* data.c - training data: loading, the held-out split and the
 * seeded batch sampler. */
#include "train/train.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "core/philox.h"
#include "stream/stream.h"

/* The `have` bytes of head, then the rest of f, in a malloc'd buffer of
 * *len bytes; NULL when out of memory, or (*len then max + 1) when f
 * holds more than max bytes in all: an endless pipe stops there. */
static unsigned char *slurp(FILE *f, const char *head, size_t have,
			    uint64_t max, size_t *len)
{
	size_t cap = 1 << 16, n = have, got;
	if (have > max) {
		*len = max + 1;
		return NULL;
	}
	unsigned char *buf = malloc(cap);
	if (buf)
		memcpy(buf, head, have);
	while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
		n += got;
		if (n > max) {
			free(buf);
			*len = max + 1;
			return NULL;
		}
		if (n == cap) {
			unsigned char *b2 = realloc(buf, cap *= 2);
			if (!b2)
				free(buf);
			buf = b2;
		}
	}
	*len = n;
	return buf;
}

/* Keeps each row's own tokens of t [..,T] where its lengths attribute
 * says a row is shorter (andrea-embed --lines pads them to one T): the
 * padding is no text.  t->data keeps the rows' tokens, in order, and *n
 * their count; -1 with why where the attribute is bad. */
static int unpad(at_tensor *t, size_t *n, char *why, size_t len)
{
	uint64_t T = t->rank ? t->dims[t->rank - 1] : 1;
	uint64_t B = T ? *n / T : 0, rows[AT_MAX_VALUE];
	int rc = at_attr_lengths(&t->attrs, B, T, rows, why, len);
	if (rc <= 0)
		return rc;
	int32_t *tok = t->data;
	size_t kept = 0;
	for (uint64_t b = 0; b < B; b++) {
		memmove(tok + kept, tok + b * T, rows[b] * sizeof *tok);
		kept += rows[b];
	}
	*n = kept;
	return 0;
}

/* Finds the first `tokens` record of a stream and takes its ids, each
 * below vocab (named by its place in the record); the rest of the stream
 * is checked to its end record, unused, as wherever a stream is read: one
 * cut short is a stage that died writing it. */
static int load_stream(tr_data *d, const char *path, int vocab,
		       const at_read_opts *ro, char *err, size_t errlen)
{
	at_reader r;
	at_header h;
	if (at_reader_open(&r, path, ro) < 0) {
		snprintf(err, errlen, "%s", r.err);
		return -1;
	}
	int rc = at_find_record(&r, "tokens", &h);
	if (rc == 1 && h.dtype != AT_I32) {
		snprintf(err, errlen, "%s: record %d 'tokens': %s, expected i32",
			 path, h.index, at_dtype_name(h.dtype));
		at_reader_close(&r);
		return -1;
	}
	at_tensor t;
	if (rc == 1 && at_read_payload(&r, &h, &t) == 0) {
		char why[300];
		d->n = (size_t)at_numel(&t);
		d->tok = t.data; /* take the buffer over */
		d->record = h.index;
		at_config ids = {.vocab = vocab};
		uint64_t T = t.rank ? t.dims[t.rank - 1] : 1;
		if (at_tokens_check(&ids, t.data, T ? d->n / T : 0, T, why,
				    sizeof why) < 0 ||
		    unpad(&t, &d->n, why, sizeof why) < 0) {
			snprintf(err, errlen, "%s: record %d 'tokens': %s", path,
				 h.index, why);
			at_reader_close(&r);
			tr_data_free(d);
			return -1;
		}
		while ((rc = at_read_header(&r, &h)) == 1 &&
		       at_check_payload(&r, &h) == 0)
			;
		if (rc == 0) {
			at_reader_close(&r);
			return 0;
		}
		rc = -1;
	} else if (rc == 1)
		rc = -1;
	if (rc == 0)
		snprintf(err, errlen, "%s: no 'tokens' record in the stream", path);
	else
		snprintf(err, errlen, "%s", r.err);
	at_reader_close(&r);
	tr_data_free(d);
	return -1;
}

int tr_data_load(tr_data *d, const char *path, at_tokenizer *tok, int vocab,
		 double val_fraction, int T, const at_read_opts *ro, char *err,
		 size_t errlen)
{
	memset(d, 0, sizeof *d);
	FILE *f = fopen(path, "rb");
	struct stat st;
	if (f && fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		snprintf(err, errlen, "%s: is a directory, not a file of text "
			 "or tokens", path);
		return -1;
	}
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	char magic[4] = {0};
	size_t got = fread(magic, 1, 4, f);
	if (got == 4 && memcmp(magic, AT_MAGIC, 4) == 0) {
		/* read again from its start by name: a pipe's 4 bytes are gone */
		int regular = fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode);
		fclose(f);
		if (!regular) {
			snprintf(err, errlen, "%s: a tokens stream must be a file, "
				 "not a pipe (write it to a file first)", path);
			return -1;
		}
		if (load_stream(d, path, vocab, ro, err, errlen) < 0)
			return -1;
	} else {
		/* the bytes read are kept, not read again: a pipe has no rewind */
		size_t n;
		unsigned char *buf = slurp(f, magic, got, ro->max_bytes, &n);
		int bad = ferror(f);
		fclose(f);
		if (!buf && n > ro->max_bytes) {
			snprintf(err, errlen, "%s: more than %llu bytes of text "
				 "(ANDREA_MAX_BYTES)", path,
				 (unsigned long long)ro->max_bytes);
			return -1;
		}
		if (!buf || bad) {
			snprintf(err, errlen, "%s: %s", path,
				 buf ? "read error" : "out of memory");
			free(buf);
			return -1;
		}
		if (!(d->tok = malloc(n * sizeof *d->tok + 4))) {
			free(buf);
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		char why[300];
		long count = n;
		if (tok)
			count = at_tok_encode(tok, buf, n, d->tok, why, sizeof why);
		else
			for (size_t i = 0; i < n; i++)
				d->tok[i] = buf[i];
		free(buf);
		if (count < 0) {
			snprintf(err, errlen, "%s: %s", path, why);
			tr_data_free(d);
			return -1;
		}
		d->n = (size_t)count;
	}
	/* a stream's were checked where they lie in its record */
	for (size_t i = 0; !d->record && i < d->n; i++)
		if (d->tok[i] < 0 || d->tok[i] >= vocab) {
			snprintf(err, errlen, "%s: token %d at position %zu is "
				 "not in 0..%d (V=%d)", path, d->tok[i], i,
				 vocab - 1, vocab);
			tr_data_free(d);
			return -1;
		}
	size_t n_val = (size_t)((double)d->n * val_fraction);
	d->n_train = d->n - n_val;
	if (d->n_train < (size_t)T + 1 || (val_fraction > 0 && n_val < (size_t)T + 1)) {
		snprintf(err, errlen, "%s: %zu tokens are too few: each split "
			 "needs at least T+1 = %d (training %zu, held out %zu)",
			 path, d->n, T + 1, d->n_train, n_val);
		tr_data_free(d);
		return -1;
	}
	d->size = d->n;
	uLong crc = crc32(0L, Z_NULL, 0);
	const unsigned char *bytes = (const unsigned char *)d->tok;
	size_t left = d->n * sizeof *d->tok;
	while (left) {
		uInt part = left > (1u << 30) ? (1u << 30) : (uInt)left;
		crc = crc32(crc, bytes, part);
		bytes += part;
		left -= part;
	}
	d->crc = (uint32_t)crc;
	return 0;
}

void tr_data_free(tr_data *d)
{
	free(d->tok);
	memset(d, 0, sizeof *d);
}

/* Copies the window at start into row b of inputs and targets. */
static void window(const tr_data *d, size_t start, int b, int T,
		   int32_t *inputs, int32_t *targets)
{
	memcpy(inputs + (size_t)b * T, d->tok + start, (size_t)T * sizeof *inputs);
	memcpy(targets + (size_t)b * T, d->tok + start + 1,
	       (size_t)T * sizeof *targets);
}

void tr_data_train_batch(const tr_data *d, uint64_t seed, long s, int first,
			 int rows, int T, int32_t *inputs, int32_t *targets)
{
	uint64_t k = seed ^ at_name_hash("andrea-train.batches");
	uint32_t key[2] = {(uint32_t)k, (uint32_t)(k >> 32)};
	uint64_t span = d->n_train - (uint64_t)T; /* starts 0..span-1 */
	for (int b = 0; b < rows; b++) {
		uint32_t ctr[4] = {(uint32_t)s, (uint32_t)((uint64_t)s >> 32),
				   (uint32_t)(first + b), 0}, r[4];
		at_philox4x32(ctr, key, r);
		uint64_t u = (uint64_t)r[0] | (uint64_t)r[1] << 32;
		window(d, (size_t)(u % span), b, T, inputs, targets);
	}
}

void tr_data_val_batch(const tr_data *d, int i, int n, int B, int first,
		       int rows, int T, int32_t *inputs, int32_t *targets)
{
	size_t n_val = d->n - d->n_train;
	uint64_t last = n_val - (uint64_t)T - 1; /* the last start */
	uint64_t K = (uint64_t)n * B;
	for (int b = 0; b < rows; b++) {
		uint64_t w = (uint64_t)i * B + first + b;
		uint64_t off = K > 1 ? w * last / (K - 1) : 0;
		window(d, d->n_train + (size_t)off, b, T, inputs, targets);
	}
}
