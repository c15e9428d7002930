/* heads.c - head characterisation scores (heads.h). */
#include "view/heads.h"

#include <math.h>
#include <stddef.h>

const char *const hd_names[HD_SCORES] = {"prev", "dup", "induction", "first",
					 "entropy"};

/* One row i of one head: the five sums into acc. */
static void add_row(hd_acc *acc, const float *a, const int32_t *t, int i)
{
	double ent = 0.0, dup = 0.0, ind = 0.0;
	int has_dup = 0, has_ind = 0;
	for (int j = 0; j <= i; j++) {
		if (a[j] > 0.0f)
			ent -= a[j] * log((double)a[j]);
		if (j < i && t[j] == t[i]) {
			dup += a[j];
			has_dup = 1;
		}
		if (j >= 1 && j < i && t[j - 1] == t[i]) {
			ind += a[j];
			has_ind = 1;
		}
	}
	acc->sum[HD_ENTROPY] += ent;
	acc->count[HD_ENTROPY]++;
	if (i >= 1) {
		acc->sum[HD_PREV] += a[i - 1];
		acc->sum[HD_FIRST] += a[0];
		acc->count[HD_PREV]++;
		acc->count[HD_FIRST]++;
	}
	if (has_dup) {
		acc->sum[HD_DUP] += dup;
		acc->count[HD_DUP]++;
	}
	if (has_ind) {
		acc->sum[HD_INDUCTION] += ind;
		acc->count[HD_INDUCTION]++;
	}
}

void hd_add(hd_acc *acc, const float *att, const int32_t *tok, int B, int H,
	    int T)
{
	size_t TT = (size_t)T * T;
	for (int b = 0; b < B; b++)
		for (int h = 0; h < H; h++)
			for (int i = 0; i < T; i++)
				add_row(&acc[h], att + ((size_t)b * H + h) * TT +
					(size_t)i * T, tok + (size_t)b * T, i);
}

void hd_scores(const hd_acc *acc, float out[HD_SCORES])
{
	for (int k = 0; k < HD_SCORES; k++)
		out[k] = acc->count[k] > 0 ? (float)(acc->sum[k] / acc->count[k])
					   : NAN;
}
