/* philox.c - Philox4x32-10 and the seeded normal draws. */
#include "core/philox.h"

#include <math.h>
#include <string.h>

#include "core/parallel.h"

/* Round multipliers and Weyl key increments of Philox4x32 (the published
 * constants). */
#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

void at_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
	uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
	uint32_t k0 = key[0], k1 = key[1];
	for (int round = 0; round < 10; round++) {
		uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
		uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
		uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
		uint32_t n1 = (uint32_t)p1;
		uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
		uint32_t n3 = (uint32_t)p0;
		c0 = n0, c1 = n1, c2 = n2, c3 = n3;
		k0 += PHILOX_W0;
		k1 += PHILOX_W1;
	}
	out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

uint64_t at_name_hash(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* (0, 1]: never 0, so the logarithm below is finite. */
static double unit(uint32_t u)
{
	return ((double)u + 1.0) / 4294967296.0;
}

/* Normals below which a thread more does not pay. */
#define MIN_SHARE (1u << 14)
/* Philox blocks drawn and transformed together: 16 radius and 16 angle
 * draws, four vectors of four doubles each. */
#define GROUP 8

typedef struct {
	uint32_t key[2];
	double std;
	float *out;
	size_t n;
	int items;
} draw_job;

/* Philox words of blocks b0 .. b0+GROUP-1, lane-major (r[j][i] is word j
 * of block b0 + i), in a loop the compiler vectorises. */
static inline void philox_group(const uint32_t key[2], uint64_t b0,
				uint32_t r[4][GROUP])
{
	uint32_t k0 = key[0], k1 = key[1];
	for (int i = 0; i < GROUP; i++) {
		r[0][i] = (uint32_t)(b0 + (uint64_t)i);
		r[1][i] = (uint32_t)((b0 + (uint64_t)i) >> 32);
		r[2][i] = r[3][i] = 0;
	}
	for (int round = 0; round < 10; round++) {
		for (int i = 0; i < GROUP; i++) {
			uint64_t p0 = (uint64_t)PHILOX_M0 * r[0][i];
			uint64_t p1 = (uint64_t)PHILOX_M1 * r[2][i];
			uint32_t n0 = (uint32_t)(p1 >> 32) ^ r[1][i] ^ k0;
			uint32_t n2 = (uint32_t)(p0 >> 32) ^ r[3][i] ^ k1;
			r[1][i] = (uint32_t)p1;
			r[3][i] = (uint32_t)p0;
			r[0][i] = n0;
			r[2][i] = n2;
		}
		k0 += PHILOX_W0;
		k1 += PHILOX_W1;
	}
}

/* Writes the normals of blocks b0 .. b0+GROUP-1 that fall below n. */
static inline void put_group(const draw_job *d, uint64_t b0,
			     const double z[4][GROUP])
{
	if (4 * (b0 + GROUP) <= d->n) {
		float *o = d->out + 4 * b0;
		for (int i = 0; i < GROUP; i++)
			for (int j = 0; j < 4; j++)
				o[4 * i + j] = (float)(d->std * z[j][i]);
		return;
	}
	for (int i = 0; i < GROUP; i++)
		for (int j = 0; j < 4; j++) {
			uint64_t e = 4 * (b0 + (uint64_t)i) + (uint64_t)j;
			if (e < d->n)
				d->out[e] = (float)(d->std * z[j][i]);
		}
}

/* Box-Muller with the C library's scalar functions: z[j] and z[j + 1]
 * of block i from its words j and j + 1 (j even). */
static void box_muller(const uint32_t r[4][GROUP], int i, int j,
		       double z[4][GROUP])
{
	double radius = sqrt(-2.0 * log(unit(r[j][i])));
	double theta = 2.0 * M_PI * unit(r[j + 1][i]);
	z[j][i] = radius * cos(theta);
	z[j + 1][i] = radius * sin(theta);
}

static void draw_scalar(const draw_job *d, uint64_t b0, uint64_t b1)
{
	for (uint64_t b = b0; b < b1; b += GROUP) {
		uint32_t r[4][GROUP];
		double z[4][GROUP];
		philox_group(d->key, b, r);
		for (int i = 0; i < GROUP; i++)
			for (int j = 0; j < 4; j += 2)
				box_muller(r, i, j, z);
		put_group(d, b, z);
	}
}

#ifdef ANDREA_MVEC
#include <immintrin.h>

/* glibc's vector functions (libmvec), four doubles at a time on AVX2:
 * within a few units in the last place of the scalar ones, far below the
 * float32 rounding of the result. */
/* Doubles within TIE_ULPS units in the last place of a float32 rounding
 * tie, where an error of a few units in ln, cos or sin could tip the
 * rounding, are drawn again with the scalar functions: the values are
 * then exactly those of the scalar path (libmvec is accurate to 4 ulp). */
#define TIE_ULPS 1024

/* Whether any lane of std * z is near a tie (or below float32's normal
 * range, where the tie sits elsewhere). */
__attribute__((target("avx2"))) static int near_tie(__m256d z, double std)
{
	__m256d v = _mm256_mul_pd(_mm256_set1_pd(std), z);
	/* float32 keeps 23 of the 52 mantissa bits: a tie is 2^28 below */
	__m256i low = _mm256_and_si256(_mm256_castpd_si256(v),
				       _mm256_set1_epi64x((1ll << 29) - 1));
	__m256i off = _mm256_sub_epi64(low, _mm256_set1_epi64x(1ll << 28));
	__m256i above = _mm256_cmpgt_epi64(off, _mm256_set1_epi64x(-TIE_ULPS - 1));
	__m256i below = _mm256_cmpgt_epi64(_mm256_set1_epi64x(TIE_ULPS + 1), off);
	__m256d tiny = _mm256_cmp_pd(_mm256_andnot_pd(_mm256_set1_pd(-0.0), v),
				     _mm256_set1_pd(1e-37), _CMP_LT_OQ);
	return _mm256_movemask_pd(_mm256_castsi256_pd(
		       _mm256_and_si256(above, below))) |
	       _mm256_movemask_pd(tiny);
}

__attribute__((target("avx2"))) __m256d _ZGVdN4v_log(__m256d x);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_cos(__m256d x);
__attribute__((target("avx2"))) __m256d _ZGVdN4v_sin(__m256d x);

/* unit() of four words: exact, as the scalar one is. */
__attribute__((target("avx2"))) static inline __m256d unit4(const uint32_t *u)
{
	__m128i flipped = _mm_xor_si128(_mm_loadu_si128((const __m128i *)u),
					_mm_set1_epi32((int)0x80000000u));
	__m256d d = _mm256_add_pd(_mm256_cvtepi32_pd(flipped),
				  _mm256_set1_pd(2147483648.0 + 1.0));
	return _mm256_mul_pd(d, _mm256_set1_pd(1.0 / 4294967296.0));
}

/* draw_scalar's arithmetic, vector by vector: the same operations in the
 * same order, each rounded once, so only ln, cos and sin differ, and
 * near_tie makes up for them. */
__attribute__((target("avx2"))) static void draw_avx2(const draw_job *d,
						      uint64_t b0, uint64_t b1)
{
	for (uint64_t b = b0; b < b1; b += GROUP) {
		uint32_t r[4][GROUP];
		double z[4][GROUP];
		philox_group(d->key, b, r);
		for (int j = 0; j < 4; j += 2)
			for (int i = 0; i < GROUP; i += 4) {
				__m256d u0 = unit4(&r[j][i]), u1 = unit4(&r[j + 1][i]);
				__m256d radius = _mm256_sqrt_pd(_mm256_mul_pd(
					_mm256_set1_pd(-2.0), _ZGVdN4v_log(u0)));
				__m256d theta = _mm256_mul_pd(_mm256_set1_pd(2.0 * M_PI), u1);
				__m256d c = _mm256_mul_pd(radius, _ZGVdN4v_cos(theta));
				__m256d s = _mm256_mul_pd(radius, _ZGVdN4v_sin(theta));
				_mm256_storeu_pd(&z[j][i], c);
				_mm256_storeu_pd(&z[j + 1][i], s);
				if (near_tie(c, d->std) | near_tie(s, d->std))
					for (int l = 0; l < 4; l++)
						box_muller(r, i + l, j, z);
			}
		put_group(d, b, z);
	}
}
#endif

static void draw_piece(void *ctx, int item, int tid)
{
	const draw_job *d = ctx;
	uint64_t blocks = (d->n + 3) / 4;
	/* item i of `items` takes the i-th contiguous share of the blocks,
	 * a multiple of GROUP, as an OpenMP static schedule would: a thread
	 * then holds in its cache the rows it will also be given to use */
	uint64_t share = (blocks + (uint64_t)d->items - 1) / (uint64_t)d->items;
	share = (share + GROUP - 1) / GROUP * GROUP;
	uint64_t b0 = (uint64_t)item * share;
	uint64_t b1 = b0 + share < blocks ? b0 + share : blocks;
	if (b0 >= b1)
		return;
#ifdef ANDREA_MVEC
	if (__builtin_cpu_supports("avx2")) {
		draw_avx2(d, b0, b1);
		return;
	}
#endif
	draw_scalar(d, b0, b1);
}

void at_seeded_normal(uint64_t seed, const char *name, double std, float *out,
		      size_t n)
{
	uint64_t k = seed ^ at_name_hash(name);
	int threads = at_threads(); /* --threads, as for the other loops */
	/* small draws on one thread: starting another costs more */
	if ((uint64_t)n < (uint64_t)threads * MIN_SHARE)
		threads = 1;
	draw_job d = {{(uint32_t)k, (uint32_t)(k >> 32)}, std, out, n, threads};
	at_parallel_for(threads, threads, draw_piece, &d);
}
