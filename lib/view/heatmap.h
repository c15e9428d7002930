/* heatmap.h - one 2-D slice of a tensor drawn as shaded text or a PNG
 * figure (figure.c).
 *
 * A slice is picked by fixing every leading axis (all but the last two):
 * `--select 0,3` of a [B,H,T,T] tensor is batch 0, head 3, a T x T map.
 * A 1-D tensor is one row, a scalar a 1 x 1 map.  Shades run over a range
 * of values (the slice's finite minimum to its maximum unless one is
 * chosen) on a linear, square-root or log scale; NaN, +inf, -inf, the
 * entries a causal mask hid and a padded row's positions past its length
 * are drawn apart from the ramp.
 */
#ifndef ANDREA_HEATMAP_H
#define ANDREA_HEATMAP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/positions.h"
#include "core/tensor.h"

/* Text characters, low to high, and for the values off the ramp. */
#define HM_RAMP ".:-=+*#%@"
#define HM_CHAR_NEGINF '_'
#define HM_CHAR_POSINF '^'
#define HM_CHAR_NAN '?'
#define HM_CHAR_PADDING ' '

/* PNG colours: the ramp runs through these three stops, linearly. */
#define HM_RGB_LOW {20, 30, 90}
#define HM_RGB_MID {30, 160, 140}
#define HM_RGB_HIGH {250, 230, 60}
/* ... and the signed shade's through these, zero at its middle */
#define HM_RGB_NEGATIVE {33, 102, 172}
#define HM_RGB_ZERO {247, 247, 247}
#define HM_RGB_POSITIVE {178, 24, 43}
#define HM_RGB_NEGINF {200, 200, 200}
#define HM_RGB_POSINF {255, 255, 255}
#define HM_RGB_NAN {255, 0, 255}
#define HM_RGB_MASKED {200, 200, 200} /* as -inf: what the mask hid */
#define HM_RGB_PADDING {228, 228, 244} /* past a padded row's length */
#define HM_FRAME_GREY 64               /* the frame round a map */
#define HM_MAX_PANELS 64               /* maps in one figure */

/* signed: linear over a range symmetric about 0, in colours of their own
 * (blue below 0, red above): for values whose sign is the point */
typedef enum {
	HM_SHADE_LINEAR, HM_SHADE_SQRT, HM_SHADE_LOG, HM_SHADE_SIGNED
} hm_shade;
#define HM_SHADES 4

typedef enum {
	HM_FINITE, HM_NAN, HM_POSINF, HM_NEGINF, HM_MASKED, HM_PADDING
} hm_kind;

typedef struct {
	const at_tensor *t;
	uint64_t base;       /* flat index of the slice's first element */
	uint64_t rows, cols;
	int causal;          /* entries j > i + cols - rows are masked where
			      * they hold what a mask leaves (0, -inf, fill) */
	uint64_t valid;      /* the row's length where the record's `lengths`
			      * attribute pads it (the rows, and the keys of
			      * scores or weights, past it are padding); else 0 */
	int keys;            /* the columns are keys along T (scores, attn) */
	int has_fill;        /* the record's `fill` attribute, a number: */
	double fill;         /* a hidden score holding it counts as masked */
	at_positions rows_at; /* the rows' queries (a capture's `positions`;
			       * n = 0: the last rows of the cols), which
			       * the causal mask follows */
	int any_finite;
	double lo, hi;       /* finite minimum and maximum (visible entries) */
	double min_pos;      /* smallest positive value, 0 if none */
	unsigned uses;       /* bit k: an entry of hm_kind k */
	hm_shade shade;
	double vlo, vhi;     /* the values the ramp runs between */
} hm_slice;

/* Parses "I,J,..." (decimal, comma separated; "" is no index) into sel.
 * Returns the count, or -1 when the text is not of that form. */
int hm_parse_select(const char *s, uint64_t *sel, int max);

/* Number of leading indices a tensor of this rank takes: max(rank - 2, 0). */
int hm_leading(int rank);

/* Checks a selection against a shape.  Returns 0, or -1 with a reason in
 * err ("2 indices for 3 leading axes", "index 9 is past axis 1 (size 4)"). */
int hm_check_select(int rank, const uint64_t *dims, const uint64_t *sel,
		    int nsel, char *err, size_t errlen);

/* Fills s for the slice of t that sel picks (checked beforehand); causal
 * marks the entries above the diagonal masked (a softmax's zeros there
 * drawn as what the mask hid).  The ramp runs linearly from lo to hi. */
void hm_slice_init(hm_slice *s, const at_tensor *t, const uint64_t *sel,
		   int causal);
/* Sets the scale and, where range is not NULL, its two ends; without a
 * range a log scale runs from max(min_pos, hi / 1e4) to hi.  Returns 0, or
 * -1 with a reason in err (a log range that is not positive). */
int hm_slice_shade(hm_slice *s, hm_shade shade, const double *range,
		   char *err, size_t errlen);
/* A value's place on the ramp, 0 to 1 (clipped). */
double hm_level(const hm_slice *s, double v);
/* Up to max values at which to tick the colour bar, in increasing order,
 * from end to end: nice numbers on a linear or square-root scale, decades
 * on a log one (every k-th where more than max would be needed);
 * none for a slice without a finite value and a range not given. */
int hm_bar_ticks(const hm_slice *s, double *ticks, int max);
/* "linear", "sqrt" or "log". */
const char *hm_shade_name(hm_shade s);
/* Whether t's last two axes are queries and keys along T: scores and
 * attention weights (the records named scores and attn). */
int hm_has_keys(const at_tensor *t);
/* Whether t is such a map a causal mask made (mask=causal, as andrea-mask
 * marks scores and andrea-softmax passes on to attn; an out or y after
 * them carries the attribute too, but has no keys). */
int hm_is_causal(const at_tensor *t);
/* The scale t is drawn on unless one is chosen: log for attention weights
 * (a record named attn: they spread over decades at long contexts),
 * linear for the rest. */
hm_shade hm_record_shade(const at_tensor *t);
/* The maps of t to draw together, on one scale, into maps: the slice sel
 * picks (nsel indices), or with grid every slice along axis nsel (at most
 * HM_MAX_PANELS); causal where hm_is_causal, on scale shade over range
 * (NULL: the maps' own).  Returns their count, or -1 with a reason in err
 * (hm_slice_shade's). */
int hm_record_maps(const at_tensor *t, const uint64_t *sel, int nsel, int grid,
		   hm_shade shade, const double *range, hm_slice *maps,
		   char *err, size_t errlen);
/* The query of row r: its position along T (a capture's rows name theirs
 * in its positions attribute; else r). */
uint64_t hm_query_of(const hm_slice *s, uint64_t r);
/* Whether the slice holds an entry drawn as k. */
int hm_uses(const hm_slice *s, hm_kind k);
/* The colour of a cell of kind k at level (0 to 1 on the ramp of
 * shade). */
void hm_rgb(hm_kind k, double level, hm_shade shade, unsigned char *px);

/* Block sizes that bring a rows x cols map within max_rows x max_cols:
 * bh = ceil(rows / max_rows), bw = ceil(cols / max_cols), at least 1. */
void hm_blocks(uint64_t rows, uint64_t cols, uint64_t max_rows,
	       uint64_t max_cols, uint64_t *bh, uint64_t *bw);

/* The value drawn for the block of bh x bw elements at (r0, c0) (clipped
 * at the slice's edge), its masked entries left out: NaN if the block
 * holds one, else the mean of its finite values, placed on the ramp in
 * *level (0.5 when the range is empty), else +inf if it holds one, else
 * -inf, else masked. */
hm_kind hm_cell(const hm_slice *s, uint64_t r0, uint64_t c0, uint64_t bh,
		uint64_t bw, double *level);

/* Labels of a map's rows and columns, or NULL for none: for hm_ascii
 * UTF-8 text of one- or two-byte characters (bytelevel.h's spelling),
 * for hm_png ASCII (its font's). */
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

/* What a figure says beside its maps. */
typedef struct {
	const char *title;        /* the record, its shape, layer, head */
	const char *xname, *yname; /* the columns' and the rows' axis */
	const hm_labels *lab;     /* tokens naming rows and columns, or NULL:
				   * drawn where a cell is a font's height */
} hm_figure;

/* Writes n maps (1 to HM_MAX_PANELS, one colour scale: maps[0]'s) as an
 * 8-bit RGB PNG figure to f, a grid where n > 1 with captions[i] over map
 * i (figure.c).  Returns 0, or -1 with a reason in err; without libgd (no
 * ANDREA_PNG) it always fails. */
int hm_png(FILE *f, const hm_slice *const *maps, const char *const *captions,
	   int n, const hm_figure *fig, char *err, size_t errlen);

#endif
