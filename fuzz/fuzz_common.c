/* fuzz_common.c - helpers shared by the fuzz targets (fuzz.h). */
#include "fuzz.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
