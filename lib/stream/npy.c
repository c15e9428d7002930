/* npy.c - reading and writing NumPy .npy files, strictly. */
#include "stream/npy.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/atomic_file.h"
#include "core/le.h"
#include "stream/stream.h"

#define NPY_MAX_HEADER 65536

typedef struct {
	const char *p, *end;
} cursor;

static void skip_ws(cursor *c)
{
	while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
		c->p++;
}

static int eat(cursor *c, char ch)
{
	skip_ws(c);
	if (c->p < c->end && *c->p == ch) {
		c->p++;
		return 1;
	}
	return 0;
}

/* A Python string literal in single or double quotes, no escapes and no
 * control bytes (they could not appear in a one-line message). */
static int get_string(cursor *c, char *out, size_t outlen)
{
	skip_ws(c);
	if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
		return -1;
	char q = *c->p++;
	size_t n = 0;
	while (c->p < c->end && *c->p != q) {
		unsigned char ch = (unsigned char)*c->p;
		if (ch == '\\' || ch < 0x20 || ch == 0x7f || n + 1 >= outlen)
			return -1;
		out[n++] = *c->p++;
	}
	if (c->p >= c->end)
		return -1;
	c->p++;
	out[n] = 0;
	return 0;
}

static int get_uint(cursor *c, uint64_t *v)
{
	skip_ws(c);
	const char *s = c->p;
	uint64_t x = 0;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
		if (x > (UINT64_MAX - 9) / 10)
			return -1;
		x = x * 10 + (uint64_t)(*c->p++ - '0');
	}
	if (c->p == s)
		return -1;
	if (c->p < c->end && *c->p == 'L') /* Python 2 long suffix */
		c->p++;
	*v = x;
	return 0;
}

static int dtype_from_descr(const char *d, at_dtype *dt, int *wide,
			    char *err, size_t errlen)
{
	*wide = 0;
	if (strcmp(d, "<f4") == 0)
		*dt = AT_F32;
	else if (strcmp(d, "<i4") == 0)
		*dt = AT_I32;
	else if (strcmp(d, "|u1") == 0)
		*dt = AT_U8;
	else if (strcmp(d, "<f8") == 0) /* NumPy's defaults, for casting */
		*dt = AT_F32, *wide = 1;
	else if (strcmp(d, "<i8") == 0)
		*dt = AT_I32, *wide = 1;
	else if (strchr(d, 'O'))
		return snprintf(err, errlen,
				"object arrays (pickles) are refused"), -1;
	else if (d[0] == '>')
		return snprintf(err, errlen,
				"big-endian data ('%s') is not supported", d), -1;
	else
		return snprintf(err, errlen,
				"dtype '%s' is not supported (only <f4, <i4, |u1, and "
				"<f8, <i8 cast)", d),
		       -1;
	return 0;
}

int at_npy_parse_header(const char *h, size_t len, at_dtype *dt, int *wide,
			int *fortran, int *rank, uint64_t *dims, char *err,
			size_t errlen)
{
	cursor c = {h, h + len};
	int have_descr = 0, have_order = 0, have_shape = 0;
	if (!eat(&c, '{'))
		goto syntax;
	while (!eat(&c, '}')) {
		char key[32];
		if (get_string(&c, key, sizeof key) < 0 || !eat(&c, ':'))
			goto syntax;
		if (strcmp(key, "descr") == 0 && !have_descr) {
			char descr[64];
			skip_ws(&c);
			if (c.p < c.end && *c.p == '[')
				return snprintf(err, errlen,
						"structured dtypes are not supported"), -1;
			if (get_string(&c, descr, sizeof descr) < 0)
				goto syntax;
			if (dtype_from_descr(descr, dt, wide, err, errlen) < 0)
				return -1;
			have_descr = 1;
		} else if (strcmp(key, "fortran_order") == 0 && !have_order) {
			skip_ws(&c);
			if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0) {
				*fortran = 1;
				c.p += 4;
			} else if ((size_t)(c.end - c.p) >= 5 &&
				   memcmp(c.p, "False", 5) == 0) {
				*fortran = 0;
				c.p += 5;
			} else {
				goto syntax;
			}
			have_order = 1;
		} else if (strcmp(key, "shape") == 0 && !have_shape) {
			if (!eat(&c, '('))
				goto syntax;
			*rank = 0;
			while (!eat(&c, ')')) {
				if (*rank == AT_MAX_RANK)
					return snprintf(err, errlen,
							"rank exceeds the maximum of %d",
							AT_MAX_RANK), -1;
				if (get_uint(&c, &dims[*rank]) < 0)
					goto syntax;
				(*rank)++;
				if (!eat(&c, ',')) {
					if (!eat(&c, ')'))
						goto syntax;
					break;
				}
			}
			have_shape = 1;
		} else {
			return snprintf(err, errlen, "unexpected header key '%s'", key),
			       -1;
		}
		if (!eat(&c, ',')) {
			if (!eat(&c, '}'))
				goto syntax;
			break;
		}
	}
	while (c.p < c.end && (*c.p == ' ' || *c.p == '\n' || *c.p == '\0'))
		c.p++;
	if (c.p != c.end)
		goto syntax;
	if (!have_descr || !have_order || !have_shape)
		return snprintf(err, errlen,
				"header lacks descr, fortran_order or shape"), -1;
	return 0;
syntax:
	snprintf(err, errlen, "malformed header dictionary");
	return -1;
}

/* Reorders Fortran-order data (first index fastest) into row-major. */
static void fortran_to_c(const unsigned char *src, unsigned char *dst,
			 int rank, const uint64_t *dims, size_t elem, uint64_t n)
{
	uint64_t idx[AT_MAX_RANK] = {0}, stride[AT_MAX_RANK];
	for (int i = 0; i < rank; i++)
		stride[i] = i ? stride[i - 1] * dims[i - 1] : 1;
	for (uint64_t k = 0; k < n; k++) {
		uint64_t off = 0;
		for (int i = 0; i < rank; i++)
			off += idx[i] * stride[i];
		memcpy(dst + k * elem, src + off * elem, elem);
		for (int i = rank - 1; i >= 0; i--) {
			if (++idx[i] < dims[i])
				break;
			idx[i] = 0;
		}
	}
}

/* Casts n wide elements (float64 or int64) in src to t's float32 or
 * int32; an int64 out of int32's range, or a finite float64 beyond
 * float32's, is an error naming its index. */
static int narrow(const unsigned char *src, at_tensor *t, uint64_t n,
		  char *err, size_t errlen)
{
	for (uint64_t i = 0; i < n; i++) {
		uint64_t bits = 0;
		for (int b = 7; b >= 0; b--)
			bits = bits << 8 | src[i * 8 + (unsigned)b];
		if (t->dtype == AT_I32) {
			int64_t v = (int64_t)bits;
			if (v < INT32_MIN || v > INT32_MAX)
				return snprintf(err, errlen, "cannot cast %lld at index %llu "
						"to int32", (long long)v,
						(unsigned long long)i), -1;
			((int32_t *)t->data)[i] = (int32_t)v;
		} else {
			double v;
			memcpy(&v, &bits, sizeof v);
			float f = (float)v;
			if (isinf(f) && isfinite(v))
				return snprintf(err, errlen, "cannot cast %g at index %llu "
						"to float32 (beyond its range)", v,
						(unsigned long long)i), -1;
			((float *)t->data)[i] = f;
		}
	}
	return 0;
}

int at_npy_read(const char *path, at_tensor *t, uint64_t max_bytes, int cast,
		char *err, size_t errlen)
{
	memset(t, 0, sizeof *t);
	FILE *f = fopen(path, "rb");
	if (!f)
		return snprintf(err, errlen, "%s", strerror(errno)), -1;
	unsigned char pre[12];
	char *header = NULL;
	unsigned char *raw = NULL;
	int rc = -1;
	size_t got = fread(pre, 1, 10, f);
	if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
		snprintf(err, errlen, "not a .npy file");
		goto out;
	}
	int major = pre[6];
	size_t hlen, pre_len = 10;
	if (pre[7] != 0) {
		snprintf(err, errlen, "unsupported .npy version %d.%d", major, pre[7]);
		goto out;
	} else if (major == 1) {
		hlen = le16(pre + 8);
	} else if (major == 2 || major == 3) {
		if (fread(pre + 10, 1, 2, f) != 2) {
			snprintf(err, errlen, "truncated header");
			goto out;
		}
		hlen = le32(pre + 8);
		pre_len = 12;
	} else {
		snprintf(err, errlen, "unsupported .npy version %d.%d", major, pre[7]);
		goto out;
	}
	if (hlen > NPY_MAX_HEADER) {
		snprintf(err, errlen, "header of %zu bytes exceeds %d", hlen,
			 NPY_MAX_HEADER);
		goto out;
	}
	header = malloc(hlen + 1);
	if (!header || fread(header, 1, hlen, f) != hlen) {
		snprintf(err, errlen, "truncated header");
		goto out;
	}
	at_dtype dt = 0;
	int fortran = 0, rank = 0, wide = 0;
	uint64_t dims[AT_MAX_RANK], numel;
	if (at_npy_parse_header(header, hlen, &dt, &wide, &fortran, &rank, dims,
				err, errlen) < 0)
		goto out;
	if (wide && !cast) {
		snprintf(err, errlen, "%s data: andrea's streams hold %s (give "
			 "--cast to convert, or save with .astype(np.%s))",
			 dt == AT_I32 ? "int64" : "float64",
			 dt == AT_I32 ? "int32" : "float32",
			 dt == AT_I32 ? "int32" : "float32");
		goto out;
	}
	/* the stream caps each dimension: what andrea-pack writes must read */
	for (int i = 0; i < rank; i++)
		if (dims[i] > AT_MAX_DIM) {
			snprintf(err, errlen,
				 "dimension %d of %llu exceeds the cap of %llu", i,
				 (unsigned long long)dims[i],
				 (unsigned long long)AT_MAX_DIM);
			goto out;
		}
	size_t elem = wide ? 8 : at_dtype_size(dt); /* as stored */
	if (at_shape_numel(rank, dims, &numel) < 0 || numel > max_bytes / elem) {
		snprintf(err, errlen, "array exceeds the cap of %llu bytes",
			 (unsigned long long)max_bytes);
		goto out;
	}
	size_t nbytes = (size_t)(numel * elem);
	struct stat st;
	if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_size != pre_len + hlen + nbytes) {
		snprintf(err, errlen, "data is %lld bytes, the header says %zu",
			 (long long)st.st_size - (long long)(pre_len + hlen), nbytes);
		goto out;
	}
	raw = malloc(nbytes ? nbytes : 1);
	if (!raw) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (fread(raw, 1, nbytes, f) != nbytes || fgetc(f) != EOF) {
		snprintf(err, errlen, "data length does not match the header");
		goto out;
	}
	if (at_tensor_init(t, "", dt, rank, dims) < 0) {
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	if (fortran && rank > 1 && wide) { /* reorder as stored, then narrow */
		unsigned char *c_order = malloc(nbytes ? nbytes : 1);
		if (!c_order) {
			snprintf(err, errlen, "out of memory");
			goto out;
		}
		fortran_to_c(raw, c_order, rank, dims, elem, numel);
		free(raw);
		raw = c_order;
	}
	if (wide) {
		if (narrow(raw, t, numel, err, errlen) < 0) {
			at_tensor_free(t);
			goto out;
		}
	} else if (fortran && rank > 1) {
		fortran_to_c(raw, t->data, rank, dims, elem, numel);
	} else {
		free(t->data);
		t->data = raw;
		raw = NULL;
	}
	rc = 0;
out:
	free(header);
	free(raw);
	fclose(f);
	return rc;
}

int at_npy_write(const char *path, const at_tensor *t, char *err,
		 size_t errlen)
{
	static const char *descr[] = {[AT_F32] = "<f4", [AT_I32] = "<i4",
				      [AT_U8] = "|u1"};
	char shape[AT_MAX_RANK * 24 + 4], header[1024];
	size_t off = 0;
	off += (size_t)snprintf(shape, sizeof shape, "(");
	for (int i = 0; i < t->rank; i++)
		off += (size_t)snprintf(shape + off, sizeof shape - off, "%s%llu",
					i ? ", " : "", (unsigned long long)t->dims[i]);
	snprintf(shape + off, sizeof shape - off, t->rank == 1 ? ",)" : ")");
	int n = snprintf(header, sizeof header,
			 "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
			 descr[t->dtype], shape);
	/* pad with spaces so the data starts on a 64-byte boundary */
	size_t total = 10 + (size_t)n + 1;
	size_t pad = (64 - total % 64) % 64;
	memset(header + n, ' ', pad);
	header[n + pad] = '\n';
	size_t hlen = (size_t)n + pad + 1;
	unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
	put16(pre + 8, (uint16_t)hlen);
	at_afile a;
	if (at_afile_open(&a, path) < 0)
		return snprintf(err, errlen, "%s", strerror(errno)), -1;
	size_t nbytes = at_nbytes(t);
	if (fwrite(pre, 1, 10, a.f) != 10 || fwrite(header, 1, hlen, a.f) != hlen ||
	    (nbytes && fwrite(t->data, 1, nbytes, a.f) != nbytes)) {
		snprintf(err, errlen, "write error: %s", strerror(errno));
		at_afile_abort(&a);
		return -1;
	}
	return at_afile_commit(&a, err, errlen);
}
