/* fuzz_attrs.c - the attribute block parser.  A block that parses must
 * write back byte for byte, and every accessor must cope with what the
 * parser accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/attrs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	at_attrs a;
	char err[200];
	err[0] = 0;
	if (at_attrs_parse(&a, (const char *)data, size, err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	size_t n = at_attrs_size(&a);
	if (n != size)
		abort();
	char *buf = malloc(n ? n : 1);
	if (!buf)
		abort();
	at_attrs_write(&a, buf);
	if (memcmp(buf, data, n) != 0)
		abort();
	at_attrs b;
	if (at_attrs_parse(&b, buf, n, err, sizeof err) < 0 || b.n != a.n)
		abort();
	free(buf);

	char line[AT_MAX_ATTR_BYTES + 64];
	at_attrs_str(&a, line, sizeof line);
	at_attrs_str(&a, line, 7);
	for (int i = 0; i < a.n; i++) {
		double d;
		long l;
		at_attr_double(&a, a.key[i], &d);
		at_attr_long(&a, a.key[i], &l);
		/* setting what is there is allowed and changes nothing */
		char k[AT_MAX_KEY + 1], v[AT_MAX_VALUE + 1];
		strcpy(k, a.key[i]);
		strcpy(v, a.value[i]);
		if (at_attr_set(&b, k, v) < 0 || at_attrs_size(&b) != n)
			abort();
	}
	/* adding one more respects the caps */
	if (at_attr_set(&b, "fuzz.extra", "1") == 0 &&
	    at_attrs_size(&b) > AT_MAX_ATTR_BYTES)
		abort();
	while (b.n)
		at_attr_del(&b, b.key[b.n - 1]);
	return 0;
}
