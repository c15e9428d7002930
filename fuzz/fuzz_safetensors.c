/* fuzz_safetensors.c - the safetensors reader: at_st_open on the input as
 * a file (byte 0 flipped to a pickle's opening now and then), and, on a
 * header that passes, every tensor read as float32. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "model/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[1200];
	at_st st;
	err[0] = 0;
	const char *path = fuzz_tmpfile(data, size);
	if (at_st_open(&st, path, err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	for (int i = 0; i < st.n; i++) {
		const at_st_entry *e = &st.entries[i];
		if (e->end > st.data_len || e->begin > e->end)
			abort(); /* the header's checks let a range out */
		uint64_t n = at_st_count(e);
		if (n > (FUZZ_MAX_BYTES >> 2))
			continue;
		float *out = malloc(n * sizeof *out + 1);
		if (!out)
			abort();
		err[0] = 0;
		if (at_st_read_f32(&st, e, out, err, sizeof err) < 0 &&
		    (!err[0] || strchr(err, '\n')))
			abort();
		free(out);
	}
	at_st_close(&st);
	return 0;
}
