/* clock.h - seconds on the monotonic clock, for timings and deadlines. */
#ifndef ANDREA_CLOCK_H
#define ANDREA_CLOCK_H

#include <time.h>

static inline double at_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

#endif
