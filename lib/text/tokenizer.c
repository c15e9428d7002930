/* tokenizer.c - the byte tokenizer and GPT-2's, and their records. */
#include "text/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef ANDREA_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

/* GPT-2's pre-tokenising expression (its encoder.py and Hugging Face's
 * ByteLevel pre-tokenizer): contractions, letters, numbers and other
 * symbols each with one optional leading space, then runs of spaces.
 * Its \s is Unicode's White_Space, as in tokenizers' Oniguruma; PCRE2's
 * also takes U+180E (a format character since Unicode 6.3), so here a
 * space is [^\S\x{180e}] and U+180E is a symbol. */
static const char gpt2_pattern[] =
	"'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+"
	"| ?(?:[^\\s\\p{L}\\p{N}]|\\x{180e})+"
	"|[^\\S\\x{180e}]+(?![\\S\\x{180e}])|[^\\S\\x{180e}]+";

#define BYTES_BOS 256

struct at_tokenizer {
	at_bpe *bpe; /* NULL: the byte tokenizer */
	int bos;
	int32_t *added; /* ids of the added tokens */
	int n_added;
	unsigned char byte[256]; /* the byte tokenizer's pieces: byte[i] = i */
#ifdef ANDREA_PCRE2
	pcre2_code *re;
	pcre2_match_data *match;
#endif
};

at_tokenizer *at_tok_bytes(void)
{
	at_tokenizer *t = calloc(1, sizeof *t);
	if (!t)
		return NULL;
	t->bos = BYTES_BOS;
	for (int i = 0; i < 256; i++)
		t->byte[i] = (unsigned char)i;
	return t;
}

at_tokenizer *at_tok_gpt2(at_bpe *bpe, int bos, const int32_t *added,
			  int n_added, char *err, size_t errlen)
{
	if (n_added > AT_TOK_MAX_ADDED) {
		snprintf(err, errlen, "%d added tokens: at most %d", n_added,
			 AT_TOK_MAX_ADDED);
		at_bpe_free(bpe);
		return NULL;
	}
	at_tokenizer *t = calloc(1, sizeof *t);
	if (t && n_added > 0 && !(t->added = malloc((size_t)n_added * sizeof *added))) {
		free(t);
		t = NULL;
	}
	if (!t) {
		snprintf(err, errlen, "out of memory");
		at_bpe_free(bpe);
		return NULL;
	}
	t->bpe = bpe;
	t->bos = bos;
	if (bos < -1 || bos >= at_bpe_size(bpe)) {
		snprintf(err, errlen, "bos=%d is not a token (0..%d)", bos,
			 at_bpe_size(bpe) - 1);
		at_tok_free(t);
		return NULL;
	}
	for (int i = 0; i < n_added; i++) {
		if (added[i] < 0 || added[i] >= at_bpe_size(bpe)) {
			snprintf(err, errlen, "added token %d is not a token (0..%d)",
				 added[i], at_bpe_size(bpe) - 1);
			at_tok_free(t);
			return NULL;
		}
		t->added[t->n_added++] = added[i];
	}
#ifdef ANDREA_PCRE2
	int code = 0;
	PCRE2_SIZE at;
	/* an invalid UTF-8 sequence is a barrier that no piece crosses */
	t->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED,
			      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
			      &code, &at, NULL);
	if (t->re)
		pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* else interpreted */
	if (!t->re || !(t->match = pcre2_match_data_create_from_pattern(t->re, NULL))) {
		snprintf(err, errlen, "PCRE2 cannot compile GPT-2's expression "
			 "(error %d)", code);
		at_tok_free(t);
		return NULL;
	}
#endif
	return t;
}

void at_tok_free(at_tokenizer *t)
{
	if (!t)
		return;
#ifdef ANDREA_PCRE2
	pcre2_match_data_free(t->match);
	pcre2_code_free(t->re);
#endif
	at_bpe_free(t->bpe);
	free(t->added);
	free(t);
}

int at_tok_is_bpe(const at_tokenizer *t) { return t->bpe != NULL; }
const at_bpe *at_tok_bpe(const at_tokenizer *t) { return t->bpe; }
int at_tok_bos(const at_tokenizer *t) { return t->bos; }

int at_tok_added(const at_tokenizer *t, const int32_t **ids)
{
	*ids = t->added;
	return t->n_added;
}

int at_tok_size(const at_tokenizer *t)
{
	return t->bpe ? at_bpe_size(t->bpe) : BYTES_BOS + 1;
}

const char *at_tok_kind(const at_tokenizer *t)
{
	return t->bpe ? "gpt2-bpe" : "bytes";
}

const unsigned char *at_tok_piece(const at_tokenizer *t, int id, size_t *len)
{
	if (id < 0 || id >= at_tok_size(t))
		return NULL;
	if (t->bpe)
		return at_bpe_token(t->bpe, id, len);
	*len = id < 256;
	return id < 256 ? &t->byte[id] : t->byte;
}

/* The ids of s[0, n), which holds no added token, into out. */
static long encode_text(at_tokenizer *t, const unsigned char *s, size_t n,
			int32_t *out, char *err, size_t errlen)
{
#ifdef ANDREA_PCRE2
	size_t count = 0, at = 0;
	while (at < n) {
		int rc = pcre2_match(t->re, s, n, at, 0, t->match, NULL);
		PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->match);
		size_t begin = rc > 0 ? ov[0] : n, end = rc > 0 ? ov[1] : n;
		if (rc <= 0 && rc != PCRE2_ERROR_NOMATCH) {
			snprintf(err, errlen, "PCRE2 failed at byte %zu (error %d)",
				 at, rc);
			return -1;
		}
		/* bytes no piece covers are outside valid UTF-8: one piece each */
		for (; at < begin; at++)
			count += at_bpe_encode(t->bpe, s + at, 1, out + count);
		if (end - begin > AT_TOK_MAX_PIECE) { /* merging costs 40 bytes a byte */
			snprintf(err, errlen, "a run of %zu bytes at byte %zu without "
				 "a break (a space, a letter after a digit...) is "
				 "longer than the %d bytes one piece may have",
				 end - begin, begin, AT_TOK_MAX_PIECE);
			return -1;
		}
		if (end > begin) {
			long k = at_bpe_encode(t->bpe, s + begin, end - begin, out + count);
			if (k < 0) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			count += (size_t)k;
		}
		at = end;
	}
	return (long)count;
#else
	(void)t, (void)s, (void)out;
	if (n == 0)
		return 0;
	snprintf(err, errlen, "this build has no PCRE2, which GPT-2's "
		 "tokenizer needs to encode text (rebuild with libpcre2-dev)");
	return -1;
#endif
}

long at_tok_encode(at_tokenizer *t, const unsigned char *s, size_t n,
		   int32_t *out, char *err, size_t errlen)
{
	if (!t->bpe) {
		for (size_t i = 0; i < n; i++)
			out[i] = s[i];
		return (long)n;
	}
	/* where each added token next occurs at or after `done` (n: nowhere),
	 * looked for again only once passed: the text is read once a token */
	size_t next[AT_TOK_MAX_ADDED], len[AT_TOK_MAX_ADDED], done = 0;
	const unsigned char *text[AT_TOK_MAX_ADDED];
	for (int i = 0; i < t->n_added; i++) {
		text[i] = at_bpe_token(t->bpe, t->added[i], &len[i]);
		next[i] = SIZE_MAX; /* not looked for yet */
	}
	long count = 0;
	for (;;) {
		int a = -1;
		size_t at = n;
		for (int i = 0; i < t->n_added; i++) {
			if (next[i] == SIZE_MAX || next[i] < done) {
				const unsigned char *hit = memmem(s + done, n - done,
								  text[i], len[i]);
				next[i] = hit ? (size_t)(hit - s) : n;
			}
			/* leftmost, then longest */
			if (next[i] < at || (next[i] == at && at < n && len[i] > len[a])) {
				at = next[i];
				a = i;
			}
		}
		long k = encode_text(t, s + done, at - done, out + count, err, errlen);
		if (k < 0)
			return -1;
		count += k;
		if (a < 0)
			return count;
		out[count++] = t->added[a];
		done = at + len[a];
	}
}

/* The records; the last only where there are added tokens. */
static const char *const names[AT_TOK_RECORDS] = {
	"tokenizer.vocab", "tokenizer.lengths", "tokenizer.merges",
	"tokenizer.added"};

const char *at_tok_record_name(int i)
{
	return names[i];
}

int at_tok_write(const at_tokenizer *t, at_writer *w)
{
	if (!t->bpe)
		return 0;
	int n = at_bpe_size(t->bpe), m = at_bpe_merges(t->bpe);
	size_t total = 0, len;
	for (int i = 0; i < n; i++) {
		at_bpe_token(t->bpe, i, &len);
		total += len;
	}
	at_tensor rec[AT_TOK_RECORDS] = {{0}};
	uint64_t dv[1] = {total}, dl[1] = {(uint64_t)n}, dm[2] = {(uint64_t)m, 2},
		 da[1] = {(uint64_t)t->n_added};
	int rc = -1, nrec = t->n_added ? 4 : 3;
	if (at_tensor_init(&rec[0], names[0], AT_U8, 1, dv) < 0 ||
	    at_tensor_init(&rec[1], names[1], AT_I32, 1, dl) < 0 ||
	    at_tensor_init(&rec[2], names[2], AT_I32, 2, dm) < 0 ||
	    at_tensor_init(&rec[3], names[3], AT_I32, 1, da) < 0) {
		snprintf(w->err, sizeof w->err, "out of memory");
		goto out;
	}
	unsigned char *v = rec[0].data;
	int32_t *lens = rec[1].data, *mg = rec[2].data;
	for (int i = 0; i < n; i++) {
		const unsigned char *p = at_bpe_token(t->bpe, i, &len);
		memcpy(v, p, len);
		v += len;
		lens[i] = (int32_t)len;
	}
	for (int r = 0; r < m; r++)
		at_bpe_merge(t->bpe, r, &mg[2 * r], &mg[2 * r + 1]);
	at_attr_set(&rec[0].attrs, "kind", "gpt2-bpe");
	at_attr_setf(&rec[0].attrs, "tokens", "%d", n);
	at_attr_setf(&rec[0].attrs, "bos", "%d", t->bos);
	if (t->n_added)
		memcpy(rec[3].data, t->added, (size_t)t->n_added * sizeof *t->added);
	rc = 0;
	for (int i = 0; i < nrec && rc == 0; i++)
		rc = at_write_tensor(w, &rec[i]);
out:
	for (int i = 0; i < AT_TOK_RECORDS; i++)
		at_tensor_free(&rec[i]);
	return rc;
}

at_tokenizer *at_tok_from_records(const at_tensor *vocab,
				  const at_tensor *lengths,
				  const at_tensor *merges,
				  const at_tensor *added, char *err,
				  size_t errlen)
{
	const char *kind = at_attr_get(&vocab->attrs, "kind");
	long bos = -1;
	if (!kind || strcmp(kind, "gpt2-bpe") != 0) {
		snprintf(err, errlen, "%s: kind=%s, but this version knows only "
			 "kind=gpt2-bpe", names[0], kind ? kind : "(none)");
		return NULL;
	}
	if (at_attr_get(&vocab->attrs, "bos") &&
	    at_attr_long(&vocab->attrs, "bos", &bos) < 0) {
		snprintf(err, errlen, "%s: bos is not an integer", names[0]);
		return NULL;
	}
	if (vocab->dtype != AT_U8 || vocab->rank != 1 || lengths->dtype != AT_I32 ||
	    lengths->rank != 1 || lengths->dims[0] > INT32_MAX / 2 ||
	    merges->dtype != AT_I32 || merges->rank != 2 || merges->dims[1] != 2 ||
	    merges->dims[0] > INT32_MAX / 4) {
		snprintf(err, errlen, "tokenizer records: want %s u8 [N], %s i32 "
			 "[n], %s i32 [M,2]", names[0], names[1], names[2]);
		return NULL;
	}
	int n = (int)lengths->dims[0];
	const int32_t *lens = lengths->data;
	uint64_t sum = 0;
	for (int i = 0; i < n; i++) {
		if (lens[i] <= 0) {
			snprintf(err, errlen, "%s: token %d has length %d", names[1],
				 i, lens[i]);
			return NULL;
		}
		sum += (uint64_t)lens[i];
	}
	if (sum != vocab->dims[0]) {
		snprintf(err, errlen, "%s: the lengths add up to %llu bytes, but "
			 "%s holds %llu", names[1], (unsigned long long)sum,
			 names[0], (unsigned long long)vocab->dims[0]);
		return NULL;
	}
	char why[200];
	at_bpe *bpe = at_bpe_new(vocab->data, (const uint32_t *)lens, n, why,
				 sizeof why);
	if (!bpe) {
		snprintf(err, errlen, "%s: %s", names[0], why);
		return NULL;
	}
	const int32_t *mg = merges->data;
	for (uint64_t r = 0; r < merges->dims[0]; r++)
		if (at_bpe_add_merge(bpe, mg[2 * r], mg[2 * r + 1], why, sizeof why) < 0) {
			snprintf(err, errlen, "%s: %s", names[2], why);
			at_bpe_free(bpe);
			return NULL;
		}
	if (bos < -1 || bos >= n) {
		snprintf(err, errlen, "%s: bos=%ld is not a token (0..%d)",
			 names[0], bos, n - 1);
		at_bpe_free(bpe);
		return NULL;
	}
	if (added && (added->dtype != AT_I32 || added->rank != 1 ||
		      added->dims[0] > AT_TOK_MAX_ADDED)) {
		snprintf(err, errlen, "%s: want i32 [K] of at most %d token ids",
			 names[3], AT_TOK_MAX_ADDED);
		at_bpe_free(bpe);
		return NULL;
	}
	int n_added = added ? (int)added->dims[0] : 0;
	at_tokenizer *t = at_tok_gpt2(bpe, (int)bos, added ? added->data : NULL,
				      n_added, why, sizeof why);
	if (!t)
		snprintf(err, errlen, "%s: %s", names[n_added ? 3 : 0], why);
	return t;
}
