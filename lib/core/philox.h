/* philox.h - the counter-based generator behind the seeded default model.
 *
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC 2011): ten rounds of a keyed bijection on a 128-bit counter.  Any
 * element of any parameter can be drawn on its own, on the CPU or the GPU,
 * with the same result.  man/man5/andrea-model.5 documents the mapping from
 * (seed, parameter name, element index) to a value.
 */
#ifndef ANDREA_PHILOX_H
#define ANDREA_PHILOX_H

#include <stddef.h>
#include <stdint.h>

/* One Philox4x32-10 block: out = philox(counter ctr, key k). */
void at_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]);

/* The 64-bit FNV-1a hash of a parameter name. */
uint64_t at_name_hash(const char *name);

/* Fills out[0..n) with N(0, std^2) values for parameter `name` under
 * `seed`: element i comes from Philox block i/4 of key (seed ^ hash(name)),
 * lane i%4, through Box-Muller in double precision. */
void at_seeded_normal(uint64_t seed, const char *name, double std, float *out,
		      size_t n);

#endif
