/* test_dist.c - unit test of data-parallel training's bookkeeping
 * (lib/train/dist.h), without NCCL: the rows each rank takes, the
 * gradient buckets and their stages, the optimizer's shards and the
 * update's pieces inside them, on small models of both forms (with and
 * without biases, tied and untied) and 1 to 8 ranks; that a rank's
 * slice of a training or held-out batch is those rows of the whole
 * batch; and, on the CPU trainer, that the ranks' scaled gradients add
 * up to the global batch's.
 *
 * Prints one line per failed check and a final "N passed, M failed";
 * exits 1 when anything failed.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "train/dist.h"
#include "check.h"

static void test_rows(void)
{
	char err[200];
	for (int world = 1; world <= 8; world *= 2) {
		int next = 0; /* the slices tile [0, B) in rank order */
		for (int r = 0; r < world; r++) {
			int first = -1, rows = -1;
			CHECK(tr_dist_rows(16, r, world, &first, &rows, err,
					   sizeof err) == 0);
			CHECK(first == next && rows == 16 / world);
			next = first + rows;
		}
		CHECK(next == 16);
	}
	int first, rows;
	CHECK(tr_dist_rows(6, 0, 4, &first, &rows, err, sizeof err) < 0);
	CHECK(strstr(err, "6 rows") && strstr(err, "4 ranks"));
	CHECK(tr_dist_rows(8, 2, 2, &first, &rows, err, sizeof err) < 0);
	CHECK(strstr(err, "rank 2"));
	CHECK(tr_dist_rows(8, -1, 2, &first, &rows, err, sizeof err) < 0);
}

/* The stage of a parameter from its name: what tr_dist_stage derives
 * from the offsets. */
static int stage_by_name(const tr_model *m, const char *name)
{
	int L = m->cfg.n_layer, l;
	if (!strcmp(name, "lm_head") || !strncmp(name, "lnf.", 4))
		return 0;
	if (sscanf(name, "layers.%d.", &l) == 1)
		return 1 + (L - 1 - l);
	return L + 1;
}

static void test_buckets(const tr_model *m)
{
	int L = m->cfg.n_layer;
	for (int i = 0; i < m->n_params; i++)
		CHECK(tr_dist_stage(m, i) == stage_by_name(m, m->params[i].name));
	size_t caps[] = {1, 7, 64, 100, 1000, (size_t)-1};
	for (size_t c = 0; c < sizeof caps / sizeof *caps; c++) {
		tr_bucket *b;
		int n;
		CHECK(tr_dist_buckets(m, caps[c], &b, &n) == 0);
		size_t end = m->total; /* contiguous, from the end down */
		int stage = 0, params = 0;
		for (int k = 0; k < n; k++) {
			CHECK(b[k].start + b[k].len == end);
			CHECK(b[k].stage >= stage); /* completed in order */
			stage = b[k].stage;
			end = b[k].start;
			/* whole parameters; the stage is their last one */
			int inside = 0, want = 0;
			for (int i = 0; i < m->n_params; i++) {
				const tr_param *p = &m->params[i];
				if (p->off >= b[k].start &&
				    p->off + p->n <= b[k].start + b[k].len) {
					inside++;
					int s = tr_dist_stage(m, i);
					want = s > want ? s : want;
				} else {
					CHECK(p->off + p->n <= b[k].start ||
					      p->off >= b[k].start + b[k].len);
				}
			}
			CHECK(inside >= 1 && b[k].stage == want);
			CHECK(b[k].len <= caps[c] || inside == 1);
			/* full: the parameter below it did not fit */
			for (int i = 0; i < m->n_params && k + 1 < n; i++)
				if (m->params[i].off + m->params[i].n == b[k].start)
					CHECK(b[k].len + m->params[i].n > caps[c]);
			params += inside;
		}
		CHECK(end == 0 && params == m->n_params);
		if (caps[c] == 1)
			CHECK(n == m->n_params);
		if (caps[c] == (size_t)-1)
			CHECK(n == 1 && b[0].stage == L + 1);
		free(b);
	}
}

/* The shards tile the padded buffer in equal aligned ranges, and the
 * pieces of all the ranks' shards are the pieces of the whole update
 * cut at the shards' edges. */
static void test_shards(const tr_model *m)
{
	size_t aligns[] = {1, 4, 4096};
	unsigned chunks[] = {1, 5, 4096};
	for (int world = 1; world <= 8; world++)
		for (int a = 0; a < 3; a++) {
			tr_shards s = tr_dist_shards(m->total, world, aligns[a]);
			CHECK(s.len % aligns[a] == 0 && s.padded == world * s.len);
			CHECK(s.padded >= m->total);
			CHECK(s.padded - m->total < world * aligns[a]);
			for (int c = 0; c < 3; c++) {
				tr_piece *all;
				int na;
				CHECK(tr_dist_pieces(m, 0, m->total, chunks[c], &all,
						     &na) == 0);
				int k = 0; /* the next whole-update piece */
				size_t at = 0, next = 0;
				for (int r = 0; r < world; r++) {
					size_t lo = r * s.len, hi = lo + s.len;
					tr_piece *p;
					int np;
					CHECK(tr_dist_pieces(m, lo, hi, chunks[c], &p,
							     &np) == 0);
					for (int j = 0; j < np; j++) {
						CHECK(p[j].start == next);
						CHECK(p[j].len >= 1 && p[j].len <= chunks[c]);
						CHECK(p[j].start >= lo &&
						      p[j].start + p[j].len <= hi);
						/* inside whole piece k */
						while (k < na &&
						       all[k].start + all[k].len <= p[j].start)
							k++;
						CHECK(k < na && p[j].start >= all[k].start &&
						      p[j].start + p[j].len <=
							      all[k].start + all[k].len);
						CHECK(k < na && p[j].decay == all[k].decay);
						next = p[j].start + p[j].len;
						at += p[j].len;
					}
					free(p);
				}
				CHECK(next == m->total && at == m->total);
				/* the whole update: chunk-sized from each start */
				for (int j = 0; j < na; j++) {
					int i = 0;
					while (m->params[i].off + m->params[i].n <=
					       all[j].start)
						i++;
					const tr_param *q = &m->params[i];
					CHECK((all[j].start - q->off) % chunks[c] == 0);
					CHECK(all[j].decay == q->decay);
				}
				free(all);
			}
		}
}

/* Each rank draws its rows of a batch alone (data.c): they must be the
 * rows the whole batch has there, for training and held-out batches. */
static void test_batch_slices(void)
{
	enum { N = 500, B = 8, T = 5 };
	int32_t tok[N];
	for (int i = 0; i < N; i++)
		tok[i] = (i * 37 + i / 7) % 101;
	tr_data d = {.tok = tok, .n = N, .n_train = 400};
	int32_t in[B * T], tg[B * T], sin[B * T], stg[B * T];
	char err[200];
	for (int world = 1; world <= 8; world *= 2)
		for (int r = 0; r < world; r++) {
			int first, rows;
			CHECK(tr_dist_rows(B, r, world, &first, &rows, err,
					   sizeof err) == 0);
			size_t at = (size_t)first * T, n = (size_t)rows * T * 4;
			tr_data_train_batch(&d, 42, 3, 0, B, T, in, tg);
			tr_data_train_batch(&d, 42, 3, first, rows, T, sin, stg);
			CHECK(!memcmp(sin, in + at, n) && !memcmp(stg, tg + at, n));
			tr_data_val_batch(&d, 1, 3, B, 0, B, T, in, tg);
			tr_data_val_batch(&d, 1, 3, B, first, rows, T, sin, stg);
			CHECK(!memcmp(sin, in + at, n) && !memcmp(stg, tg + at, n));
		}
	/* and the rows differ, so the check can tell a wrong slice */
	tr_data_train_batch(&d, 42, 3, 0, B, T, in, tg);
	CHECK(memcmp(in, in + T, T * 4) != 0);
}

/* What the rows' split and the 1 / (B T) scale promise, on the CPU
 * trainer: each rank's gradient of its rows' mean loss, times rows / B,
 * summed over the ranks, is the global batch's gradient (up to the order
 * of the sums), and so is the loss. */
static void test_split_gradient(int biases, int tied)
{
	const at_config cfg = {2, 2, 8, 6, 11};
	const int B = 4, T = 6;
	tr_model m;
	CHECK(tr_model_init(&m, &cfg, biases, tied) == 0);
	tr_model_seed(&m, 7);
	CHECK(tr_acts_alloc(&m, B, T) == 0);
	int32_t in[4 * 6], tg[4 * 6];
	for (int i = 0; i < B * T; i++) {
		in[i] = (i * 7 + 3) % cfg.vocab;
		tg[i] = (i * 5 + 1) % cfg.vocab;
	}
	double whole = tr_forward(&m, in, tg, B, T);
	tr_backward(&m, in, tg, B, T);
	float *want = malloc(m.total * sizeof *want);
	float *sum = calloc(m.total, sizeof *sum);
	memcpy(want, m.g, m.total * sizeof *want);
	char err[200];
	for (int world = 2; world <= 4; world *= 2) {
		memset(sum, 0, m.total * sizeof *sum);
		double loss = 0;
		for (int r = 0; r < world; r++) {
			int first, rows;
			CHECK(tr_dist_rows(B, r, world, &first, &rows, err,
					   sizeof err) == 0);
			const int32_t *ri = in + first * T, *rt = tg + first * T;
			double share = (double)rows / B;
			loss += share * tr_forward(&m, ri, rt, rows, T);
			tr_backward(&m, ri, rt, rows, T);
			for (size_t i = 0; i < m.total; i++)
				sum[i] += (float)(share * m.g[i]);
		}
		double worst = 0, scale = 0;
		for (size_t i = 0; i < m.total; i++) {
			double e = fabs((double)sum[i] - want[i]);
			worst = e > worst ? e : worst;
			scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
		}
		CHECK(scale > 0 && worst <= 1e-5 * scale);
		CHECK(fabs(loss - whole) <= 1e-6 * whole);
	}
	free(want);
	free(sum);
	tr_model_free(&m);
}

int main(void)
{
	test_rows();
	test_batch_slices();
	for (int form = 0; form < 4; form++)
		test_split_gradient(form & 1, form >> 1);
	const at_config cfgs[] = {{3, 2, 8, 4, 11}, {1, 1, 4, 1, 5}};
	for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
		for (int form = 0; form < 4; form++) {
			tr_model m;
			CHECK(tr_model_init(&m, &cfgs[c], form & 1, form >> 1) == 0);
			test_buckets(&m);
			test_shards(&m);
			tr_model_free(&m);
		}
	return check_finish("test_dist");
}
