/* heatmap.h - one 2-D slice of a tensor drawn as shaded text or a PNG.
 *
 * A slice is picked by fixing every leading axis (all but the last two):
 * `--select 0,3` of a [B,H,T,T] tensor is batch 0, head 3, a T x T map.
 * A 1-D tensor is one row, a scalar a 1 x 1 map.  Shades run from the
 * slice's finite minimum to its finite maximum; NaN, +inf and -inf (a
 * causal mask's masked entries) are drawn apart from the ramp.
 */
#ifndef ANDREA_HEATMAP_H
#define ANDREA_HEATMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/tensor.h"

/* Text characters, low to high, and for the values off the ramp. */
#define HM_RAMP ".:-=+*#%@"
#define HM_CHAR_NEGINF '_'
#define HM_CHAR_POSINF '^'
#define HM_CHAR_NAN '?'

/* PNG colours: the ramp runs through these three stops, linearly. */
#define HM_RGB_LOW {20, 30, 90}
#define HM_RGB_MID {30, 160, 140}
#define HM_RGB_HIGH {250, 230, 60}
#define HM_RGB_NEGINF {200, 200, 200}
#define HM_RGB_POSINF {255, 255, 255}
#define HM_RGB_NAN {255, 0, 255}

#define HM_PNG_MIN_SIDE 256      /* small maps are enlarged to this */
#define HM_PNG_MAX_SIDE 1000000  /* libpng's default limit */

typedef struct {
	const at_tensor *t;
	uint64_t base;       /* flat index of the slice's first element */
	uint64_t rows, cols;
	int any_finite;
	double lo, hi;       /* finite minimum and maximum */
} hm_slice;

typedef enum { HM_FINITE, HM_NAN, HM_POSINF, HM_NEGINF } hm_kind;

/* Parses "I,J,..." (decimal, comma separated; "" is no index) into sel.
 * Returns the count, or -1 when the text is not of that form. */
int hm_parse_select(const char *s, uint64_t *sel, int max);

/* Number of leading indices a tensor of this rank takes: max(rank - 2, 0). */
int hm_leading(int rank);

/* Checks a selection against a shape.  Returns 0, or -1 with a reason in
 * err ("2 indices for 3 leading axes", "index 9 is past axis 1 (size 4)"). */
int hm_check_select(int rank, const uint64_t *dims, const uint64_t *sel,
		    int nsel, char *err, size_t errlen);

/* Fills s for the slice of t that sel picks (checked beforehand). */
void hm_slice_init(hm_slice *s, const at_tensor *t, const uint64_t *sel);

/* Block sizes that bring a rows x cols map within max_rows x max_cols:
 * bh = ceil(rows / max_rows), bw = ceil(cols / max_cols), at least 1. */
void hm_blocks(uint64_t rows, uint64_t cols, uint64_t max_rows,
	       uint64_t max_cols, uint64_t *bh, uint64_t *bw);

/* The value drawn for the block of bh x bw elements at (r0, c0) (clipped
 * at the slice's edge): NaN if the block holds one, else the mean of its
 * finite values, placed on [0, 1] in *level (0.5 when lo == hi), else
 * +inf if it holds one, else -inf. */
hm_kind hm_cell(const hm_slice *s, uint64_t r0, uint64_t c0, uint64_t bh,
		uint64_t bw, double *level);

/* Labels of a map's rows and columns as UTF-8 text of one- or two-byte
 * characters (bytelevel.h's spelling), or NULL for none. */
typedef struct {
	const char *const *row; /* [rows] */
	const char *const *col; /* [cols] */
} hm_labels;

/* Row labels are cut to this many characters, column labels (written
 * down the page, one character a line above the map) to HM_COL_LABEL. */
#define HM_ROW_LABEL 12
#define HM_COL_LABEL 8

/* Writes the map in text, one line per block row; lab (or NULL) labels
 * the rows at the left where bh is 1 and the columns above where bw is
 * 1. */
void hm_ascii(FILE *out, const hm_slice *s, uint64_t bh, uint64_t bw,
	      const hm_labels *lab);

/* Pixel scale of a PNG: ceil(HM_PNG_MIN_SIDE / max(rows, cols)), >= 1. */
unsigned hm_png_scale(uint64_t rows, uint64_t cols);

/* Writes the map as an 8-bit RGB PNG to f, one pixel per element enlarged
 * hm_png_scale times.  Returns 0, or -1 with a reason in err; without
 * libpng (no ANDREA_PNG) it always fails. */
int hm_png(FILE *f, const hm_slice *s, char *err, size_t errlen);

#endif
