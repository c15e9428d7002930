/* tokens.c - token ids from text or from a list. */
#include "cli/tokens.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#define MAX_TEXT (1u << 26) /* bytes of text read at most */

void cli_tokens_from_text(const char *path, at_tensor *t)
{
	const char *label = path && strcmp(path, "-") != 0 ? path : "<stdin>";
	FILE *in = stdin;
	if (path && strcmp(path, "-") != 0 && !(in = fopen(path, "rb")))
		cli_die("%s: %s", path, strerror(errno));
	size_t cap = 4096, n = 0, got;
	unsigned char *buf = malloc(cap);
	while (buf && (got = fread(buf + n, 1, cap - n, in)) > 0) {
		n += got;
		if (n < cap)
			continue;
		if (cap >= MAX_TEXT)
			cli_die("%s: text longer than %u bytes", label, MAX_TEXT);
		unsigned char *grown = realloc(buf, cap *= 2);
		if (!grown)
			free(buf);
		buf = grown;
	}
	if (!buf)
		cli_die("out of memory");
	if (ferror(in))
		cli_die("%s: read error: %s", label, strerror(errno));
	if (in != stdin)
		fclose(in);
	uint64_t dims[2] = {1, n};
	if (at_tensor_init(t, "tokens", AT_I32, 2, dims) < 0)
		cli_die("out of memory");
	for (size_t i = 0; i < n; i++)
		((int32_t *)t->data)[i] = buf[i];
	free(buf);
}

void cli_tokens_from_list(const char *list, at_tensor *t)
{
	size_t n = 1;
	for (const char *p = list; *p; p++)
		n += *p == ',';
	uint64_t dims[2] = {1, n};
	if (at_tensor_init(t, "tokens", AT_I32, 2, dims) < 0)
		cli_die("out of memory");
	const char *p = list;
	for (size_t i = 0; i < n; i++) {
		char *end;
		errno = 0;
		long v = strtol(p, &end, 10);
		if (end == p || (*end && *end != ',') || errno || v < 0 ||
		    v > 1 << 30)
			cli_usage_error("--tokens '%s': expected comma-separated "
					"non-negative integers", list);
		((int32_t *)t->data)[i] = (int32_t)v;
		p = end + 1;
	}
}
