/* fuzz_common.c - helpers shared by the fuzz targets (fuzz.h). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stream/stream.h"
#include "text/tokenizer.h"

const char *fuzz_tmpfile(const uint8_t *data, size_t size)
{
	static char path[4096];
	if (!path[0]) {
		const char *dir = getenv("TMPDIR");
		snprintf(path, sizeof path, "%s/andrea-fuzz-%ld.bin",
			 dir && *dir ? dir : "/tmp", (long)getpid());
	}
	FILE *f = fopen(path, "wb");
	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
		perror(path);
		abort();
	}
	return path;
}

/* The ids of s[0, n) through t, each checked to spell its bytes back, in
 * *ids (malloc'd); their count.  Aborts where encoding fails (out of
 * memory aside, neither documented failure can happen in this build). */
static long encode_checked(at_tokenizer *t, const unsigned char *s, size_t n,
			   int32_t **ids)
{
	char err[300] = "";
	*ids = malloc((n ? n : 1) * sizeof **ids);
	if (!*ids)
		abort();
	long k = at_tok_encode(t, s, n, *ids, err, sizeof err);
	if (k < 0) {
		fprintf(stderr, "at_tok_encode: %s\n", err);
		abort();
	}
	size_t at = 0, len;
	for (long i = 0; i < k; i++) {
		const unsigned char *p = at_tok_piece(t, (*ids)[i], &len);
		if ((*ids)[i] < 0 || (*ids)[i] >= at_tok_size(t) || !p ||
		    len == 0 || len > n - at || memcmp(p, s + at, len) != 0) {
			fprintf(stderr, "id %d at %ld does not spell byte %zu on\n",
				(*ids)[i], i, at);
			abort();
		}
		at += len;
	}
	if ((size_t)k > n || at != n)
		abort();
	return k;
}

/* t written as its three records into memory and read back; NULL where
 * at_tok_write refused it (a one-line reason), else aborts on failure. */
static at_tokenizer *rewritten(const at_tokenizer *t)
{
	char *buf = NULL, err[600] = "";
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		abort();
	at_write_opts wo = {.level = 0, .threads = 1, .chunk_raw = AT_DEFAULT_CHUNK};
	at_writer w;
	at_writer_wrap(&w, f, "<tokenizer>", &wo);
	int rc = at_tok_write(t, &w);
	if (rc < 0 && (!w.err[0] || strchr(w.err, '\n')))
		abort();
	if (rc == 0 && at_writer_finish(&w) < 0)
		abort();
	fclose(f);
	if (rc < 0) {
		free(buf);
		return NULL;
	}
	at_reader r;
	memset(&r, 0, sizeof r);
	r.f = fmemopen(buf, len, "rb");
	r.opts = (at_read_opts){.threads = 1, .max_bytes = FUZZ_MAX_BYTES};
	snprintf(r.label, sizeof r.label, "<tokenizer>");
	at_header *h = malloc(sizeof *h);
	at_tensor rec[AT_TOK_RECORDS];
	int n = 0;
	if (!r.f || !h)
		abort();
	while (n < AT_TOK_RECORDS && at_read_header(&r, h) == 1 &&
	       at_read_payload(&r, h, &rec[n]) == 0)
		n++;
	if (n < 3 || r.err[0]) {
		fprintf(stderr, "tokenizer records read back: %s\n", r.err);
		abort();
	}
	at_tokenizer *back = at_tok_from_records(&rec[0], &rec[1], &rec[2],
						 n == 4 ? &rec[3] : NULL, err,
						 sizeof err);
	if (!back) {
		fprintf(stderr, "tokenizer records read back: %s\n", err);
		abort();
	}
	for (int i = 0; i < n; i++)
		at_tensor_free(&rec[i]);
	free(h);
	fclose(r.f);
	free(buf);
	return back;
}

void fuzz_tok_check(at_tokenizer *t, const uint8_t *s, size_t n)
{
	static const char *const texts[] = {
		"", "a", "Hello, world!", " the he t", "<|endoftext|>",
		"x<|endoftext|><|endoftext|> y<|endof",
		"don't we'll  123 3.14\n\n\t  x   ", "na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80",
		"bad \xff\xc3( \xe2\x82 utf-8\x80", "\xc4\xa0\xc4\x8a ab"};
	at_tokenizer *back = at_tok_is_bpe(t) ? rewritten(t) : NULL;
	if (back && (at_tok_size(back) != at_tok_size(t) ||
		     at_tok_bos(back) != at_tok_bos(t)))
		abort();
	for (size_t i = 0; i <= sizeof texts / sizeof texts[0]; i++) {
		const unsigned char *x = i < sizeof texts / sizeof texts[0]
						 ? (const unsigned char *)texts[i] : s;
		size_t len = i < sizeof texts / sizeof texts[0] ? strlen(texts[i]) : n;
		int32_t *ids, *again;
		long k = encode_checked(t, x, len, &ids);
		if (back && (encode_checked(back, x, len, &again) != k ||
			     memcmp(ids, again, (size_t)k * sizeof *ids) != 0)) {
			fprintf(stderr, "text %zu: its ids differ once the "
				"tokenizer is written and read back\n", i);
			abort();
		}
		if (back)
			free(again);
		free(ids);
	}
	at_tok_free(back);
}

void fuzz_tok_result(at_tokenizer *t, const char *err, const uint8_t *s,
		     size_t n)
{
	if (!t) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return;
	}
	fuzz_tok_check(t, s, n);
	at_tok_free(t);
}
