/* stages.c - in-process timing of each stage's CPU compute at ANDREA-120M
 * size (B=1, H=12, T=1024, D=64, C=768).  Prints "STAGE MS" lines, the
 * best of several runs; bench/stages.py sets them beside NumPy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/ops.h"
#include "core/philox.h"

#define B 1
#define H 12
#define T 1024
#define D 64
#define C (H * D)
#define V 257
#define REPS 7

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static float *randn(const char *name, size_t n, float std)
{
	float *p = malloc(n * sizeof *p);
	if (!p) {
		fprintf(stderr, "stages: out of memory\n");
		exit(1);
	}
	at_seeded_normal(42, name, std, p, n);
	return p;
}

#define TIME(label, body)                                        \
	do {                                                     \
		double best = 1e30;                              \
		for (int rep = 0; rep < REPS; rep++) {           \
			double t0 = now_ms();                    \
			body;                                    \
			double dt = now_ms() - t0;               \
			best = dt < best ? dt : best;            \
		}                                                \
		printf("%s %.3f\n", label, best);                \
	} while (0)

int main(void)
{
	int32_t *tok = malloc(B * T * sizeof *tok);
	for (int i = 0; i < B * T; i++)
		tok[i] = (i * 131 + 7) % V;
	float *wte = randn("wte", (size_t)V * C, 0.02f);
	float *wpe = randn("wpe", (size_t)T * C, 0.02f);
	float *lnw = randn("lnw", C, 1.0f), *lnb = randn("lnb", C, 1.0f);
	/* Wq, Wk, Wv side by side, as andrea-qkv holds them */
	float *wqkv = randn("wqkv", (size_t)C * 3 * C, 0.02f);
	float *x = malloc((size_t)B * T * C * sizeof *x);
	float *qkv[3];
	for (int m = 0; m < 3; m++)
		qkv[m] = malloc((size_t)B * T * C * sizeof *qkv[m]);
	float *s = malloc((size_t)B * H * T * T * sizeof *s);
	float *a = malloc((size_t)B * H * T * T * sizeof *a);
	float *o = malloc((size_t)B * H * T * D * sizeof *o);

	TIME("embed", at_embed_forward(x, tok, wte, wpe, B, T, C));
	TIME("qkv", at_qkv_forward(qkv[0], qkv[1], qkv[2], x, lnw, lnb, wqkv, B, T,
				   C, H, D));
	TIME("scores", at_scores_forward(s, qkv[0], qkv[1], B * H, T, D,
					 1.0f / sqrtf(D)));
	TIME("mask", at_mask_causal(s, B * H, T, -INFINITY));
	TIME("softmax", at_softmax_rows(a, s, (size_t)B * H * T, T));
	TIME("attend", at_attend_forward(o, a, qkv[2], B * H, T, D));
	return 0;
}
