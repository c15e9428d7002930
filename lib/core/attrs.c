/* attrs.c - the key=value attribute block. */
#include "core/attrs.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int key_valid(const char *k, size_t len)
{
	if (len < 1 || len > AT_MAX_KEY)
		return 0;
	for (size_t i = 0; i < len; i++) {
		char c = k[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
			return 0;
	}
	return 1;
}

static int value_valid(const char *v, size_t len)
{
	if (len > AT_MAX_VALUE)
		return 0;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)v[i] < 0x20 || (unsigned char)v[i] > 0x7e)
			return 0;
	return 1;
}

static int find(const at_attrs *a, const char *key)
{
	for (int i = 0; i < a->n; i++)
		if (strcmp(a->key[i], key) == 0)
			return i;
	return -1;
}

const char *at_attr_get(const at_attrs *a, const char *key)
{
	int i = find(a, key);
	return i < 0 ? NULL : a->value[i];
}

/* Notes key as the first one the block could not hold; returns -1. */
static int lose(at_attrs *a, const char *key)
{
	if (!a->lost[0])
		snprintf(a->lost, sizeof a->lost, "%s", key[0] ? key : "?");
	return -1;
}

int at_attr_set(at_attrs *a, const char *key, const char *value)
{
	size_t kl = strlen(key), vl = strlen(value);
	if (!key_valid(key, kl) || !value_valid(value, vl))
		return lose(a, key);
	int i = find(a, key);
	size_t size = at_attrs_size(a);
	if (i >= 0) {
		if (size - strlen(a->value[i]) + vl > AT_MAX_ATTR_BYTES)
			return lose(a, key);
	} else {
		if (a->n == AT_MAX_ATTRS || size + kl + vl + 2 > AT_MAX_ATTR_BYTES)
			return lose(a, key);
		i = a->n++;
		memcpy(a->key[i], key, kl + 1);
	}
	memcpy(a->value[i], value, vl + 1);
	return 0;
}

int at_attr_setf(at_attrs *a, const char *key, const char *fmt, ...)
{
	char buf[AT_MAX_VALUE + 2];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	if (n < 0 || n > AT_MAX_VALUE)
		return lose(a, key);
	return at_attr_set(a, key, buf);
}

void at_attr_del(at_attrs *a, const char *key)
{
	int i = find(a, key);
	if (i < 0)
		return;
	for (int j = i + 1; j < a->n; j++) {
		memcpy(a->key[j - 1], a->key[j], sizeof a->key[j]);
		memcpy(a->value[j - 1], a->value[j], sizeof a->value[j]);
	}
	a->n--;
}

int at_attr_double(const at_attrs *a, const char *key, double *out)
{
	const char *v = at_attr_get(a, key);
	if (!v)
		return 1;
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (end == v || *end || errno == ERANGE)
		return -1;
	*out = d;
	return 0;
}

int at_attr_long(const at_attrs *a, const char *key, long *out)
{
	const char *v = at_attr_get(a, key);
	if (!v)
		return 1;
	/* digits with an optional '-': strtol's own leading space and '+'
	 * are not what a writer of whole numbers puts */
	if (!(*v >= '0' && *v <= '9') && *v != '-')
		return -1;
	char *end;
	errno = 0;
	long l = strtol(v, &end, 10);
	if (end == v || *end || errno == ERANGE)
		return -1;
	*out = l;
	return 0;
}

int at_attr_set_lengths(at_attrs *a, const uint64_t *len, uint64_t B)
{
	char s[AT_MAX_VALUE + 32];
	size_t at = 0;
	for (uint64_t b = 0; b < B && at <= AT_MAX_VALUE; b++)
		at += (size_t)snprintf(s + at, sizeof s - at, "%s%llu",
				       b ? "," : "", (unsigned long long)len[b]);
	if (at > AT_MAX_VALUE)
		return -1;
	at_attr_set(a, "lengths", s);
	return 0;
}

int at_attr_lengths(const at_attrs *a, uint64_t B, uint64_t T, uint64_t *len,
		    char *err, size_t errlen)
{
	const char *s = at_attr_get(a, "lengths");
	if (!s)
		return 0;
	if (B > AT_MAX_VALUE) { /* a value of that many bytes lists fewer */
		snprintf(err, errlen, "lengths=%s: %llu rows are more than the "
			 "attribute can list", s, (unsigned long long)B);
		return -1;
	}
	for (uint64_t b = 0; b < B; b++) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(s, &end, 10);
		if (!(*s >= '0' && *s <= '9') || errno || v < 1 || v > T ||
		    (b + 1 < B ? *end != ',' : *end != 0)) {
			snprintf(err, errlen, "lengths=%s: expected %llu lengths "
				 "of 1 to %llu, comma-separated",
				 at_attr_get(a, "lengths"), (unsigned long long)B,
				 (unsigned long long)T);
			return -1;
		}
		len[b] = v;
		s = end + 1;
	}
	return 1;
}

size_t at_attrs_size(const at_attrs *a)
{
	size_t n = 0;
	for (int i = 0; i < a->n; i++)
		n += strlen(a->key[i]) + strlen(a->value[i]) + 2;
	return n;
}

void at_attrs_write(const at_attrs *a, char *buf)
{
	for (int i = 0; i < a->n; i++) {
		size_t kl = strlen(a->key[i]), vl = strlen(a->value[i]);
		memcpy(buf, a->key[i], kl);
		buf[kl] = '=';
		memcpy(buf + kl + 1, a->value[i], vl);
		buf[kl + 1 + vl] = '\n';
		buf += kl + vl + 2;
	}
}

int at_attrs_parse(at_attrs *a, const char *buf, size_t len, char *err,
		   size_t errlen)
{
	a->n = 0;
	a->lost[0] = '\0';
	if (len > AT_MAX_ATTR_BYTES) {
		snprintf(err, errlen, "attribute block of %zu bytes exceeds %d",
			 len, AT_MAX_ATTR_BYTES);
		return -1;
	}
	size_t pos = 0;
	while (pos < len) {
		const char *line = buf + pos;
		const char *nl = memchr(line, '\n', len - pos);
		if (!nl) {
			snprintf(err, errlen, "attribute %d has no newline", a->n + 1);
			return -1;
		}
		size_t ll = (size_t)(nl - line);
		const char *eq = memchr(line, '=', ll);
		if (!eq) {
			snprintf(err, errlen, "attribute %d has no '='", a->n + 1);
			return -1;
		}
		size_t kl = (size_t)(eq - line), vl = ll - kl - 1;
		if (!key_valid(line, kl) || !value_valid(eq + 1, vl)) {
			snprintf(err, errlen, "attribute %d has a bad key or value",
				 a->n + 1);
			return -1;
		}
		if (a->n == AT_MAX_ATTRS) {
			snprintf(err, errlen, "more than %d attributes", AT_MAX_ATTRS);
			return -1;
		}
		char key[AT_MAX_KEY + 1];
		memcpy(key, line, kl);
		key[kl] = 0;
		if (find(a, key) >= 0) {
			snprintf(err, errlen, "attribute '%s' appears twice", key);
			return -1;
		}
		memcpy(a->key[a->n], key, kl + 1);
		memcpy(a->value[a->n], eq + 1, vl);
		a->value[a->n][vl] = 0;
		a->n++;
		pos += ll + 1;
	}
	return 0;
}

void at_attrs_str(const at_attrs *a, char *buf, size_t len)
{
	size_t off = 0;
	if (len)
		buf[0] = 0;
	for (int i = 0; i < a->n && off < len; i++)
		off += (size_t)snprintf(buf + off, len - off, "%s%s=%s",
					i ? " " : "", a->key[i], a->value[i]);
}
