/* fuzz_capture.c - the capture files that --patch FILE and --ablate
 * L.H:mean=FILE read (lib/cli/capture.h): every record of the input less
 * its first two bytes, as a stream, that capture_is_record keeps, read
 * whole, then capture_patch into activations of the shapes a run could
 * give it (its own, and one whose T, H and selected positions byte 0
 * picks), and capture_reference_mean over the records for the layer and
 * head byte 1 picks.  A refusal must be one line and leave the activation as it was;
 * an accepted patch writes within it (ASan). */
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

/* capture_patch of p into a zeroed activation of rank and dims, where it
 * holds at most MAX_RUN_FLOATS. */
static void patch_into(const at_tensor *p, const at_positions *sel, int rank,
		       const uint64_t *dims)
{
	uint64_t n = 1;
	for (int i = 0; i < rank; i++) {
		if (dims[i] && n > MAX_RUN_FLOATS / dims[i])
			return;
		n *= dims[i];
	}
	float *data = calloc(n + 1, sizeof *data);
	if (!data)
		abort();
	char err[512] = "";
	if (capture_patch(p, sel, data, rank, dims, err, sizeof err) < 0) {
		one_line(err);
		for (uint64_t i = 0; i < n; i++)
			if (data[i] != 0.0f) /* a refusal writes nothing */
				abort();
	}
	free(data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 2)
		return 0;
	uint8_t pick = data[0], who = data[1];
	at_read_opts ro = {.threads = 1, .max_bytes = FUZZ_MAX_BYTES};
	at_reader r;
	if (at_reader_open(&r, fuzz_tmpfile(data + 2, size - 2), &ro) < 0) {
		one_line(r.err);
		return 0;
	}
	at_tensor list[MAX_RECORDS];
	int n = 0;
	at_header h;
	while (n < MAX_RECORDS && at_read_header(&r, &h) == 1) {
		if (!capture_is_record(&h)) {
			if (at_skip_payload(&r, &h) < 0)
				break;
			continue;
		}
		if (at_read_payload(&r, &h, &list[n]) < 0)
			break;
		n++;
	}
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
	at_reader_close(&r);
	return 0;
}
