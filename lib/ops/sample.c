/* sample.c - seeded uniform draws and temperature / top-k sampling. */
#include "ops/sample.h"

#include <math.h>
#include <stdlib.h>

#include "core/philox.h"

double at_sample_uniform(uint64_t seed, uint32_t row, uint64_t n)
{
	uint64_t k = seed ^ at_name_hash("sample");
	uint32_t key[2] = {(uint32_t)k, (uint32_t)(k >> 32)};
	uint32_t ctr[4] = {(uint32_t)n, (uint32_t)(n >> 32), row, 0}, r[4];
	at_philox4x32(ctr, key, r);
	uint64_t bits = ((uint64_t)r[0] << 21) | (r[1] >> 11);
	return (double)bits / 9007199254740992.0; /* 2^53 */
}

int at_argmax(const float *logits, int V)
{
	int best = -1;
	for (int i = 0; i < V; i++)
		if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best]))
			best = i;
	return best;
}

static const float *sort_logits; /* qsort has no context argument */

/* Larger logit first; the lower index first among equals. */
static int by_logit(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;
	float li = sort_logits[i], lj = sort_logits[j];
	if (li != lj)
		return li > lj ? -1 : 1;
	return (i > j) - (i < j);
}

/* Increasing id. */
static int by_id(const void *a, const void *b)
{
	int i = *(const int *)a, j = *(const int *)b;
	return (i > j) - (i < j);
}

/* The weight of logit l under the temperature, max being the largest. */
static double weight(float l, double max, double temperature)
{
	return exp(((double)l - max) / temperature);
}

int at_sample(const float *logits, int V, double temperature, int top_k,
	      double top_p, double u, int *scratch)
{
	/* a NaN is a broken model, not a token never to draw */
	for (int i = 0; i < V; i++)
		if (isnan(logits[i]))
			return -1;
	int best = at_argmax(logits, V);
	if (best < 0 || isinf(logits[best]))
		return -1;
	if (temperature == 0.0 || top_k == 1)
		return best;
	/* kept ids: every one, or the top_k largest, or the most probable
	 * of those up to top_p */
	int n = V;
	for (int i = 0; i < V; i++)
		scratch[i] = i;
	double max = logits[best];
	int cut_k = top_k > 0 && top_k < n, cut_p = top_p < 1.0;
	if (cut_k || cut_p) {
		sort_logits = logits;
		qsort(scratch, (size_t)n, sizeof *scratch, by_logit);
		if (cut_k)
			n = top_k;
		if (cut_p) {
			double all = 0.0, run = 0.0;
			for (int i = 0; i < n; i++)
				all += weight(logits[scratch[i]], max, temperature);
			int keep = 0;
			while (keep < n && (keep == 0 || run < top_p * all))
				run += weight(logits[scratch[keep++]], max,
					      temperature);
			n = keep;
		}
		/* back to increasing id order for the walk below */
		qsort(scratch, (size_t)n, sizeof *scratch, by_id);
	}
	double total = 0.0;
	for (int i = 0; i < n; i++)
		total += weight(logits[scratch[i]], max, temperature);
	double target = u * total, run = 0.0;
	int last = best; /* the last id of weight above 0 */
	for (int i = 0; i < n; i++) {
		double w = weight(logits[scratch[i]], max, temperature);
		run += w;
		if (run > target)
			return scratch[i];
		if (w > 0.0)
			last = scratch[i];
	}
	/* rounding left run just short of the total: never an id of weight
	 * 0 (a logit of -inf, which is never drawn) */
	return last;
}
