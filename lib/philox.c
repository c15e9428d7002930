/* philox.c - Philox4x32-10 and the seeded normal draws. */
#include "philox.h"

#include <math.h>

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

void at_seeded_normal(uint64_t seed, const char *name, double std, float *out,
		      size_t n)
{
	uint64_t k = seed ^ at_name_hash(name);
	uint32_t key[2] = {(uint32_t)k, (uint32_t)(k >> 32)};
	size_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static)
	for (size_t b = 0; b < blocks; b++) {
		uint32_t ctr[4] = {(uint32_t)b, (uint32_t)((uint64_t)b >> 32), 0, 0};
		uint32_t r[4];
		at_philox4x32(ctr, key, r);
		double z[4];
		for (int j = 0; j < 4; j += 2) {
			double radius = sqrt(-2.0 * log(unit(r[j])));
			double theta = 2.0 * M_PI * unit(r[j + 1]);
			z[j] = radius * cos(theta);
			z[j + 1] = radius * sin(theta);
		}
		for (int j = 0; j < 4 && 4 * b + j < n; j++)
			out[4 * b + j] = (float)(std * z[j]);
	}
}
