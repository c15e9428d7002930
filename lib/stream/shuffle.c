/* shuffle.c - byte shuffle and unshuffle, with an AVX2 path for 4-byte
 * elements chosen at run time (the build targets plain x86-64).
 *
 * The AVX2 path moves 32 elements (128 bytes) per step: a byte shuffle in
 * each 128-bit lane groups the lane's four elements by byte, a dword
 * permute pairs the two lanes, and a 64-bit transpose across four registers
 * yields 32 bytes of each plane.  Unshuffling runs the same steps backwards.
 * The tail (fewer than 32 elements) goes through the plain loop; bytes
 * past the last whole element (never there in a stream) are copied as is.
 */
#include "stream/shuffle.h"

#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_AVX2_PATH 1
#include <immintrin.h>
#endif

/* Plain loops over elements [from, count) of a shuffle / unshuffle. */
static void shuffle_plain(const unsigned char *in, unsigned char *out,
			  size_t count, size_t elem, size_t from)
{
	for (size_t b = 0; b < elem; b++)
		for (size_t i = from; i < count; i++)
			out[b * count + i] = in[i * elem + b];
}

static void unshuffle_plain(const unsigned char *in, unsigned char *out,
			    size_t count, size_t elem, size_t from)
{
	for (size_t b = 0; b < elem; b++)
		for (size_t i = from; i < count; i++)
			out[i * elem + b] = in[b * count + i];
}

#ifdef HAVE_AVX2_PATH
/* Gathers, within each 128-bit lane, byte b of the lane's 4 elements into
 * dword b.  A 4x4 byte transpose, so it is its own inverse. */
#define LANE_GROUP                                                     \
	_mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, \
			 15, 0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, \
			 11, 15)

/* Elements [0, count & ~31) of a 4-byte shuffle; returns how many. */
__attribute__((target("avx2"))) static size_t
shuffle4_avx2(const unsigned char *in, unsigned char *out, size_t count)
{
	const __m256i group = LANE_GROUP;
	const __m256i pair = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
	size_t i;
	for (i = 0; i + 32 <= count; i += 32) {
		__m256i v[4];
		for (int k = 0; k < 4; k++) {
			__m256i x = _mm256_loadu_si256(
				(const __m256i *)(in + 4 * i + 32 * k));
			x = _mm256_shuffle_epi8(x, group);
			v[k] = _mm256_permutevar8x32_epi32(x, pair);
		}
		/* v[k] = 8 bytes of plane 0, 1, 2, 3 of elements i+8k.. */
		__m256i t0 = _mm256_unpacklo_epi64(v[0], v[1]);
		__m256i t1 = _mm256_unpackhi_epi64(v[0], v[1]);
		__m256i t2 = _mm256_unpacklo_epi64(v[2], v[3]);
		__m256i t3 = _mm256_unpackhi_epi64(v[2], v[3]);
		_mm256_storeu_si256((__m256i *)(out + i),
				    _mm256_permute2x128_si256(t0, t2, 0x20));
		_mm256_storeu_si256((__m256i *)(out + count + i),
				    _mm256_permute2x128_si256(t1, t3, 0x20));
		_mm256_storeu_si256((__m256i *)(out + 2 * count + i),
				    _mm256_permute2x128_si256(t0, t2, 0x31));
		_mm256_storeu_si256((__m256i *)(out + 3 * count + i),
				    _mm256_permute2x128_si256(t1, t3, 0x31));
	}
	return i;
}

/* Elements [0, count & ~31) of a 4-byte unshuffle; returns how many. */
__attribute__((target("avx2"))) static size_t
unshuffle4_avx2(const unsigned char *in, unsigned char *out, size_t count)
{
	const __m256i group = LANE_GROUP;
	const __m256i unpair = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
	size_t i;
	for (i = 0; i + 32 <= count; i += 32) {
		__m256i p0 = _mm256_loadu_si256((const __m256i *)(in + i));
		__m256i p1 = _mm256_loadu_si256((const __m256i *)(in + count + i));
		__m256i p2 = _mm256_loadu_si256((const __m256i *)(in + 2 * count + i));
		__m256i p3 = _mm256_loadu_si256((const __m256i *)(in + 3 * count + i));
		__m256i t0 = _mm256_permute2x128_si256(p0, p2, 0x20);
		__m256i t2 = _mm256_permute2x128_si256(p0, p2, 0x31);
		__m256i t1 = _mm256_permute2x128_si256(p1, p3, 0x20);
		__m256i t3 = _mm256_permute2x128_si256(p1, p3, 0x31);
		__m256i v[4] = {
			_mm256_unpacklo_epi64(t0, t1),
			_mm256_unpackhi_epi64(t0, t1),
			_mm256_unpacklo_epi64(t2, t3),
			_mm256_unpackhi_epi64(t2, t3),
		};
		for (int k = 0; k < 4; k++) {
			__m256i x = _mm256_permutevar8x32_epi32(v[k], unpair);
			_mm256_storeu_si256((__m256i *)(out + 4 * i + 32 * k),
					    _mm256_shuffle_epi8(x, group));
		}
	}
	return i;
}

/* Whether this CPU runs the AVX2 path (a load of a flag set at start). */
static int use_avx2(void)
{
	return __builtin_cpu_supports("avx2");
}
#endif

void at_shuffle(const unsigned char *in, unsigned char *out, size_t n,
		size_t elem)
{
	size_t count = n / elem, done = 0;
#ifdef HAVE_AVX2_PATH
	if (elem == 4 && use_avx2())
		done = shuffle4_avx2(in, out, count);
#endif
	shuffle_plain(in, out, count, elem, done);
	memcpy(out + count * elem, in + count * elem, n - count * elem);
}

void at_unshuffle(const unsigned char *in, unsigned char *out, size_t n,
		  size_t elem)
{
	size_t count = n / elem, done = 0;
#ifdef HAVE_AVX2_PATH
	if (elem == 4 && use_avx2())
		done = unshuffle4_avx2(in, out, count);
#endif
	unshuffle_plain(in, out, count, elem, done);
	memcpy(out + count * elem, in + count * elem, n - count * elem);
}
