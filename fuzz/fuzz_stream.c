/* fuzz_stream.c - the stream reader: header, payload, copy, skip, check.
 *
 * The input is read as a stream over fmemopen.  The first byte picks, for
 * each record in turn, what is done with its payload (decode, copy
 * verbatim to a writer on /dev/null, skip, or check: decode a batch at a
 * time and discard) and the thread count, so every path and the threaded
 * decoder see every kind of damage.  A
 * decoded tensor is checked against its header, and the records copied
 * must read back as a well-formed stream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "stream/stream.h"

/* Reads the whole stream from f; returns the number of records or -1. */
static int read_all(FILE *f, unsigned mode, FILE *copy)
{
	at_read_opts ro = {.threads = 1 + (int)(mode >> 6), .max_bytes = FUZZ_MAX_BYTES};
	at_write_opts wo = {.level = 1, .shuffle = 1, .threads = 1,
			    .chunk_raw = AT_DEFAULT_CHUNK};
	at_reader r;
	memset(&r, 0, sizeof r);
	r.f = f;
	r.opts = ro;
	snprintf(r.label, sizeof r.label, "<fuzz>");
	at_writer w;
	at_writer_wrap(&w, copy, "<copy>", &wo);
	at_header *h = malloc(sizeof *h);
	if (!h)
		abort();
	int rc, n = 0;
	while ((rc = at_read_header(&r, h)) == 1) {
		unsigned how = (mode >> (2 * (n % 3))) & 3;
		n++;
		if (how == 0) {
			at_tensor t;
			if (at_read_payload(&r, h, &t) < 0) {
				rc = -1;
				break;
			}
			if (at_nbytes(&t) != h->nbytes || t.rank != h->rank ||
			    strcmp(t.name, h->name) != 0)
				abort();
			at_tensor_free(&t);
		} else if (how == 1) {
			if (at_copy_record(&r, h, &w) < 0) {
				rc = -1;
				break;
			}
		} else if ((how == 2 ? at_skip_payload(&r, h)
				     : at_check_payload(&r, h)) < 0) {
			rc = -1;
			break;
		}
		/* the message buffer must always hold one line */
		if (memchr(r.err, '\n', sizeof r.err))
			abort();
	}
	if (rc < 0 && (!r.err[0] || strchr(r.err, '\n')))
		abort(); /* a failure always comes with a one-line reason */
	free(h);
	if (copy && rc == 0)
		at_writer_finish(&w);
	return rc < 0 ? -1 : n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	unsigned mode = data[0];
	data++, size--;
	FILE *f = fmemopen((void *)data, size ? size : 1, "rb");
	if (!f)
		return 0;
	if (!size)
		fgetc(f); /* fmemopen refuses 0 bytes: consume the one */
	/* copies go to memory so a verbatim copy can be read again */
	char *cbuf = NULL;
	size_t clen = 0;
	FILE *copy = open_memstream(&cbuf, &clen);
	int n = read_all(f, mode, copy);
	fclose(f);
	fclose(copy);
	if (n >= 0 && clen) {
		/* records passed through verbatim read back without error
		 * (skipped: a copy does not check the data's CRC32) */
		FILE *g = fmemopen(cbuf, clen, "rb");
		if (read_all(g, 0x2a, NULL) < 0)
			abort();
		fclose(g);
	}
	free(cbuf);
	return 0;
}
