/* labels.c - tokens and axis names beside a map (see labels.h). */
#include "view/labels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attrs.h"
#include "text/bytelevel.h"

/* A token's bytes in ASCII into out (4 * len + 1 bytes); its length.  A
 * backslash is an escape too, so that every \x in a label begins one. */
static size_t ascii_piece(const unsigned char *p, size_t len, char *out)
{
	size_t n = 0;
	for (size_t i = 0; i < len; i++)
		n += (size_t)(p[i] == ' ' ? sprintf(out + n, "_") :
			      p[i] > ' ' && p[i] < 0x7f && p[i] != '\\' ?
			      sprintf(out + n, "%c", p[i]) :
			      sprintf(out + n, "\\x%02x", p[i]));
	out[n] = '\0';
	return n;
}

const char *hm_label_cut(const char *label, int n, char *buf)
{
	size_t k = strnlen(label, (size_t)n);
	/* where the label is cut, an escape begun in the last three kept
	 * characters goes */
	for (size_t i = k > 3 ? k - 3 : 0; label[k] && i < k; i++)
		if (label[i] == '\\' && label[i + 1] == 'x') {
			k = i;
			break;
		}
	memcpy(buf, label, k);
	buf[k] = '\0';
	return buf;
}

int hm_token_labels(const at_tokenizer *tok, const at_tensor *tokens,
		    uint64_t b, uint64_t T, int ascii, char ***out)
{
	*out = NULL;
	if (!tokens->data || tokens->rank != 2 || tokens->dims[1] != T ||
	    b >= tokens->dims[0])
		return 0;
	/* a padded row's positions past its length hold no token */
	uint64_t row_len[AT_MAX_VALUE], n = T;
	char err[200];
	if (at_attr_lengths(&tokens->attrs, tokens->dims[0], T, row_len, err,
			    sizeof err) == 1)
		n = row_len[b];
	size_t bytes = T * sizeof(char *);
	const int32_t *id = (const int32_t *)tokens->data + b * T;
	for (uint64_t i = 0; i < T; i++) {
		size_t len = 0;
		at_tok_piece(tok, id[i], &len);
		bytes += 4 * len + 16; /* \xHH a byte; <bos> or #ID fit in 16 */
	}
	char **label = malloc(bytes), *at = (char *)(label + T);
	if (!label)
		return -1;
	for (uint64_t i = 0; i < T; i++) {
		size_t len;
		const unsigned char *p = at_tok_piece(tok, id[i], &len);
		label[i] = at;
		if (i >= n)
			*at++ = '\0';
		else if (id[i] == at_tok_bos(tok) && !at_tok_is_bpe(tok))
			at += sprintf(at, "<bos>") + 1;
		else if (!p)
			at += sprintf(at, "#%d", id[i]) + 1;
		else if (ascii)
			at += ascii_piece(p, len, at) + 1;
		else
			at += at_bytelevel_encode(p, len, at) + 1;
	}
	*out = label;
	return 1;
}

int hm_axis_name(const at_tensor *t, int a, char *name, size_t len)
{
	const char *v = at_attr_get(&t->attrs, "axes");
	for (int i = 0; v && i < a; i++)
		if ((v = strchr(v, ',')))
			v++;
	size_t n = v ? strcspn(v, ",") : 0;
	if (!n || n >= len)
		return 0;
	memcpy(name, v, n);
	name[n] = '\0';
	return 1;
}

int hm_row_axis(const at_tensor *t)
{
	char name[8];
	for (int a = 1; a < t->rank - 2; a++)
		if (hm_axis_name(t, a, name, sizeof name) &&
		    strcmp(name, "row") == 0)
			return a;
	return 0;
}
