/* tokens.c - token ids from text or from a list. */
#include "cli/tokens.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

at_tokenizer *cli_tokenizer(const at_model *m)
{
	char err[600];
	at_tokenizer *t = at_model_tokenizer(m, err, sizeof err);
	if (!t)
		cli_die("%s", err);
	return t;
}

unsigned char *cli_read_text(const char *path, size_t cap, size_t *n)
{
	const char *label = path && strcmp(path, "-") != 0 ? path : "<stdin>";
	FILE *in = stdin;
	if (path && strcmp(path, "-") != 0 && !(in = fopen(path, "rb")))
		cli_die("%s: %s", path, strerror(errno));
	size_t size = 4096, got;
	unsigned char *buf = malloc(size);
	*n = 0;
	while (buf && (got = fread(buf + *n, 1, size - *n, in)) > 0) {
		*n += got;
		if (*n < size)
			continue;
		if (size > cap)
			cli_die("%s: text longer than %zu bytes", label, cap);
		unsigned char *grown = realloc(buf, size *= 2);
		if (!grown)
			free(buf);
		buf = grown;
	}
	if (!buf)
		cli_die("out of memory");
	if (ferror(in))
		cli_die("%s: read error: %s", label, strerror(errno));
	if (*n > cap)
		cli_die("%s: text longer than %zu bytes", label, cap);
	if (in != stdin)
		fclose(in);
	return buf;
}

void cli_tokens_from_text(const char *path, at_tokenizer *tok, at_tensor *t)
{
	size_t n;
	unsigned char *text = cli_read_text(path, CLI_MAX_TEXT, &n);
	uint64_t dims[2] = {1, n};
	if (at_tensor_init(t, "tokens", AT_I32, 2, dims) < 0)
		cli_die("out of memory");
	char err[300];
	long count = at_tok_encode(tok, text, n, t->data, err, sizeof err);
	free(text);
	if (count < 0)
		cli_die("%s: %s", path && strcmp(path, "-") ? path : "<stdin>", err);
	t->dims[1] = (uint64_t)count; /* never more ids than bytes */
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

void cli_tokens_from_stream(cli_common *c, const char *path, at_tensor *t,
			    char *label, size_t len)
{
	at_reader r;
	at_header h;
	cli_open_input(c, &r, path);
	int rc = at_find_record(&r, "tokens", &h);
	if (rc < 0)
		cli_fail(r.err);
	if (rc == 0)
		cli_die("%s: no 'tokens' record in the input", r.label);
	if (h.dtype != AT_I32 || h.rank < 1 || h.rank > 2)
		cli_die("%s: record %d 'tokens': expected i32 [B,T] or [T]",
			r.label, h.index);
	if (at_read_payload(&r, &h, t) < 0)
		cli_fail(r.err);
	if (label)
		snprintf(label, len, "%s: record %d 'tokens'", r.label, h.index);
	/* the rest is not used, but a stream cut short or damaged is an
	 * error wherever it is read */
	while ((rc = at_read_header(&r, &h)) == 1)
		if (at_check_payload(&r, &h) < 0)
			cli_fail(r.err);
	if (rc < 0)
		cli_fail(r.err);
	at_reader_close(&r);
	at_tokens_as_batch(t);
}

void cli_tokens_whole_rows(const at_tensor *t, const char *label)
{
	uint64_t B = t->dims[0], T = t->dims[1], len[AT_MAX_VALUE];
	char err[300];
	int rc = at_attr_lengths(&t->attrs, B, T, len, err, sizeof err);
	if (rc < 0)
		cli_die("%s: %s", label, err);
	for (uint64_t b = 0; rc > 0 && b < B; b++)
		if (len[b] != T)
			cli_die("%s: row %llu holds %llu of its %llu positions "
				"(lengths=%s): this tool takes rows of one length "
				"(give the shorter rows apart)", label,
				(unsigned long long)b, (unsigned long long)len[b],
				(unsigned long long)T,
				at_attr_get(&t->attrs, "lengths"));
}

void cli_tokens_from_lines(const char *path, at_tokenizer *tok, at_tensor *t)
{
	const char *label = path && strcmp(path, "-") ? path : "<stdin>";
	size_t n;
	unsigned char *text = cli_read_text(path, CLI_MAX_TEXT, &n);
	size_t rows = 0, longest = 0;
	for (size_t i = 0, start = 0; i <= n; i++)
		if (i == n ? i > start : text[i] == '\n') {
			if (i == start)
				cli_die("%s: line %zu is empty (each line is a row "
					"of the batch)", label, rows + 1);
			longest = i - start > longest ? i - start : longest;
			rows++;
			start = i + 1;
		}
	if (!rows)
		cli_die("%s: no lines", label);
	uint64_t dims[2] = {rows, longest}; /* ids, at most one a byte */
	int32_t *ids = malloc(longest * sizeof *ids + 1);
	if (!ids || at_tensor_init(t, "tokens", AT_I32, 2, dims) < 0)
		cli_die("out of memory");
	memset(t->data, 0, rows * longest * sizeof *ids); /* the padding */
	uint64_t *len = malloc(rows * sizeof *len);
	if (!len)
		cli_die("out of memory");
	char err[300];
	size_t r = 0, most = 0;
	for (size_t i = 0, start = 0; i <= n && r < rows; i++) {
		if (i < n && text[i] != '\n')
			continue;
		long count = at_tok_encode(tok, text + start, i - start, ids, err,
					   sizeof err);
		if (count < 0)
			cli_die("%s: line %zu: %s", label, r + 1, err);
		memcpy((int32_t *)t->data + r * longest, ids, count * sizeof *ids);
		most = (size_t)count > most ? (size_t)count : most;
		len[r++] = (uint64_t)count;
		start = i + 1;
	}
	if (at_attr_set_lengths(&t->attrs, len, rows) < 0)
		cli_die("%s: %zu lines are more than the lengths attribute holds "
			"(%d bytes); give fewer lines", label, rows, AT_MAX_VALUE);
	free(len);
	free(text);
	free(ids);
	/* tokens of several bytes: the rows are shorter than their bytes */
	for (size_t b = 1; b < rows && most < longest; b++)
		memmove((int32_t *)t->data + b * most,
			(int32_t *)t->data + b * longest, most * sizeof *ids);
	t->dims[1] = most;
}

