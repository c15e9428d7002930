/* stream_find.c - reading on to a record by its name (stream.h). */
#include "stream/stream.h"

#include <string.h>

int at_find_record(at_reader *r, const char *name, at_header *h)
{
	int rc;
	while ((rc = at_read_header(r, h)) == 1) {
		if (strcmp(h->name, name) == 0)
			return 1;
		if (at_skip_payload(r, h) < 0)
			return -1;
	}
	return rc;
}
