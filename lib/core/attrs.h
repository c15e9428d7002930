/* attrs.h - the key=value attribute block carried by every record.
 *
 * Attributes tell later stages what earlier ones did (layer, head, scale,
 * mask), so no stage needs a repeated flag.  Keys are 1..63 bytes of
 * [A-Za-z0-9_.-]; values are 0..127 printable ASCII bytes.  On the wire the
 * block is "key=value\n" lines in insertion order, at most AT_MAX_ATTR_BYTES.
 */
#ifndef ANDREA_ATTRS_H
#define ANDREA_ATTRS_H

#include <stddef.h>
#include <stdint.h>

#define AT_MAX_ATTRS 32
#define AT_MAX_KEY 63
#define AT_MAX_VALUE 127
#define AT_MAX_ATTR_BYTES 4096

typedef struct {
	int n;
	char key[AT_MAX_ATTRS][AT_MAX_KEY + 1];
	char value[AT_MAX_ATTRS][AT_MAX_VALUE + 1];
	/* the first key at_attr_set could not hold, or "": the stream writer
	 * refuses such a block rather than write it without that key */
	char lost[AT_MAX_KEY + 1];
} at_attrs;

/* The value of key, or NULL when absent. */
const char *at_attr_get(const at_attrs *a, const char *key);
/* Adds or replaces key.  Returns 0, or -1 if the key or value is invalid
 * or the block would exceed its caps; then the key is kept in a->lost. */
int at_attr_set(at_attrs *a, const char *key, const char *value);
int at_attr_setf(at_attrs *a, const char *key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Removes key if present. */
void at_attr_del(at_attrs *a, const char *key);
/* Reads a number; returns 0 and sets *out, 1 when absent, -1 when the value
 * is not a number. */
int at_attr_double(const at_attrs *a, const char *key, double *out);
int at_attr_long(const at_attrs *a, const char *key, long *out);

/* The `lengths` attribute of a batch padded to a common T (andrea-embed
 * --lines): the length of each row. */
/* Sets a's `lengths` attribute to the B lengths "N,N,..."; -1 where they
 * do not fit an attribute value (AT_MAX_VALUE bytes). */
int at_attr_set_lengths(at_attrs *a, const uint64_t *len, uint64_t B);
/* The rows' lengths of a [B,T] record from its `lengths` attribute into
 * len[B]: 1 where it has a valid one (B lengths, each 1..T), 0 where it
 * has none (every row T long), -1 with a reason in err where it is bad,
 * and where B passes AT_MAX_VALUE (no value lists so many: len needs
 * AT_MAX_VALUE entries at most). */
int at_attr_lengths(const at_attrs *a, uint64_t B, uint64_t T, uint64_t *len,
		    char *err, size_t errlen);

/* Serialised size in bytes. */
size_t at_attrs_size(const at_attrs *a);
/* Writes the block into buf (at_attrs_size bytes, no terminator). */
void at_attrs_write(const at_attrs *a, char *buf);
/* Parses a wire block of len bytes.  Returns 0, or -1 with a reason in err
 * (a bad key, a missing '=', a duplicate, too many pairs...). */
int at_attrs_parse(at_attrs *a, const char *buf, size_t len, char *err,
		   size_t errlen);
/* One line "k=v k=v" for display. */
void at_attrs_str(const at_attrs *a, char *buf, size_t len);

#endif
