/* fuzz_capture.c - what the files of --patch FILE and --ablate
 * L.H:mean=FILE hold (lib/cli/capture.h): the records capture_is_record
 * keeps, put by capture_patch into activations of the shapes a run could
 * give them (their own, and one whose T, heads and selected positions
 * byte 0 picks), and capture_reference_mean for the layer and head byte
 * 1 picks.  A refusal must be one line and leave the activation as it
 * was; an accepted patch writes within it (ASan).
 *
 * Byte 0's top bit picks where the records come from.  Set: the rest of
 * the input is a stream, read as the tools read it, by
 * capture_read_records (a zlib record whose bytes change fails its
 * checksum there, so this path mostly meets the reader's refusals).
 * Clear: the rest is records made here, so that
 * names, shapes and attributes reach the capture code directly: each a
 * byte of name (an index into capture_names, one past it "tokens"), a
 * byte of rank (0..5), a byte a dimension (0..15), a byte of length and
 * that many bytes of attribute block (key=value lines, at_attrs_parse);
 * every record float32, its values its element indices plus one. */
#include <stdlib.h>
#include <string.h>

#include "cli/capture.h"
#include "fuzz.h"
#include "stream/stream.h"

#define MAX_RECORDS 16
#define MAX_RUN_FLOATS (1u << 22)

static void one_line(const char *err)
{
	if (!err[0] || strchr(err, '\n'))
		abort();
}

/* capture_patch of p into an activation of rank and dims, where it holds
 * at most MAX_RUN_FLOATS: every float of it a sentinel the records'
 * values never are, which a refusal must leave. */
static void patch_into(const at_tensor *p, const at_positions *sel, int rank,
		       const uint64_t *dims)
{
	uint64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] && n > MAX_RUN_FLOATS / dims[i])
			return;
		n *= dims[i];
	}
	float *data = malloc((n ? n : 1) * sizeof *data);
	if (!data)
		abort();
	for (uint64_t i = 0; i < n; i++)
		data[i] = -1.0f;
	char err[512] = "";
	if (capture_patch(p, sel, data, rank, dims, err, sizeof err) < 0) {
		one_line(err);
		for (uint64_t i = 0; i < n; i++)
			if (data[i] != -1.0f) /* a refusal writes nothing */
				abort();
	}
	free(data);
}

/* Appends the records of a stream in s[0..len) that the tools would keep
 * (capture_read_records, as --patch reads a file). */
static void from_stream(const uint8_t *s, size_t len, at_tensor **list,
			int *n)
{
	at_read_opts ro = {.threads = 1, .max_bytes = FUZZ_MAX_BYTES};
	at_reader r;
	if (at_reader_open(&r, fuzz_tmpfile(s, len), &ro) < 0) {
		one_line(r.err);
		return;
	}
	if (capture_read_records(&r, list, n) < 0)
		one_line(r.err);
	at_reader_close(&r);
}

/* Appends the records made from s[0..len) (the header comment's layout)
 * that capture_is_record keeps. */
static void made_here(const uint8_t *s, size_t len, at_tensor **list, int *n)
{
	int names = 0;
	while (capture_names[names])
		names++;
	size_t i = 0;
	while (*n < MAX_RECORDS && i + 3 <= len) {
		at_header h;
		memset(&h, 0, sizeof h);
		int name = s[i++] % (names + 1);
		strcpy(h.name, name < names ? capture_names[name] : "tokens");
		h.dtype = AT_F32;
		h.rank = s[i++] % 6;
		for (int d = 0; d < h.rank; d++)
			h.dims[d] = i < len ? s[i++] & 15 : 1;
		size_t alen = i < len ? s[i++] : 0;
		if (alen > len - i)
			alen = len - i;
		char err[256];
		int ok = at_attrs_parse(&h.attrs, (const char *)s + i, alen, err,
					sizeof err) == 0;
		i += alen;
		if (!ok || !capture_is_record(&h))
			continue;
		at_tensor *grown = realloc(*list, (size_t)(*n + 1) * sizeof *grown);
		if (!grown)
			abort();
		*list = grown;
		at_tensor *t = &grown[*n];
		if (at_tensor_init(t, h.name, h.dtype, h.rank, h.dims) < 0)
			abort();
		t->attrs = h.attrs;
		for (uint64_t e = 0; e < at_numel(t); e++)
			((float *)t->data)[e] = (float)(e + 1);
		(*n)++;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint8_t pick = data[0], who = data[1];
	at_tensor *list = NULL;
	int n = 0;
	if (pick & 0x80)
		from_stream(data + 2, size - 2, &list, &n);
	else
		made_here(data + 2, size - 2, &list, &n);
	at_positions sel;
	const char *sel_text = pick & 1 ? "0,2-3" : "1";
	if (at_positions_parse(sel_text, strlen(sel_text), 64, &sel) < 0)
		abort();
	for (int i = 0; i < n; i++) {
		const at_tensor *p = &list[i];
		int rank = p->rank == 4 ? 4 : 3;
		uint64_t own[4] = {0}, other[4];
		for (int d = 0; d < rank && d < p->rank; d++)
			own[d] = p->dims[d];
		patch_into(p, NULL, rank, own);
		memcpy(other, own, sizeof other);
		other[rank - 2] += (pick >> 1) & 7; /* a longer run's T */
		if (rank == 4)
			other[1] = 1 + ((pick >> 4) & 3); /* and its heads */
		patch_into(p, pick & 0x40 ? &sel : NULL, rank, other);
	}
	float *ref = NULL;
	uint64_t T, D;
	if (capture_reference_mean(list, n, who & 15, who >> 4, &ref, &T, &D) == 0)
		free(ref);
	for (int i = 0; i < n; i++)
		at_tensor_free(&list[i]);
	free(list);
	return 0;
}
