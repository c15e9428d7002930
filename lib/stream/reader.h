/* reader.h - what stream_read.c (headers) and stream_payload.c
 * (payloads) share of a reader's inner workings. */
#ifndef ANDREA_STREAM_READER_H
#define ANDREA_STREAM_READER_H

#include "stream/stream.h"

/* Formats "<label>: record N 'name': msg" into r->err and returns -1. */
int at_reader_fail(at_reader *r, int index, const char *name,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Reads exactly n bytes of record index (or of the header being read). */
int at_reader_get_exact(at_reader *r, void *buf, size_t n, int index,
			const char *name);

#endif
