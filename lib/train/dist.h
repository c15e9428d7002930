/* dist.h - the bookkeeping of data-parallel training (issue 21), apart
 * from NCCL, which moves the numbers: which rows of each global batch a
 * rank takes, the buckets its gradients are summed across the ranks in
 * while the backward pass runs, and the equal shards of a sharded (ZeRO
 * stage 1) optimizer with the update's pieces inside one. */
#ifndef ANDREA_TRAIN_DIST_H
#define ANDREA_TRAIN_DIST_H

#include <stddef.h>

#include "train/train.h"

/* Rank `rank` of `world` takes rows [*first, *first + *rows) of every
 * global batch of B rows: equal slices in rank order, so that the same
 * seed and global batch give the same run on any number of ranks.  Each
 * rank then scales its loss by 1 / (B T), the global batch's count, and
 * the sum of the ranks' gradients is the global batch's.  Returns 0, or
 * -1 with the reason in err (B not a multiple of world, a bad rank). */
int tr_dist_rows(int B, int rank, int world, int *first, int *rows,
		 char *err, size_t errlen);

/* When the backward pass is done with parameter i of m: stage 0 after
 * the head and the final LayerNorm, 1 + (L - 1 - l) after layer l, L + 1
 * after the embeddings (where a tied wte gets its last share).  The
 * stages follow the flat layout backwards (train.h). */
int tr_dist_stage(const tr_model *m, int i);

/* One bucket of gradients: the range [start, start + len) of the flat
 * buffer, complete once the backward pass is past `stage`. */
typedef struct {
	size_t start, len;
	int stage;
} tr_bucket;

/* The buckets of m, in the order the backward pass completes them (from
 * the end of the flat buffer to its start): whole parameters, at most cap
 * elements each unless one parameter alone is larger.  *out is malloc'd
 * with *n entries; -1 when out of memory. */
int tr_dist_buckets(const tr_model *m, size_t cap, tr_bucket **out, int *n);

/* The shards of a sharded optimizer over `total` elements: the flat
 * buffers padded to `padded` = world * len, len a multiple of align; rank
 * r owns [r len, (r + 1) len) clipped to total, what a reduce-scatter of
 * the padded gradients hands it. */
typedef struct {
	size_t len, padded;
} tr_shards;
tr_shards tr_dist_shards(size_t total, int world, size_t align);

/* One piece of the update: elements [start, start + len) of one
 * parameter, with its weight-decay flag. */
typedef struct {
	size_t start;
	unsigned len;
	int decay;
} tr_piece;

/* The update's pieces of m inside [lo, hi): every parameter cut into
 * pieces of `chunk` elements from its start, clipped to the range (lo 0,
 * hi m->total: the whole update).  *out is malloc'd with *n entries; -1
 * when out of memory. */
int tr_dist_pieces(const tr_model *m, size_t lo, size_t hi, unsigned chunk,
		   tr_piece **out, int *n);

#endif
