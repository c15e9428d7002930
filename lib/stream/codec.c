/* codec.c - one chunk of payload: byte shuffle, deflate, CRC32.
 *
 * A chunk is stored deflated (raw deflate, no zlib wrapper: the chunk
 * carries its own CRC32 of the raw bytes) when that is shorter, else as is.
 * The byte shuffle (shuffle.c) gathers byte 0 of every element, then byte
 * 1, ...: the sign/exponent bytes of float32 data then form one plane of
 * low entropy, while the low mantissa bytes form planes of noise.
 *
 * Level 1, the fast default, cuts the (shuffled) chunk into segments that
 * never straddle two planes and gives each the cheapest deflate mode that
 * pays, judged from a sample of its bytes:
 *   noise (sample entropy above NOISE_BITS per byte, no runs): level 0, so
 *     deflate writes stored blocks at memory speed both ways;
 *   runs (consecutive equal bytes well above chance, e.g. masked scores):
 *     Z_RLE, or, when the bytes between the runs are noise (the mantissa
 *     planes of masked scores and of attention weights), level 1 for every
 *     run of MIN_RUN bytes or more and stored blocks for the noise between
 *     them: deflate then codes only the runs, and inflate copies the noise
 *     at memory speed, for the same ratio.  Level 1 rather than Z_RLE
 *     because its hash finds a run's bytes further back (the end of the
 *     run before it, then the run's own start), and zlib's inflate copies
 *     such a match half again as fast as Z_RLE's distance-1 match, which
 *     it copies byte by byte, each byte waiting for the one before;
 *   anything else (the exponent plane of dense data): Z_HUFFMAN_ONLY, which
 *     codes as tightly as Z_RLE there and inflates twice as fast.
 * Switching modes inside one deflate stream (deflateParams) ends a deflate
 * block, and a full flush every RESET_AT bytes keeps zlib from sliding its
 * window; the chunk stays one ordinary raw deflate stream, so readers need
 * nothing new.  Levels 2..9 are plain zlib levels over the whole chunk.
 * The choice depends only on the chunk's bytes, so the output is the same
 * for any thread count.
 *
 * Each thread keeps one deflate and one inflate state and resets it per
 * chunk instead of allocating it again.  The states are freed when the
 * thread ends; the codec's worker threads live as long as the process
 * (parallel.h), so each is set up once.
 */
#include "stream/stream.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "stream/shuffle.h"

#define SEGMENT (64u << 10) /* bytes per level-1 segment, at most */
#define SAMPLE_STEP 5       /* every 5th byte: odd, so no element size aliases it */
#define NOISE_BITS 7.75     /* entropy above which deflate cannot pay */
/* Between runs the bar is lower: the alternative to stored blocks there is
 * Z_RLE over the whole segment, runs included, which encodes and decodes
 * several times slower; gaps of 7 bits or more per byte would gain at
 * most an eighth of their size (about 1 % of attention weights). */
#define GAP_NOISE_BITS 7.0
#define RUN_EXCESS 0.02     /* repeats beyond chance that call for Z_RLE */
#define MEM_LEVEL 8
#define MAX_SEGMENTS (8 * (AT_MAX_CHUNK / SEGMENT)) /* 8-byte dtypes at most */
/* The shortest run worth a mode switch: each switch ends a deflate block
 * (a few bytes and about a microsecond), which a shorter run of stored
 * bytes would not repay.  A power of two: runs are found through the
 * aligned windows of MIN_RUN / 2 bytes they must cover. */
#define MIN_RUN 64

enum seg_mode { SEG_STORED, SEG_HUFFMAN, SEG_RLE, SEG_RUNS };

/* A thread's zlib states, kept under a pthread key whose destructor
 * frees them when the thread ends. */
typedef struct {
	z_stream def, inf;
	int def_ready, inf_ready;
} zstates;

static pthread_key_t states_key;
static pthread_once_t states_once = PTHREAD_ONCE_INIT;

static void free_states(void *p)
{
	zstates *z = p;
	if (z->def_ready)
		deflateEnd(&z->def);
	if (z->inf_ready)
		inflateEnd(&z->inf);
	free(z);
}

static void make_states_key(void)
{
	pthread_key_create(&states_key, free_states);
}

/* This thread's states; NULL when out of memory. */
static zstates *my_states(void)
{
	pthread_once(&states_once, make_states_key);
	zstates *z = pthread_getspecific(states_key);
	if (!z && (z = calloc(1, sizeof *z)) && pthread_setspecific(states_key, z)) {
		free(z);
		z = NULL;
	}
	return z;
}

/* Entropy in bits per byte of a histogram of n samples; *same gets the
 * chance that two independent bytes drawn from it agree. */
static double entropy(const unsigned *hist, size_t n, double *same)
{
	double bits = 0, inv = 1.0 / n;
	*same = 0;
	for (int b = 0; b < 256; b++) {
		if (!hist[b])
			continue;
		double f = hist[b] * inv;
		bits -= f * log2(f);
		*same += f * f;
	}
	return bits;
}

/* Judges one segment from every SAMPLE_STEP-th byte and its successor;
 * the bytes that differ from their successor stand for what lies between
 * the runs. */
static enum seg_mode classify(const unsigned char *p, size_t n)
{
	unsigned hist[256] = { 0 }, between[256] = { 0 };
	size_t samples = 0, repeats = 0;
	for (size_t i = 0; i + 1 < n; i += SAMPLE_STEP) {
		int same = p[i] == p[i + 1];
		hist[p[i]]++;
		between[p[i]] += !same;
		repeats += same;
		samples++;
	}
	if (samples < 64)
		return SEG_RLE;
	double same, ignored;
	double bits = entropy(hist, samples, &same);
	/* same: the chance two independent bytes agree */
	if ((double)repeats / samples > same + RUN_EXCESS) {
		size_t rest = samples - repeats;
		return rest >= 64 && entropy(between, rest, &ignored) > GAP_NOISE_BITS
			       ? SEG_RUNS : SEG_RLE;
	}
	return bits > NOISE_BITS ? SEG_STORED : SEG_HUFFMAN;
}

/* This thread's deflate state, reset; NULL when out of memory. */
static z_stream *deflater(void)
{
	zstates *z = my_states();
	if (!z)
		return NULL;
	if (!z->def_ready) {
		if (deflateInit2(&z->def, 1, Z_DEFLATED, -15, MEM_LEVEL,
				 Z_RLE) != Z_OK)
			return NULL;
		z->def_ready = 1;
	} else if (deflateReset(&z->def) != Z_OK) {
		return NULL;
	}
	return &z->def;
}

/* This thread's inflate state, reset; NULL when out of memory. */
static z_stream *inflater(void)
{
	zstates *z = my_states();
	if (!z)
		return NULL;
	if (!z->inf_ready) {
		if (inflateInit2(&z->inf, -15) != Z_OK)
			return NULL;
		z->inf_ready = 1;
	} else if (inflateReset(&z->inf) != Z_OK) {
		return NULL;
	}
	return &z->inf;
}

/* Where a chunk's deflate stream stands: the mode it is in, and how many
 * input bytes it has taken since its window last started afresh.  level1:
 * the chunk goes at level 1, whose modes allow the two shortcuts below
 * (full flushes, stored bytes left unhashed). */
typedef struct {
	int level, strategy, level1;
	size_t since_reset;
} deflate_pos;

/* A full flush empties deflate's window (a 5-byte empty stored block)
 * before it fills: zlib slides a full window by rewriting all 64 Ki hash
 * and chain entries, a fifth of a masked chunk's encode, where the flush
 * clears 32 Ki hash heads.  At level 1 only a run right after the flush
 * loses its earlier copy, and the ratio stays (masked scores: 2.327 with
 * or without); levels 2..9 match against the whole window and do
 * without.  Below zlib's slide point, 64 KiB less MIN_LOOKAHEAD (262
 * bytes). */
#define RESET_AT (60u << 10)

/* Feeds src[0..n) to z in the given mode; returns 0, or -1 when out is
 * full. */
static int feed(z_stream *z, const unsigned char *src, size_t n, int level,
		int strategy, deflate_pos *pos)
{
	if (level != pos->level || strategy != pos->strategy) {
		if (deflateParams(z, level, strategy) != Z_OK)
			return -1;
		/* Stored bytes wait to be hashed into zlib's match table
		 * until a compressing mode starts, a few ns a byte, though
		 * noise holds nothing worth matching: level 1's runs find
		 * the runs before them, hashed as they were coded.  An empty
		 * dictionary, which zlib allows after a raw stream's block
		 * ends (as deflateParams just ended it), drops that
		 * backlog. */
		static const Bytef none[1];
		if (pos->level1 && level > 0 &&
		    deflateSetDictionary(z, none, 0) != Z_OK)
			return -1;
		pos->level = level;
		pos->strategy = strategy;
	}
	if (!pos->level1) {
		z->next_in = (Bytef *)src;
		z->avail_in = (uInt)n;
		return deflate(z, Z_NO_FLUSH) != Z_OK || z->avail_in ? -1 : 0;
	}
	while (n > 0) {
		if (pos->since_reset == RESET_AT) {
			if (deflate(z, Z_FULL_FLUSH) != Z_OK)
				return -1;
			pos->since_reset = 0;
		}
		size_t take = RESET_AT - pos->since_reset;
		take = take < n ? take : n;
		z->next_in = (Bytef *)src;
		z->avail_in = (uInt)take;
		if (deflate(z, Z_NO_FLUSH) != Z_OK || z->avail_in)
			return -1;
		pos->since_reset += take;
		src += take;
		n -= take;
	}
	return 0;
}

/* Length of the run of bytes equal to p[0] that starts there, at most n. */
static size_t run_len(const unsigned char *p, size_t n)
{
	uint64_t all = 0x0101010101010101ull * p[0], word;
	size_t i = 0;
	while (i + 8 <= n && (memcpy(&word, p + i, 8), word == all))
		i += 8;
	while (i < n && p[i] == p[0])
		i++;
	return i;
}

/* Finds the first run of MIN_RUN or more equal bytes in p[from, n): sets
 * *start and returns its length, or returns 0.  Such a run covers a whole
 * aligned window of MIN_RUN / 2 bytes, and a window is uniform when it
 * equals itself shifted by one byte, which memcmp tests fast. */
static size_t next_run(const unsigned char *p, size_t from, size_t n,
		       size_t *start)
{
	const size_t win = MIN_RUN / 2;
	size_t w = (from + win - 1) / win * win;
	while (w + win <= n) {
		if (memcmp(p + w, p + w + 1, win - 1) != 0) {
			w += win;
			continue;
		}
		size_t s = w;
		while (s > from && p[s - 1] == p[w])
			s--;
		size_t end = w + run_len(p + w, n - w);
		if (end - s >= MIN_RUN) {
			*start = s;
			return end - s;
		}
		w = (end + win - 1) / win * win;
	}
	return 0;
}

/* Feeds a SEG_RUNS segment: its long runs at level 1, the noise between
 * them as stored blocks.  Returns 0, or -1 when out is full. */
static int feed_runs(z_stream *z, const unsigned char *src, size_t n,
		     deflate_pos *dp)
{
	size_t pos = 0;
	while (pos < n) {
		size_t start = n, len = next_run(src, pos, n, &start);
		if (start > pos && feed(z, src + pos, start - pos, 0,
					Z_DEFAULT_STRATEGY, dp) < 0)
			return -1;
		if (len && feed(z, src + start, len, 1, Z_DEFAULT_STRATEGY,
				dp) < 0)
			return -1;
		pos = start + len;
	}
	return 0;
}

/* Splits planes of plane bytes into segments of at most SEGMENT bytes, as
 * even as possible; returns the segment length for one plane. */
static size_t segment_len(size_t plane)
{
	size_t count = (plane + SEGMENT - 1) / SEGMENT;
	return count > 1 ? (plane + count - 1) / count : plane;
}

/* Deflates src into out, at most limit bytes; returns the length, or 0
 * when it does not fit or does not pay (the caller then stores the chunk).
 * src holds planes planes of equal length. */
static size_t deflate_chunk(const unsigned char *src, size_t n,
			    unsigned char *out, size_t limit, size_t planes,
			    int level)
{
	static const int seg_level[] = { 0, 1, 1 };
	static const int seg_strategy[] = { Z_DEFAULT_STRATEGY, Z_HUFFMAN_ONLY,
					    Z_RLE };
	enum seg_mode mode[MAX_SEGMENTS];
	if (planes < 1 || n % planes)
		planes = 1;
	size_t plane = n / planes, seg = segment_len(plane), nseg = 0;
	/* levels 2..9, and level 1 on a chunk larger than the format allows,
	 * deflate the whole chunk in one mode */
	int whole = level > 1 ||
		    planes * ((plane + seg - 1) / seg) > MAX_SEGMENTS;
	int any = whole;

	/* classify first: a chunk of noise skips deflate altogether */
	if (!whole) {
		for (size_t p0 = 0; p0 < n; p0 += plane)
			for (size_t s = 0; s < plane; s += seg) {
				size_t len = plane - s < seg ? plane - s : seg;
				mode[nseg] = classify(src + p0 + s, len);
				any |= mode[nseg++] != SEG_STORED;
			}
	}
	if (!any)
		return 0;
	z_stream *z = deflater();
	if (!z)
		return 0;
	z->next_out = out;
	z->avail_out = (uInt)limit;
	/* after a reset deflateParams flushes nothing, so always call it
	 * first: the state then never depends on the chunk before */
	deflate_pos pos = { .level = -1, .strategy = -1, .level1 = level == 1 };
	int rc = 0;
	if (whole) {
		rc = feed(z, src, n, level,
			  level > 1 ? Z_DEFAULT_STRATEGY : Z_RLE, &pos);
	} else {
		size_t k = 0;
		for (size_t p0 = 0; p0 < n && rc == 0; p0 += plane)
			for (size_t s = 0; s < plane && rc == 0; s += seg, k++) {
				size_t len = plane - s < seg ? plane - s : seg;
				if (mode[k] == SEG_RUNS)
					rc = feed_runs(z, src + p0 + s, len,
						       &pos);
				else
					rc = feed(z, src + p0 + s, len,
						  seg_level[mode[k]],
						  seg_strategy[mode[k]], &pos);
			}
	}
	if (rc == 0 && deflate(z, Z_FINISH) == Z_STREAM_END)
		return z->total_out;
	return 0;
}

size_t at_chunk_bound(size_t raw_len)
{
	return compressBound((uLong)raw_len) + 64;
}

size_t at_chunk_encode(const unsigned char *raw, size_t raw_len,
		       unsigned char *out, size_t elem, const at_write_opts *o,
		       unsigned char *scratch)
{
	const unsigned char *src = raw;
	size_t planes = 1;
	if (o->shuffle && elem > 1) {
		at_shuffle(raw, scratch, raw_len, elem);
		src = scratch;
		planes = elem;
	}
	if (o->level > 0 && raw_len > 0) {
		int level = o->level > 9 ? 9 : o->level;
		/* a deflated chunk must come out shorter than the raw one */
		size_t n = deflate_chunk(src, raw_len, out, raw_len - 1, planes,
					 level);
		if (n > 0)
			return n;
	}
	memcpy(out, src, raw_len); /* stored: deflate did not pay */
	return raw_len;
}

int at_chunk_decode(const unsigned char *stored, size_t stored_len,
		    unsigned char *raw, size_t raw_len, size_t elem,
		    int shuffled, uint32_t crc, unsigned char *scratch,
		    char *err, size_t errlen)
{
	int shuf = shuffled && elem > 1;
	unsigned char *dst = shuf ? scratch : raw;
	if (stored_len == raw_len) {
		if (shuf)
			dst = (unsigned char *)stored;
		else if (stored != raw) /* the reader may read in place */
			memcpy(raw, stored, raw_len);
	} else {
		z_stream *z = inflater();
		if (!z) {
			snprintf(err, errlen, "out of memory in inflate");
			return -1;
		}
		z->next_in = (Bytef *)stored;
		z->avail_in = (uInt)stored_len;
		z->next_out = dst;
		z->avail_out = (uInt)raw_len;
		int rc = inflate(z, Z_FINISH);
		if (rc != Z_STREAM_END || z->total_out != raw_len ||
		    z->avail_in != 0) {
			snprintf(err, errlen, "corrupt deflate data");
			return -1;
		}
	}
	if (shuf)
		at_unshuffle(dst, raw, raw_len, elem);
	if ((uint32_t)crc32(0L, raw, (uInt)raw_len) != crc) {
		snprintf(err, errlen, "CRC32 mismatch: the data is damaged");
		return -1;
	}
	return 0;
}
