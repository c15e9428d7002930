/* gpt2_tokenizer.c - vocab.json, merges.txt and tokenizer.json. */
#include "model/gpt2_tokenizer.h"

#ifdef ANDREA_JSON
#include <jansson.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/safetensors.h"
#include "text/bytelevel.h"

#define fail at_import_fail
#define MAX_FILE (64u << 20) /* GPT-2's vocab.json is 1 MB, merges.txt 0.5 MB */
#define MAX_TOKENS AT_MAX_CONFIG /* a model's vocab */

#ifdef ANDREA_JSON
/* A vocabulary being read: token i's bytes are bytes[off[i], off[i]+len[i]). */
typedef struct {
	int n;
	unsigned char *bytes;
	uint32_t *len;
	uint64_t *off;
	at_bpe *bpe;
	int bos;
	int32_t added[AT_TOK_MAX_ADDED]; /* found in text as they are */
	int n_added;
	int first_special; /* the first special added token, or -1 */
} vocab_in;

/* s in a one-line message: at most 80 bytes, cut where a character
 * begins, a control byte as \xHH; into buf (SHOWN bytes). */
#define SHOWN (4 * 80 + 1)
static const char *shown(const char *s, char *buf)
{
	size_t cut = strnlen(s, 80), n = 0;
	while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80)
		cut--;
	for (size_t i = 0; i < cut; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f)
			n += (size_t)sprintf(buf + n, "\\x%02x", c);
		else
			buf[n++] = (char)c;
	}
	buf[n] = '\0';
	return buf;
}

static void vocab_free(vocab_in *v)
{
	free(v->bytes);
	free(v->len);
	free(v->off);
	at_bpe_free(v->bpe);
	memset(v, 0, sizeof *v);
}

/* The {token: id} object o as a vocabulary; added (or NULL) lists
 * tokenizer.json's added tokens, whose text is their bytes as it is. */
static int vocab_read(vocab_in *v, const json_t *o, const json_t *added,
		      const char *label, char *err, size_t errlen)
{
	char sh[SHOWN];
	memset(v, 0, sizeof *v);
	v->bos = v->first_special = -1;
	if (!json_is_object(o))
		return fail(err, errlen, "%s: the vocabulary is not a JSON object "
			    "of token to id", label);
	size_t n = json_object_size(o), total = 0;
	if (n < 256 || n > MAX_TOKENS)
		return fail(err, errlen, "%s: %zu tokens: a byte-level vocabulary "
			    "holds 256 to %d", label, n, MAX_TOKENS);
	const char *key;
	json_t *val;
	json_object_foreach((json_t *)o, key, val)
		total += strlen(key);
	v->n = (int)n;
	/* each token gets its key's length: its bytes are never more */
	v->bytes = malloc(total + 1);
	v->len = calloc(n, sizeof *v->len);
	v->off = malloc(n * sizeof *v->off);
	if (!v->bytes || !v->len || !v->off)
		return fail(err, errlen, "out of memory");
	for (size_t i = 0; i < n; i++)
		v->off[i] = UINT64_MAX;
	size_t at = 0;
	json_object_foreach((json_t *)o, key, val) {
		json_int_t id = json_is_integer(val) ? json_integer_value(val) : -1;
		if (id < 0 || id >= (json_int_t)n)
			return fail(err, errlen, "%s: token '%s': its id is not "
				    "an integer in 0..%zu", label, shown(key, sh),
				    n - 1);
		if (v->off[id] != UINT64_MAX)
			return fail(err, errlen, "%s: token '%s': id %lld is "
				    "given twice", label, shown(key, sh),
				    (long long)id);
		size_t klen = strlen(key);
		long blen = at_bytelevel_decode(key, klen, v->bytes + at);
		v->off[id] = at;
		v->len[id] = blen > 0 ? (uint32_t)blen : 0;
		at += klen;
		if (strcmp(key, "<|endoftext|>") == 0)
			v->bos = (int)id;
	}
	size_t i;
	json_t *a;
	json_array_foreach(added, i, a) {
		const json_t *c = json_object_get(a, "content");
		const json_t *id = json_is_string(c) ? json_object_get(o, json_string_value(c)) : NULL;
		const json_t *said = json_object_get(a, "id");
		if (!json_is_integer(id) || (said && (!json_is_integer(said) ||
				json_integer_value(said) != json_integer_value(id))))
			return fail(err, errlen, "%s: added token %zu ('%s') is not "
				    "the vocabulary's token of that id", label, i,
				    json_is_string(c) ? shown(json_string_value(c), sh)
						      : "?");
		if (v->n_added == AT_TOK_MAX_ADDED)
			return fail(err, errlen, "%s: more than %d added tokens", label,
				    AT_TOK_MAX_ADDED);
		json_int_t k = json_integer_value(id); /* its text as it is */
		v->len[k] = (uint32_t)strlen(json_string_value(c));
		memcpy(v->bytes + v->off[k], json_string_value(c), v->len[k]);
		v->added[v->n_added++] = (int32_t)k;
		/* no <|endoftext|>: the first special added token starts them */
		if (v->bos < 0 && json_is_true(json_object_get(a, "special")))
			v->first_special = (int)k;
	}
	if (v->bos < 0)
		v->bos = v->first_special;
	/* vocab.json alone: <|endoftext|> is added, as GPT2TokenizerFast has it */
	if (!added && v->bos >= 0)
		v->added[v->n_added++] = v->bos;
	json_object_foreach((json_t *)o, key, val)
		if (v->len[json_integer_value(val)] == 0)
			return fail(err, errlen, "%s: token '%s' (id %lld) is not "
				    "spelt in GPT-2's byte-level alphabet", label,
				    shown(key, sh),
				    (long long)json_integer_value(val));
	/* the vocabulary in id order for at_bpe_new */
	unsigned char *ordered = malloc(at + 1);
	if (!ordered)
		return fail(err, errlen, "out of memory");
	for (size_t k = 0, o2 = 0; k < n; o2 += v->len[k], k++)
		memcpy(ordered + o2, v->bytes + v->off[k], v->len[k]);
	char why[200];
	v->bpe = at_bpe_new(ordered, v->len, v->n, why, sizeof why);
	free(ordered);
	if (!v->bpe)
		return fail(err, errlen, "%s: %s", label, why);
	return 0;
}

/* Adds the merge of the tokens spelt a and b (byte-level). */
static int add_merge(vocab_in *v, const char *a, size_t la, const char *b,
		     size_t lb, const char *label, long line, char *err,
		     size_t errlen)
{
	unsigned char *buf = malloc(la + lb + 1);
	if (!buf)
		return fail(err, errlen, "out of memory");
	long na = at_bytelevel_decode(a, la, buf);
	int ia = na > 0 ? at_bpe_find(v->bpe, buf, (size_t)na) : -1;
	long nb = ia >= 0 ? at_bytelevel_decode(b, lb, buf) : -1;
	int ib = nb > 0 ? at_bpe_find(v->bpe, buf, (size_t)nb) : -1;
	free(buf);
	char why[200];
	if (ia < 0 || ib < 0)
		return fail(err, errlen, "%s: %s %ld: '%.*s' is not a token of the "
			    "vocabulary", label, line ? "line" : "merge",
			    line ? line : at_bpe_merges(v->bpe),
			    ia < 0 ? (int)(la > 80 ? 80 : la) : (int)(lb > 80 ? 80 : lb),
			    ia < 0 ? a : b);
	if (at_bpe_add_merge(v->bpe, ia, ib, why, sizeof why) < 0)
		return fail(err, errlen, "%s: %s %ld: %s", label,
			    line ? "line" : "merge",
			    line ? line : at_bpe_merges(v->bpe), why);
	return 0;
}

/* merges.txt: "A B" lines after an optional first "#version" line. */
static int merges_read(vocab_in *v, const char *text, size_t len,
		       const char *label, char *err, size_t errlen)
{
	long line = 0;
	for (size_t at = 0; at < len;) {
		const char *s = text + at;
		const char *nl = memchr(s, '\n', len - at);
		size_t l = nl ? (size_t)(nl - s) : len - at;
		at += l + (nl != NULL);
		line++;
		if (l && s[l - 1] == '\r')
			l--;
		if (l == 0 || (line == 1 && l >= 8 && memcmp(s, "#version", 8) == 0))
			continue;
		const char *sp = memchr(s, ' ', l);
		if (!sp || sp == s || sp + 1 == s + l || memchr(sp + 1, ' ', l - (size_t)(sp + 1 - s)))
			return fail(err, errlen, "%s: line %ld: expected two tokens "
				    "separated by one space", label, line);
		if (add_merge(v, s, (size_t)(sp - s), sp + 1, (size_t)(s + l - sp - 1),
			      label, line, err, errlen) < 0)
			return -1;
	}
	return 0;
}

/* The tokenizer made of v (which it then owns). */
static at_tokenizer *finish(vocab_in *v, int bos, char *err, size_t errlen)
{
	at_bpe *bpe = v->bpe;
	v->bpe = NULL;
	at_tokenizer *t = at_tok_gpt2(bpe, bos, v->added, v->n_added, err, errlen);
	vocab_free(v);
	return t;
}
#endif

at_tokenizer *at_gpt2_tokenizer_parse(const char *vocab, size_t vocab_len,
				      const char *vocab_label,
				      const char *merges, size_t merges_len,
				      const char *merges_label, char *err,
				      size_t errlen)
{
#ifndef ANDREA_JSON
	fail(err, errlen, "%s: this build has no JSON reader (jansson: Debian's "
	     "libjansson-dev, then make again)", vocab_label);
	return NULL;
#else
	json_error_t je;
	json_t *root = json_loadb(vocab, vocab_len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		fail(err, errlen, "%s: %s (line %d)", vocab_label, je.text, je.line);
		return NULL;
	}
	vocab_in v;
	int rc = vocab_read(&v, root, NULL, vocab_label, err, errlen);
	json_decref(root);
	if (rc == 0)
		rc = merges_read(&v, merges, merges_len, merges_label, err, errlen);
	if (rc < 0) {
		vocab_free(&v);
		return NULL;
	}
	return finish(&v, v.bos, err, errlen);
#endif
}

at_tokenizer *at_gpt2_tokenizer_files(const char *vocab_path,
				      const char *merges_path, char *err,
				      size_t errlen)
{
	char *vocab = NULL, *merges = NULL;
	size_t vn, mn;
	at_tokenizer *t = NULL;
	if (at_import_read(vocab_path, MAX_FILE, &vocab, &vn, err, errlen) == 0 &&
	    at_import_read(merges_path, MAX_FILE, &merges, &mn, err, errlen) == 0)
		t = at_gpt2_tokenizer_parse(vocab, vn, vocab_path, merges, mn,
					    merges_path, err, errlen);
	free(vocab);
	free(merges);
	return t;
}

#ifdef ANDREA_JSON
/* 1 where o's member key is absent, null, false or "". */
static int unset(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return !v || json_is_null(v) || json_is_false(v) ||
	       (json_is_string(v) && !*json_string_value(v));
}

/* What tokenizer.json must say for andrea to encode as it does; NULL, or
 * what it says otherwise (in buf, of len bytes, where it names a token). */
static const char *not_gpt2(const json_t *root, const json_t *model,
			    char *buf, size_t len)
{
	const json_t *pre = json_object_get(root, "pre_tokenizer");
	const json_t *type = json_object_get(model, "type");
	if (type && (!json_is_string(type) || strcmp(json_string_value(type), "BPE")))
		return "its model is not BPE";
	if (!unset(model, "dropout") || !unset(model, "unk_token") ||
	    !unset(model, "byte_fallback") ||
	    !unset(model, "continuing_subword_prefix") ||
	    !unset(model, "end_of_word_suffix"))
		return "its BPE has dropout, an unknown token, byte fallback or "
		       "word affixes";
	/* a word found whole in the vocabulary skips the merges */
	if (!unset(model, "ignore_merges"))
		return "its BPE ignores the merges (ignore_merges)";
	size_t i;
	const json_t *a;
	/* each changes where an added token is found, or what it takes */
	json_array_foreach(json_object_get(root, "added_tokens"), i, a)
		if (!unset(a, "lstrip") || !unset(a, "rstrip") ||
		    !unset(a, "single_word")) {
			const json_t *c = json_object_get(a, "content");
			char sh[SHOWN];
			snprintf(buf, len, "added token %zu ('%s') strips "
				 "spaces or is a single word (lstrip, rstrip, "
				 "single_word)", i,
				 json_is_string(c) ? shown(json_string_value(c), sh)
						   : "?");
			return buf;
		}
	if (!unset(root, "normalizer"))
		return "it has a normalizer";
	const json_t *pt = json_object_get(pre, "type");
	if (!json_is_string(pt) || strcmp(json_string_value(pt), "ByteLevel"))
		return "its pre-tokenizer is not ByteLevel";
	if (!unset(pre, "add_prefix_space"))
		return "its pre-tokenizer adds a prefix space";
	const json_t *re = json_object_get(pre, "use_regex");
	if (re && !json_is_true(re))
		return "its pre-tokenizer does not use GPT-2's expression";
	return NULL;
}
#endif

at_tokenizer *at_gpt2_tokenizer_json_parse(const char *json, size_t len,
					   const char *label, char *err,
					   size_t errlen)
{
#ifndef ANDREA_JSON
	fail(err, errlen, "%s: this build has no JSON reader (jansson: Debian's "
	     "libjansson-dev, then make again)", label);
	return NULL;
#else
	json_error_t je;
	json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		fail(err, errlen, "%s: %s (line %d)", label, je.text, je.line);
		return NULL;
	}
	vocab_in v = {0};
	const json_t *model = json_object_get(root, "model");
	const json_t *added = json_object_get(root, "added_tokens");
	const json_t *merges = json_object_get(model, "merges");
	char named[200];
	const char *why = json_is_object(root) && json_is_object(model) &&
				  json_is_array(merges) &&
				  (!added || json_is_array(added))
			  ? not_gpt2(root, model, named, sizeof named)
			  : "it has no model object with vocab and merges";
	int rc = why ? fail(err, errlen, "%s: not GPT-2's tokenizer: %s", label, why)
		     : vocab_read(&v, json_object_get(model, "vocab"), added, label,
				  err, errlen);
	size_t i;
	json_t *m;
	json_array_foreach(merges, i, m) {
		if (rc < 0)
			break;
		const char *a = NULL, *b = NULL;
		size_t la = 0, lb = 0;
		if (json_is_string(m)) { /* "A B" */
			a = json_string_value(m);
			const char *sp = strchr(a, ' ');
			if (sp && sp > a && sp[1] && !strchr(sp + 1, ' ')) {
				la = (size_t)(sp - a);
				b = sp + 1;
				lb = strlen(b);
			}
		} else if (json_is_array(m) && json_array_size(m) == 2 &&
			   json_is_string(json_array_get(m, 0)) &&
			   json_is_string(json_array_get(m, 1))) {
			a = json_string_value(json_array_get(m, 0));
			b = json_string_value(json_array_get(m, 1));
			la = strlen(a);
			lb = strlen(b);
		}
		rc = b && la && lb ? add_merge(&v, a, la, b, lb, label, 0, err, errlen)
				   : fail(err, errlen, "%s: merge %zu is neither \"A B\" "
					  "nor [\"A\", \"B\"]", label, i);
	}
	json_decref(root);
	if (rc < 0) {
		vocab_free(&v);
		return NULL;
	}
	return finish(&v, v.bos, err, errlen);
#endif
}

at_tokenizer *at_gpt2_tokenizer_json(const char *path, char *err,
				     size_t errlen)
{
	char *json;
	size_t n;
	if (at_import_read(path, MAX_FILE, &json, &n, err, errlen) < 0)
		return NULL;
	at_tokenizer *t = at_gpt2_tokenizer_json_parse(json, n, path, err, errlen);
	free(json);
	return t;
}
