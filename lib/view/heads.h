/* heads.h - what each attention head does, scored from its pattern.
 *
 * For one head's attention A [T,T] (row i: where position i looks) over
 * tokens t [T], averaged over the batch's rows and the positions named:
 *   prev       A[i,i-1], over i >= 1: the previous-token score;
 *   dup        the sum of A[i,j] over earlier j with t[j] = t[i], over the
 *              i that have such a j: the duplicate-token score;
 *   induction  the sum of A[i,j] over 1 <= j < i with t[j-1] = t[i] (the
 *              token after an earlier occurrence of t[i]), over the i that
 *              have such a j: the induction score;
 *   first      A[i,0], over i >= 1: the mass on the first position;
 *   entropy    -sum_j A[i,j] ln A[i,j] (nats), over every i.
 * A score with no position to average over is NaN.
 */
#ifndef ANDREA_HEADS_H
#define ANDREA_HEADS_H

#include <stdint.h>

enum { HD_PREV, HD_DUP, HD_INDUCTION, HD_FIRST, HD_ENTROPY, HD_SCORES };

/* The record names of the scores, in the order above. */
extern const char *const hd_names[HD_SCORES];

/* One head's sums and counts so far. */
typedef struct {
	double sum[HD_SCORES];
	double count[HD_SCORES];
} hd_acc;

/* Adds one layer's attention att [B,H,T,T] over tokens [B,T] into
 * acc[0..H-1]. */
void hd_add(hd_acc *acc, const float *att, const int32_t *tok, int B, int H,
	    int T);
/* The scores of acc: sum / count, NaN where count is 0. */
void hd_scores(const hd_acc *acc, float out[HD_SCORES]);

#endif
