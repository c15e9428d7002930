/* fuzz_npy.c - the .npy reader: at_npy_read on the input as a file, and
 * at_npy_parse_header on it as a bare header dictionary. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "stream/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[256];
	at_dtype dt;
	int fortran, rank, wide;
	uint64_t dims[AT_MAX_RANK];
	err[0] = 0;
	if (at_npy_parse_header((const char *)data, size, &dt, &wide, &fortran,
				&rank, dims, err, sizeof err) < 0 && !err[0])
		abort();

	at_tensor t;
	err[0] = 0;
	/* odd sizes cast float64 and int64, even ones refuse them */
	if (at_npy_read(fuzz_tmpfile(data, size), &t, FUZZ_MAX_BYTES, size & 1,
			err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	/* touch every byte, so ASan sees a short buffer */
	unsigned char sum = 0;
	for (size_t i = 0; i < at_nbytes(&t); i++)
		sum += ((unsigned char *)t.data)[i];
	__asm__ volatile("" : : "r"(sum));
	at_tensor_free(&t);
	return 0;
}
