/* positions.c - sets of positions along T (positions.h). */
#include "core/positions.h"

#include <stdlib.h>

int at_positions_parse(const char *s, size_t len, long max,
		       at_positions *ps)
{
	const char *p = s, *end = s + len;
	ps->n = 0;
	if (len > 100)
		return -1;
	while (p < end) {
		char *q;
		long lo = strtol(p, &q, 10), hi = lo;
		if (q == p || lo < 0 || lo > max || ps->n == AT_POSITION_RANGES)
			return -1;
		if (q < end && *q == '-') {
			p = q + 1;
			hi = strtol(p, &q, 10);
			if (q == p || hi < lo || hi > max)
				return -1;
		}
		ps->lo[ps->n] = (int)lo, ps->hi[ps->n] = (int)hi, ps->n++;
		if (q < end && *q != ',')
			return -1;
		p = q + (q < end);
		if (q < end && p == end)
			return -1; /* a trailing comma */
	}
	return ps->n ? 0 : -1;
}

int at_positions_has(const at_positions *ps, size_t t)
{
	if (!ps->n)
		return 1;
	for (int i = 0; i < ps->n; i++)
		if ((size_t)ps->lo[i] <= t && t <= (size_t)ps->hi[i])
			return 1;
	return 0;
}

uint64_t at_positions_count(const at_positions *ps)
{
	uint64_t n = 0;
	for (int r = 0; r < ps->n; r++)
		n += (uint64_t)(ps->hi[r] - ps->lo[r]) + 1;
	return n;
}

long at_positions_nth(const at_positions *ps, uint64_t i)
{
	if (!ps->n)
		return (long)i;
	for (int r = 0; r < ps->n; r++) {
		uint64_t size = (uint64_t)(ps->hi[r] - ps->lo[r]) + 1;
		if (i < size)
			return ps->lo[r] + (long)i;
		i -= size;
	}
	return -1;
}
