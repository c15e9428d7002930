/* stream_read.c - opening a stream and reading and checking its headers
 * (stream_payload.c reads the payloads).
 *
 * Every length read from the input is checked against a hard cap and, for
 * the tensor size, against ANDREA_MAX_BYTES before anything is allocated.
 */
#include "stream/stream.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/le.h"
#include "stream/pump.h"
#include "stream/reader.h"


int at_reader_fail(at_reader *r, int index, const char *name,
		   const char *fmt, ...)
{
	char msg[AT_ERR_LEN];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	if (index <= 0)
		snprintf(r->err, sizeof r->err, "%s: %s", r->label, msg);
	else if (name && *name)
		snprintf(r->err, sizeof r->err, "%s: record %d '%.64s': %s",
			 r->label, index, name, msg);
	else
		snprintf(r->err, sizeof r->err, "%s: record %d: %s", r->label,
			 index, msg);
	return -1;
}

/* Reads up to n bytes; fewer only at end of input or on a read error. */
static size_t get(at_reader *r, void *buf, size_t n)
{
	size_t got;
	if (r->pump) {
		got = at_pump_read(r->pump, buf, n, &r->read_err);
	} else {
		got = fread(buf, 1, n, r->f);
		if (got < n && ferror(r->f))
			r->read_err = errno;
	}
	r->offset += got;
	return got;
}

int at_reader_get_exact(at_reader *r, void *buf, size_t n, int index,
			const char *name)
{
	if (get(r, buf, n) == n)
		return 0;
	if (r->read_err)
		return at_reader_fail(r, index, name, "read error: %s",
			    strerror(r->read_err));
	return at_reader_fail(r, index, name, "input ended inside the record");
}

int at_reader_open(at_reader *r, const char *path, const at_read_opts *o)
{
	memset(r, 0, sizeof *r);
	r->opts = *o;
	if (r->opts.threads < 1)
		r->opts.threads = 1;
	if (!path || strcmp(path, "-") == 0) {
		r->f = stdin;
		snprintf(r->label, sizeof r->label, "<stdin>");
	} else {
		snprintf(r->label, sizeof r->label, "%s", path);
		if (!(r->f = fopen(path, "rb"))) {
			snprintf(r->err, sizeof r->err, "%s: %s", path,
				 strerror(errno));
			return -1;
		}
		r->owns_file = 1;
	}
	if (at_is_pipe(fileno(r->f)))
		r->pump = at_pump_reader(fileno(r->f));
	return 0;
}

void at_reader_close(at_reader *r)
{
	at_pump_free(r->pump);
	r->pump = NULL;
	if (r->owns_file && r->f)
		fclose(r->f);
	r->f = NULL;
}

static int read_end_record(at_reader *r, const unsigned char *fixed)
{
	unsigned char crcbuf[4];
	int after = r->records;
	if (get(r, crcbuf, 4) != 4)
		return at_reader_fail(r, 0, NULL, "input ended inside the end record");
	if (le32(crcbuf) != (uint32_t)crc32(0L, fixed, AT_FIXED_HEADER))
		return at_reader_fail(r, 0, NULL,
			    "end record after record %d: header CRC32 mismatch",
			    after);
	for (int i = 6; i < AT_FIXED_HEADER; i++)
		if (fixed[i])
			return at_reader_fail(r, 0, NULL,
				    "end record after record %d: nonzero field",
				    after);
	r->seen_end = 1;
	return 0;
}

/* Checks the fixed fields that decide how many more header bytes to read. */
static int check_fixed(at_reader *r, int index, const unsigned char *p)
{
	int dtype = p[6], rank = p[7];
	unsigned flags = p[8];
	unsigned name_len = p[9], attr_len = le16(p + 10);
	if (!at_dtype_name(dtype))
		return at_reader_fail(r, index, NULL, "unknown dtype code %d", dtype);
	if (at_dtype_size((at_dtype)dtype) == 0)
		return at_reader_fail(r, index, NULL,
			    "dtype %s is reserved and not supported by this version",
			    at_dtype_name(dtype));
	if (rank > AT_MAX_RANK)
		return at_reader_fail(r, index, NULL, "rank %d exceeds the maximum of %d",
			    rank, AT_MAX_RANK);
	if (flags & ~AT_FLAG_SHUFFLE)
		return at_reader_fail(r, index, NULL, "unknown flags 0x%02x", flags);
	if (name_len == 0)
		return at_reader_fail(r, index, NULL, "empty record name");
	if (attr_len > AT_MAX_ATTR_BYTES)
		return at_reader_fail(r, index, NULL,
			    "attribute block of %u bytes exceeds %d", attr_len,
			    AT_MAX_ATTR_BYTES);
	return 0;
}

/* Decodes the CRC-checked variable part: dims, name, attributes. */
static int parse_header(at_reader *r, int index, at_header *h)
{
	const unsigned char *p = h->raw;
	h->dtype = (at_dtype)p[6];
	h->rank = p[7];
	h->flags = p[8];
	h->chunk_raw = le32(p + 12);
	size_t name_len = p[9], attr_len = le16(p + 10);
	const unsigned char *q = p + AT_FIXED_HEADER;
	/* dims past the rank are zero, so whole shapes compare with memcmp */
	memset(h->dims, 0, sizeof h->dims);
	for (int i = 0; i < h->rank; i++, q += 8)
		h->dims[i] = le64(q);
	if (!at_name_valid((const char *)q, name_len))
		return at_reader_fail(r, index, NULL,
			    "record name contains whitespace or control bytes");
	memcpy(h->name, q, name_len);
	h->name[name_len] = 0;
	q += name_len;
	char why[200];
	if (at_attrs_parse(&h->attrs, (const char *)q, attr_len, why,
			   sizeof why) < 0)
		return at_reader_fail(r, index, h->name, "%s", why);

	uint64_t numel;
	for (int i = 0; i < h->rank; i++)
		if (h->dims[i] > AT_MAX_DIM)
			return at_reader_fail(r, index, h->name,
				    "dimension %d of %llu exceeds the cap of %llu",
				    i, (unsigned long long)h->dims[i],
				    (unsigned long long)AT_MAX_DIM);
	size_t elem = at_dtype_size(h->dtype);
	if (at_shape_numel(h->rank, h->dims, &numel) < 0)
		return at_reader_fail(r, index, h->name, "element count overflows 64 bits");
	if (numel > UINT64_MAX / elem)
		return at_reader_fail(r, index, h->name, "byte count overflows 64 bits");
	h->nbytes = numel * elem;
	if (h->chunk_raw == 0 || h->chunk_raw > AT_MAX_CHUNK ||
	    h->chunk_raw % elem)
		return at_reader_fail(r, index, h->name,
			    "chunk size %u is not a multiple of %zu in 1..%u",
			    h->chunk_raw, elem, AT_MAX_CHUNK);
	return 0;
}

int at_read_header(at_reader *r, at_header *h)
{
	for (;;) {
		unsigned char *p = h->raw;
		int index = r->records + 1;
		size_t got = get(r, p, AT_FIXED_HEADER);
		if (got == 0) {
			if (r->read_err)
				return at_reader_fail(r, 0, NULL, "read error: %s",
					    strerror(r->read_err));
			if (r->offset == 0)
				return at_reader_fail(r, 0, NULL,
					    "empty input: not an andrea stream");
			if (r->seen_end)
				return 0;
			return at_reader_fail(r, 0, NULL,
				    "stream has no end record after record %d: "
				    "did an earlier stage fail?",
				    r->records);
		}
		if (memcmp(p, AT_MAGIC, got < 4 ? got : 4) != 0) {
			if (r->seen_end)
				return at_reader_fail(r, 0, NULL,
					    "trailing garbage after the end record");
			if (r->offset == got)
				return at_reader_fail(r, 0, NULL,
					    "not an andrea stream (bad magic)");
			return at_reader_fail(r, index, NULL,
				    "bad magic: not a record header");
		}
		/* a cut header: byte 5 tells an end record from a record */
		if (got < AT_FIXED_HEADER && got > 5 && p[5] == AT_KIND_END)
			return at_reader_fail(r, 0, NULL,
					      "input ended inside the end record");
		if (got < AT_FIXED_HEADER && got <= 5)
			return r->offset == got ?
				at_reader_fail(r, 0, NULL, "input ended inside "
					       "the first header") :
			       r->records ?
				at_reader_fail(r, 0, NULL, "input ended inside "
					       "the header after record %d",
					       r->records) :
				at_reader_fail(r, 0, NULL, "input ended inside "
					       "a header after the end record");
		if (got < AT_FIXED_HEADER)
			return at_reader_fail(r, index, NULL, "input ended inside the record");
		if (p[4] != AT_VERSION)
			return at_reader_fail(r, index, NULL, "unsupported format version %d",
				    p[4]);
		if (p[5] == AT_KIND_END) {
			if (read_end_record(r, p) < 0)
				return -1;
			continue;
		}
		if (p[5] != AT_KIND_TENSOR)
			return at_reader_fail(r, index, NULL, "unknown record kind %d", p[5]);
		if (check_fixed(r, index, p) < 0)
			return -1;
		size_t rest = 8 * (size_t)p[7] + p[9] + le16(p + 10) + 4;
		if (at_reader_get_exact(r, p + AT_FIXED_HEADER, rest, index, NULL) < 0)
			return -1;
		h->raw_len = AT_FIXED_HEADER + rest;
		if (le32(p + h->raw_len - 4) !=
		    (uint32_t)crc32(0L, p, (uInt)(h->raw_len - 4)))
			return at_reader_fail(r, index, NULL, "header CRC32 mismatch");
		if (parse_header(r, index, h) < 0)
			return -1;
		h->index = index;
		r->records = index;
		r->seen_end = 0;
		return 1;
	}
}
