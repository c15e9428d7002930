/* bpe.c - byte-pair encoding over bytes. */
#include "text/bpe.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pieces this long or shorter are merged by a scan of their pairs;
 * longer ones (a run of ten thousand letters) through a heap, so that no
 * input is quadratic. */
#define BPE_SHORT 64
/* Pieces this long or shorter, of at most CACHE_IDS tokens, are cached. */
#define BPE_CACHE_PIECE 30
#define CACHE_IDS 8
#define CACHE_SLOTS (1u << 16)

typedef struct {
	uint64_t key; /* (a << 32 | b) + 1; 0: empty */
	int32_t rank, merged;
} pair_slot;

typedef struct {
	uint64_t hash;
	uint8_t len, n_ids; /* len 0: empty */
	unsigned char piece[BPE_CACHE_PIECE];
	int32_t ids[CACHE_IDS];
} cache_slot;

struct at_bpe {
	int n;
	unsigned char *bytes;
	uint64_t *offset;   /* [n + 1] */
	int32_t *by_string; /* open addressing: id + 1, 0 empty */
	size_t string_cap;
	int32_t byte_id[256];
	pair_slot *pairs;
	size_t pair_cap;
	int32_t (*merge)[2]; /* by rank */
	int n_merges, merge_cap;
	cache_slot *cache;
};

static uint64_t hash_bytes(const unsigned char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a */
	for (size_t i = 0; i < n; i++)
		h = (h ^ s[i]) * 1099511628211ull;
	return h ^ h >> 29;
}

static uint64_t hash_pair(uint64_t key)
{
	key *= 0x9e3779b97f4a7c15ull;
	return key ^ key >> 31;
}

int at_bpe_find(const at_bpe *b, const unsigned char *s, size_t n)
{
	size_t mask = b->string_cap - 1;
	for (size_t i = hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
		int32_t id = b->by_string[i] - 1;
		if (id < 0)
			return -1;
		size_t len = b->offset[id + 1] - b->offset[id];
		if (len == n && memcmp(b->bytes + b->offset[id], s, n) == 0)
			return id;
	}
}

at_bpe *at_bpe_new(const unsigned char *bytes, const uint32_t *len, int n,
		   char *err, size_t errlen)
{
	at_bpe *b = calloc(1, sizeof *b);
	if (!b || n < 256 || n > INT32_MAX / 2) {
		snprintf(err, errlen, b ? "%d tokens: a byte-level vocabulary "
			 "has at least the 256 bytes" : "out of memory", n);
		free(b);
		return NULL;
	}
	b->n = n;
	b->offset = malloc((size_t)(n + 1) * sizeof *b->offset);
	for (b->string_cap = 1; b->string_cap < 2 * (size_t)n;)
		b->string_cap *= 2;
	b->by_string = calloc(b->string_cap, sizeof *b->by_string);
	b->cache = calloc(CACHE_SLOTS, sizeof *b->cache);
	if (!b->offset || !b->by_string || !b->cache)
		goto oom;
	b->offset[0] = 0;
	for (int i = 0; i < n; i++) {
		if (len[i] == 0) {
			snprintf(err, errlen, "token %d is empty", i);
			goto fail;
		}
		b->offset[i + 1] = b->offset[i] + len[i];
	}
	if (!(b->bytes = malloc(b->offset[n] ? b->offset[n] : 1)))
		goto oom;
	memcpy(b->bytes, bytes, b->offset[n]);
	for (int i = 0; i < 256; i++)
		b->byte_id[i] = -1;
	size_t mask = b->string_cap - 1;
	for (int id = 0; id < n; id++) {
		const unsigned char *s = b->bytes + b->offset[id];
		size_t l = len[id];
		int same = at_bpe_find(b, s, l);
		if (same >= 0) {
			snprintf(err, errlen, "token %d repeats token %d", id, same);
			goto fail;
		}
		size_t i = hash_bytes(s, l) & mask;
		while (b->by_string[i])
			i = (i + 1) & mask;
		b->by_string[i] = id + 1;
		if (l == 1)
			b->byte_id[s[0]] = id;
	}
	for (int i = 0; i < 256; i++)
		if (b->byte_id[i] < 0) {
			snprintf(err, errlen, "no token for the byte 0x%02x: a "
				 "byte-level vocabulary holds every byte", i);
			goto fail;
		}
	return b;
oom:
	snprintf(err, errlen, "out of memory");
fail:
	at_bpe_free(b);
	return NULL;
}

void at_bpe_free(at_bpe *b)
{
	if (!b)
		return;
	free(b->bytes);
	free(b->offset);
	free(b->by_string);
	free(b->pairs);
	free(b->merge);
	free(b->cache);
	free(b);
}

int at_bpe_size(const at_bpe *b) { return b->n; }
int at_bpe_merges(const at_bpe *b) { return b->n_merges; }

const unsigned char *at_bpe_token(const at_bpe *b, int id, size_t *len)
{
	*len = b->offset[id + 1] - b->offset[id];
	return b->bytes + b->offset[id];
}

void at_bpe_merge(const at_bpe *b, int r, int32_t *a, int32_t *c)
{
	*a = b->merge[r][0];
	*c = b->merge[r][1];
}

/* The slot of pair (a, c): its own, or the empty one where it would go. */
static pair_slot *pair_at(const at_bpe *b, int32_t a, int32_t c)
{
	uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)c) + 1;
	size_t mask = b->pair_cap - 1;
	for (size_t i = hash_pair(key) & mask;; i = (i + 1) & mask)
		if (b->pairs[i].key == key || b->pairs[i].key == 0)
			return &b->pairs[i];
}

static int grow_pairs(at_bpe *b)
{
	size_t old_cap = b->pair_cap;
	pair_slot *old = b->pairs;
	b->pair_cap = old_cap ? 2 * old_cap : 1024;
	if (!(b->pairs = calloc(b->pair_cap, sizeof *b->pairs))) {
		b->pairs = old;
		b->pair_cap = old_cap;
		return -1;
	}
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].key) {
			uint64_t k = old[i].key - 1;
			*pair_at(b, (int32_t)(k >> 32), (int32_t)(k & 0xffffffffu)) =
				old[i];
		}
	free(old);
	return 0;
}

int at_bpe_add_merge(at_bpe *b, int32_t a, int32_t c, char *err,
		     size_t errlen)
{
	int r = b->n_merges;
	if (a < 0 || a >= b->n || c < 0 || c >= b->n) {
		snprintf(err, errlen, "merge %d: token %d is not in 0..%d", r,
			 a < 0 || a >= b->n ? a : c, b->n - 1);
		return -1;
	}
	size_t la, lc;
	const unsigned char *sa = at_bpe_token(b, a, &la);
	const unsigned char *sc = at_bpe_token(b, c, &lc);
	unsigned char *both = malloc(la + lc);
	if (!both) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	memcpy(both, sa, la);
	memcpy(both + la, sc, lc);
	int merged = at_bpe_find(b, both, la + lc);
	free(both);
	if (merged < 0) {
		snprintf(err, errlen, "merge %d of tokens %d and %d: the two "
			 "together are not a token", r, a, c);
		return -1;
	}
	if ((2 * (size_t)(r + 1) > b->pair_cap && grow_pairs(b) < 0) ||
	    (r == b->merge_cap && r >= INT32_MAX / 4)) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (r == b->merge_cap) {
		int cap = b->merge_cap ? 2 * b->merge_cap : 1024;
		void *m = realloc(b->merge, (size_t)cap * sizeof *b->merge);
		if (!m) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		b->merge = m;
		b->merge_cap = cap;
	}
	pair_slot *slot = pair_at(b, a, c);
	if (slot->key) {
		snprintf(err, errlen, "merge %d of tokens %d and %d repeats "
			 "merge %d", r, a, c, slot->rank);
		return -1;
	}
	slot->key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)c) + 1;
	slot->rank = r;
	slot->merged = merged;
	b->merge[r][0] = a;
	b->merge[r][1] = c;
	b->n_merges++;
	return 0;
}

/* The rank of merging (a, c), INT32_MAX where there is none, and its
 * token in *merged. */
static int32_t rank_of(const at_bpe *b, int32_t a, int32_t c, int32_t *merged)
{
	if (!b->pair_cap)
		return INT32_MAX;
	const pair_slot *s = pair_at(b, a, c);
	if (!s->key)
		return INT32_MAX;
	*merged = s->merged;
	return s->rank;
}

/* Merges ids[0, n) by scanning the pairs' ranks; the count left. */
static size_t merge_short(const at_bpe *b, int32_t *ids, size_t n)
{
	int32_t rank[BPE_SHORT], into[BPE_SHORT];
	for (size_t i = 0; i + 1 < n; i++)
		rank[i] = rank_of(b, ids[i], ids[i + 1], &into[i]);
	while (n > 1) {
		size_t at = 0;
		for (size_t i = 1; i + 1 < n; i++)
			if (rank[i] < rank[at])
				at = i;
		if (rank[at] == INT32_MAX)
			break;
		ids[at] = into[at];
		n--;
		memmove(ids + at + 1, ids + at + 2, (n - at - 1) * sizeof *ids);
		memmove(rank + at, rank + at + 1, (n - at - 1) * sizeof *rank);
		memmove(into + at, into + at + 1, (n - at - 1) * sizeof *into);
		if (at > 0)
			rank[at - 1] = rank_of(b, ids[at - 1], ids[at], &into[at - 1]);
		if (at + 1 < n)
			rank[at] = rank_of(b, ids[at], ids[at + 1], &into[at]);
	}
	return n;
}

typedef struct {
	int32_t rank, pos, a, c;
} candidate;

static int before(const candidate *x, const candidate *y)
{
	return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void heap_push(candidate *h, size_t *n, candidate c)
{
	size_t i = (*n)++;
	for (; i > 0 && before(&c, &h[(i - 1) / 2]); i = (i - 1) / 2)
		h[i] = h[(i - 1) / 2];
	h[i] = c;
}

static candidate heap_pop(candidate *h, size_t *n)
{
	candidate top = h[0], last = h[--*n];
	size_t i = 0;
	for (;;) {
		size_t k = 2 * i + 1;
		if (k >= *n)
			break;
		if (k + 1 < *n && before(&h[k + 1], &h[k]))
			k++;
		if (!before(&h[k], &last))
			break;
		h[i] = h[k];
		i = k;
	}
	h[i] = last;
	return top;
}

/* Merges ids[0, n) through a heap of candidate pairs, each checked when
 * it comes up (a merge since may have spent its tokens); the count left,
 * or -1 when out of memory. */
static long merge_long(const at_bpe *b, int32_t *ids, size_t n)
{
	int32_t *next = malloc(n * sizeof *next), *prev = malloc(n * sizeof *prev);
	candidate *heap = malloc(2 * n * sizeof *heap);
	size_t held = 0;
	long left = -1;
	if (!next || !prev || !heap)
		goto out;
	for (size_t i = 0; i < n; i++) {
		next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
		prev[i] = (int32_t)i - 1;
	}
	for (size_t i = 0; i + 1 < n; i++) {
		int32_t into, r = rank_of(b, ids[i], ids[i + 1], &into);
		if (r != INT32_MAX)
			heap_push(heap, &held, (candidate){r, (int32_t)i, ids[i], ids[i + 1]});
	}
	while (held) {
		candidate c = heap_pop(heap, &held);
		int32_t p = c.pos, q = next[p];
		if (ids[p] < 0 || q < 0 || ids[p] != c.a || ids[q] != c.c)
			continue; /* spent */
		int32_t into;
		rank_of(b, c.a, c.c, &into);
		ids[p] = into;
		ids[q] = -1;
		next[p] = next[q];
		if (next[q] >= 0)
			prev[next[q]] = p;
		/* a merge pushes at most two candidates and spends one: the
		 * heap never holds more than 2n */
		int32_t r;
		if (prev[p] >= 0 &&
		    (r = rank_of(b, ids[prev[p]], ids[p], &into)) != INT32_MAX)
			heap_push(heap, &held, (candidate){r, prev[p], ids[prev[p]], ids[p]});
		if (next[p] >= 0 &&
		    (r = rank_of(b, ids[p], ids[next[p]], &into)) != INT32_MAX)
			heap_push(heap, &held, (candidate){r, p, ids[p], ids[next[p]]});
	}
	left = 0;
	for (size_t i = 0; i < n; i++)
		if (ids[i] >= 0)
			ids[left++] = ids[i];
out:
	free(next);
	free(prev);
	free(heap);
	return left;
}

long at_bpe_encode(at_bpe *b, const unsigned char *s, size_t n, int32_t *out)
{
	if (n == 1) {
		out[0] = b->byte_id[s[0]];
		return 1;
	}
	cache_slot *slot = NULL;
	uint64_t h = 0;
	if (n <= BPE_CACHE_PIECE) {
		h = hash_bytes(s, n);
		slot = &b->cache[h & (CACHE_SLOTS - 1)];
		if (slot->len == n && slot->hash == h && memcmp(slot->piece, s, n) == 0) {
			memcpy(out, slot->ids, slot->n_ids * sizeof *out);
			return slot->n_ids;
		}
	}
	for (size_t i = 0; i < n; i++)
		out[i] = b->byte_id[s[i]];
	long count = n <= BPE_SHORT ? (long)merge_short(b, out, n)
				    : merge_long(b, out, n);
	if (slot && count <= CACHE_IDS) {
		slot->hash = h;
		slot->len = (uint8_t)n;
		slot->n_ids = (uint8_t)count;
		memcpy(slot->piece, s, n);
		memcpy(slot->ids, out, (size_t)count * sizeof *out);
	}
	return count;
}
