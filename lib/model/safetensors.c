/* safetensors.c - the safetensors reader of safetensors.h. */
#include "model/safetensors.h"

#include <errno.h>
#ifdef ANDREA_JSON
#include <jansson.h>
#endif
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/atomic_file.h"
#include "core/le.h"
#include "stream/stream.h"

#define fail at_import_fail

/* At most this many tensors (GPT-2 XL has some 580). */
#define MAX_TENSORS (1 << 20)

int at_import_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	/* names and jansson's "near '...'" come from the file: one line */
	for (char *c = err; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = '?';
	return -1;
}

int at_import_read(const char *path, size_t cap, char **buf, size_t *n,
		   char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	char *b = malloc(cap + 1);
	size_t got = b ? fread(b, 1, cap + 1, f) : 0;
	int bad = ferror(f);
	fclose(f);
	if (!b || bad || got > cap) {
		free(b);
		return fail(err, errlen, "%s: %s", path, !b ? "out of memory" :
			    bad ? "read error" : "too large for its kind of file");
	}
	b[got] = 0;
	*buf = b;
	*n = got;
	return 0;
}

#ifdef ANDREA_JSON
/* The format's dtypes and their sizes; 0 for a name it does not have. */
static int dtype_size(const char *d)
{
	static const struct {
		const char *name;
		int size;
	} known[] = {{"BOOL", 1}, {"U8", 1},   {"I8", 1},   {"F8_E5M2", 1},
		     {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2},  {"F16", 2},
		     {"BF16", 2}, {"I32", 4},  {"U32", 4},  {"F32", 4},
		     {"F64", 8},  {"I64", 8},  {"U64", 8}};
	for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
		if (strcmp(d, known[i].name) == 0)
			return known[i].size;
	return 0;
}

/* By range, as the format's reader sorts them: an empty tensor before
 * the one that begins where it lies, whatever the header's order. */
static int by_range(const void *a, const void *b)
{
	const at_st_entry *x = a, *y = b;
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	return x->end < y->end ? -1 : x->end > y->end;
}

/* A JSON number that is a whole number from 0 up, into *v. */
static int whole(const json_t *j, uint64_t *v)
{
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return -1;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

/* One tensor's description into e; its name already set. */
static int parse_entry(at_st_entry *e, const json_t *d, char *err,
		       size_t errlen)
{
	const char *n = e->name;
	if (!json_is_object(d))
		return fail(err, errlen, "'%s': not an object", n);
	const json_t *dt = json_object_get(d, "dtype");
	const json_t *shape = json_object_get(d, "shape");
	const json_t *off = json_object_get(d, "data_offsets");
	if (!json_is_string(dt) || !json_is_array(shape) || !json_is_array(off))
		return fail(err, errlen, "'%s': needs a dtype string and shape "
			    "and data_offsets arrays", n);
	if (!(e->elem = dtype_size(json_string_value(dt))))
		return fail(err, errlen, "'%s': unknown dtype '%.16s'", n,
			    json_string_value(dt));
	snprintf(e->dtype, sizeof e->dtype, "%s", json_string_value(dt));
	if (json_array_size(shape) > AT_MAX_RANK)
		return fail(err, errlen, "'%s': rank %zu is more than %d", n,
			    json_array_size(shape), AT_MAX_RANK);
	e->rank = (int)json_array_size(shape);
	uint64_t bytes = (uint64_t)e->elem;
	for (int i = 0; i < e->rank; i++) {
		if (whole(json_array_get(shape, (size_t)i), &e->dims[i]) < 0)
			return fail(err, errlen, "'%s': shape[%d] is not a whole "
				    "number", n, i);
		if (__builtin_mul_overflow(bytes, e->dims[i], &bytes))
			return fail(err, errlen, "'%s': its shape overflows", n);
	}
	if (json_array_size(off) != 2 ||
	    whole(json_array_get(off, 0), &e->begin) < 0 ||
	    whole(json_array_get(off, 1), &e->end) < 0 || e->end < e->begin)
		return fail(err, errlen, "'%s': data_offsets is not [begin, end] "
			    "with begin <= end", n);
	if (e->end - e->begin != bytes)
		return fail(err, errlen, "'%s': data_offsets hold %llu bytes, its "
			    "shape and dtype %llu", n,
			    (unsigned long long)(e->end - e->begin),
			    (unsigned long long)bytes);
	return 0;
}

#endif

int at_st_parse(at_st *st, const char *json, size_t len, uint64_t data_len,
		char *err, size_t errlen)
{
	st->entries = NULL;
	st->n = 0;
	st->data_len = data_len;
	if (len == 0 || json[0] != '{')
		return fail(err, errlen, "the header does not begin with '{'");
#ifndef ANDREA_JSON
	return fail(err, errlen, "this build has no JSON reader (jansson: "
		    "Debian's libjansson-dev, then make again)");
#else
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return fail(err, errlen, "header: %s (line %d)", je.text, je.line);
	int rc = -1;
	size_t n = json_object_size(root);
	if (!json_is_object(root) || n > MAX_TENSORS) {
		fail(err, errlen, "header: not an object of at most %d tensors",
		     MAX_TENSORS);
		goto out;
	}
	st->entries = calloc(n + 1, sizeof *st->entries);
	if (!st->entries) {
		fail(err, errlen, "out of memory");
		goto out;
	}
	const char *key;
	json_t *val;
	json_object_foreach(root, key, val) {
		if (strcmp(key, "__metadata__") == 0) {
			const char *k;
			json_t *v;
			if (!json_is_object(val)) {
				fail(err, errlen, "__metadata__ is not an object");
				goto out;
			}
			json_object_foreach(val, k, v) if (!json_is_string(v)) {
				fail(err, errlen, "__metadata__ '%.64s' is not a "
				     "string", k);
				goto out;
			}
			continue;
		}
		at_st_entry *e = &st->entries[st->n];
		if (strlen(key) > AT_MAX_NAME || !key[0]) {
			fail(err, errlen, "a tensor name of %zu bytes (1 to %d)",
			     strlen(key), AT_MAX_NAME);
			goto out;
		}
		snprintf(e->name, sizeof e->name, "%s", key);
		if (parse_entry(e, val, err, errlen) < 0)
			goto out;
		st->n++;
	}
	/* in the order of their data: each begins where the one before
	 * ended, and the last ends where the data does */
	qsort(st->entries, (size_t)st->n, sizeof *st->entries, by_range);
	uint64_t at = 0;
	for (int i = 0; i < st->n; i++) {
		const at_st_entry *e = &st->entries[i];
		if (e->begin != at) {
			fail(err, errlen, "'%s': its data begins at %llu, not at %llu "
			     "where the one before ends (%s)", e->name,
			     (unsigned long long)e->begin, (unsigned long long)at,
			     e->begin < at ? "an overlap" : "a hole");
			goto out;
		}
		at = e->end;
	}
	if (at != data_len) {
		fail(err, errlen, "the tensors hold %llu bytes of data, the file "
		     "%llu", (unsigned long long)at, (unsigned long long)data_len);
		goto out;
	}
	rc = 0;
out:
	json_decref(root);
	if (rc < 0) {
		free(st->entries);
		st->entries = NULL;
		st->n = 0;
	}
	return rc;
#endif
}

int at_is_pickle(const unsigned char *head, size_t n)
{
	/* a pickle opens with PROTO 2..5; torch.save writes a zip of them */
	return (n >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5) ||
	       (n >= 4 && memcmp(head, "PK\003\004", 4) == 0);
}

int at_st_open(at_st *st, const char *path, char *err, size_t errlen)
{
	memset(st, 0, sizeof *st);
	snprintf(st->path, sizeof st->path, "%s", path);
	char why[600];
	unsigned char head[8];
	if (!(st->f = fopen(path, "rb")))
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	size_t got = fread(head, 1, sizeof head, st->f);
	if (at_is_pickle(head, got)) {
		at_st_close(st);
		return fail(err, errlen, "%s: a Python pickle (a PyTorch or nanoGPT "
			    "checkpoint): andrea never unpickles a file; convert "
			    "it to safetensors first (safetensors.torch.save_file)",
			    path);
	}
	if (got < sizeof head || fseeko(st->f, 0, SEEK_END) != 0) {
		at_st_close(st);
		return fail(err, errlen, "%s: not a safetensors file (%zu bytes)",
			    path, got);
	}
	off_t end = ftello(st->f);
	uint64_t size = end < 8 ? 8 : (uint64_t)end, hlen = le64(head);
	if (hlen > AT_ST_MAX_HEADER || hlen > size - 8) {
		at_st_close(st);
		return fail(err, errlen, "%s: a header of %llu bytes (at most %u, "
			    "and within the file's %llu)", path,
			    (unsigned long long)hlen, AT_ST_MAX_HEADER,
			    (unsigned long long)size);
	}
	char *json = malloc(hlen + 1);
	if (!json || fseeko(st->f, 8, SEEK_SET) != 0 ||
	    fread(json, 1, hlen, st->f) != hlen) {
		free(json);
		at_st_close(st);
		return fail(err, errlen, "%s: cannot read its header", path);
	}
	st->data_start = 8 + hlen;
	int rc = at_st_parse(st, json, hlen, size - 8 - hlen, why, sizeof why);
	free(json);
	if (rc < 0) {
		at_st_close(st);
		return fail(err, errlen, "%s: %s", path, why);
	}
	return 0;
}

void at_st_close(at_st *st)
{
	if (st->f)
		fclose(st->f);
	free(st->entries);
	st->f = NULL;
	st->entries = NULL;
	st->n = 0;
}

const at_st_entry *at_st_find(const at_st *st, const char *name)
{
	for (int i = 0; i < st->n; i++)
		if (strcmp(st->entries[i].name, name) == 0)
			return &st->entries[i];
	return NULL;
}

uint64_t at_st_count(const at_st_entry *e)
{
	uint64_t n = 1;
	for (int i = 0; i < e->rank; i++)
		n *= e->dims[i];
	return n;
}

/* IEEE half to float, every case (subnormals, inf, NaN). */
static float from_f16(uint16_t h)
{
	uint32_t sign = (uint32_t)(h >> 15) << 31, exp = h >> 10 & 31,
		 man = h & 1023, bits;
	if (exp == 31) {
		bits = sign | 0x7f800000u | man << 13;
	} else if (exp) {
		bits = sign | (exp + 112) << 23 | man << 13;
	} else if (man) { /* subnormal: normalise */
		int e = -1;
		do {
			man <<= 1;
			e++;
		} while (!(man & 1024));
		bits = sign | (uint32_t)(112 - e) << 23 | (man & 1023) << 13;
	} else {
		bits = sign;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

int at_st_read_f32(const at_st *st, const at_st_entry *e, float *out,
		   char *err, size_t errlen)
{
	int kind = strcmp(e->dtype, "F32") == 0    ? 4
		   : strcmp(e->dtype, "BF16") == 0 ? 2
		   : strcmp(e->dtype, "F16") == 0  ? 1
						   : 0;
	if (!kind)
		return fail(err, errlen, "%s: '%s': dtype %s (andrea reads F32, "
			    "BF16 and F16)", st->path, e->name, e->dtype);
	if (fseeko(st->f, (off_t)(st->data_start + e->begin), SEEK_SET) != 0)
		return fail(err, errlen, "%s: '%s': cannot seek", st->path, e->name);
	uint64_t n = at_st_count(e);
	unsigned char buf[1 << 16];
	size_t per = sizeof buf / (size_t)e->elem;
	for (uint64_t i = 0; i < n;) {
		size_t k = n - i < per ? (size_t)(n - i) : per;
		if (fread(buf, (size_t)e->elem, k, st->f) != k)
			return fail(err, errlen, "%s: '%s': the file ends inside it",
				    st->path, e->name);
		for (size_t j = 0; j < k; j++, i++) {
			const unsigned char *p = buf + j * (size_t)e->elem;
			uint32_t bits = kind == 4 ? le32(p) : (uint32_t)le16(p) << 16;
			if (kind == 1)
				out[i] = from_f16(le16(p));
			else
				memcpy(&out[i], &bits, 4);
		}
	}
	return 0;
}

#ifdef ANDREA_JSON
/* The header's JSON for t, padded with spaces to a multiple of 8 bytes
 * (the caller frees it); NULL when out of memory. */
static char *header_json(const at_st_out *t, int n, size_t *len)
{
	json_t *root = json_object();
	uint64_t at = 0;
	for (int i = 0; root && i < n; i++) {
		json_t *shape = json_array();
		uint64_t bytes = 4;
		for (int d = 0; d < t[i].rank; d++) {
			json_array_append_new(shape, json_integer((json_int_t)t[i].dims[d]));
			bytes *= t[i].dims[d];
		}
		json_t *e = json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape",
				      shape, "data_offsets", (json_int_t)at,
				      (json_int_t)(at + bytes));
		if (!e || json_object_set_new(root, t[i].name, e) < 0) {
			json_decref(root);
			return NULL;
		}
		at += bytes;
	}
	char *text = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER)
			  : NULL;
	json_decref(root);
	if (!text)
		return NULL;
	size_t raw = strlen(text), padded = (raw + 7) / 8 * 8;
	char *out = realloc(text, padded + 1);
	if (!out) {
		free(text);
		return NULL;
	}
	memset(out + raw, ' ', padded - raw);
	out[padded] = 0;
	*len = padded;
	return out;
}
#endif

int at_st_write(const char *path, const at_st_out *t, int n, char *err,
		size_t errlen)
{
#ifndef ANDREA_JSON
	(void)t;
	(void)n;
	return fail(err, errlen, "%s: this build has no JSON writer (jansson: "
		    "Debian's libjansson-dev, then make again)", path);
#else
	size_t hlen;
	char *json = header_json(t, n, &hlen);
	if (!json)
		return fail(err, errlen, "%s: out of memory", path);
	at_afile a;
	if (at_afile_open(&a, path) < 0) {
		free(json);
		return fail(err, errlen, "%s: %s", path, strerror(errno));
	}
	FILE *f = a.f;
	unsigned char len8[8];
	put64(len8, hlen);
	int ok = fwrite(len8, 1, 8, f) == 8 && fwrite(json, 1, hlen, f) == hlen;
	free(json);
	unsigned char buf[1 << 16];
	for (int i = 0; ok && i < n; i++) {
		uint64_t count = 1;
		for (int d = 0; d < t[i].rank; d++)
			count *= t[i].dims[d];
		for (uint64_t j = 0; ok && j < count;) {
			size_t k = count - j < sizeof buf / 4 ? (size_t)(count - j)
							      : sizeof buf / 4;
			for (size_t m = 0; m < k; m++) {
				uint32_t bits;
				memcpy(&bits, &t[i].data[j + m], 4);
				for (int b = 0; b < 4; b++)
					buf[4 * m + b] = (unsigned char)(bits >> 8 * b);
			}
			ok = fwrite(buf, 4, k, f) == k;
			j += k;
		}
	}
	char msg[300];
	if (!ok) {
		int e = errno;
		at_afile_abort(&a);
		return fail(err, errlen, "%s: write error: %s", path, strerror(e));
	}
	if (at_afile_commit(&a, msg, sizeof msg) < 0)
		return fail(err, errlen, "%s: %s", path, msg);
	return 0;
#endif
}
