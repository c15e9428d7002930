/* figure.c - heatmaps as PNG figures through libgd (heatmap.h, hm_png):
 * one map or a grid of them, each framed, with tick labels on both axes,
 * a title naming the record, axis names, a colour bar in the values'
 * units and a legend of the colours off the ramp.
 *
 * Layout, in pixels: a margin of PAD round everything; the title line;
 * then the panels, a grid of cols x rows, each a caption line (in a grid),
 * the map (cells enlarged to at least MIN_SIDE a side, or averaged in
 * blocks down to at most MAX_CELLS a side) with its row ticks at the left
 * and its column ticks below; the colour bar right of the panels.
 */
#include "view/heatmap.h"
#include "view/labels.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef ANDREA_PNG
#include <gd.h>
#include <gdfonts.h>

#define PAD 10
#define GAP 24          /* between panels */
#define TICK 4
#define BAR_GAP 6       /* between a bar tick and its label, so that a tick
			 * never reads as the label's minus sign */
#define BAR_W 16
#define MIN_SIDE 256    /* a single map's shorter rendering, at least */
#define GRID_SIDE 160   /* a grid panel's */
#define MAX_CELLS 1024  /* cells a side before block averaging */
#define GRID_CELLS 256
#define LABELLED 64     /* rows or columns that tokens may name */

typedef struct {
	gdImagePtr im;
	gdFontPtr font;
	int black, frame, grey, white;
} canvas;

static int rgb(canvas *c, const unsigned char *px)
{
	return gdTrueColor(px[0], px[1], px[2]);
}

static void text(canvas *c, int x, int y, const char *s)
{
	gdImageString(c->im, c->font, x, y, (unsigned char *)s, c->black);
}

static int text_w(const canvas *c, const char *s)
{
	return (int)strlen(s) * c->font->w;
}

/* A step of 1, 2 or 5 times a power of ten giving at most `most` ticks
 * over n indices. */
static uint64_t tick_step(uint64_t n, int most)
{
	uint64_t step = 1;
	for (;;)
		for (int m = 1; m <= 5; m += m == 1 ? 1 : 3) {
			if (n <= step * m * (uint64_t)most)
				return step * m;
			if (m == 5)
				step *= 10;
		}
}

/* What one panel needs: the slice, its blocks and its cell size. */
typedef struct {
	const hm_slice *s;
	uint64_t bh, bw, shown_rows, shown_cols;
	int cw, ch;          /* pixels of a shown cell */
	int map_w, map_h;
	int label_w;         /* room for the row tick labels */
	const char *const *row_lab, *const *col_lab; /* drawn, or NULL */
	int col_h;           /* room under the map for the column labels */
} panel;

static void panel_plan(panel *p, const hm_slice *s, int grid,
		       const hm_labels *lab, canvas *c)
{
	uint64_t most = grid ? GRID_CELLS : MAX_CELLS;
	int side = grid ? GRID_SIDE : MIN_SIDE;
	p->s = s;
	hm_blocks(s->rows, s->cols, most, most, &p->bh, &p->bw);
	p->shown_rows = (s->rows + p->bh - 1) / p->bh;
	p->shown_cols = (s->cols + p->bw - 1) / p->bw;
	p->cw = (int)((side + p->shown_cols - 1) / p->shown_cols);
	p->ch = (int)((side + p->shown_rows - 1) / p->shown_rows);
	p->cw = p->cw < 1 ? 1 : p->cw;
	p->ch = p->ch < 1 ? 1 : p->ch;
	/* tokens name up to LABELLED rows and columns, each a line high */
	int fh = c->font->h;
	if (lab && lab->row && p->bh == 1 && s->rows <= LABELLED && p->ch < fh)
		p->ch = fh;
	if (lab && lab->col && p->bw == 1 && s->cols <= LABELLED && p->cw < fh)
		p->cw = fh;
	p->map_w = (int)p->shown_cols * p->cw;
	p->map_h = (int)p->shown_rows * p->ch;
	char last[24];
	snprintf(last, sizeof last, "%llu",
		 (unsigned long long)hm_query_of(s, s->rows - 1));
	p->label_w = text_w(c, last) + TICK + 3;
	p->col_h = c->font->h;
	/* tokens name the rows and columns where each has a cell's room */
	char buf[HM_ROW_LABEL + 1];
	p->row_lab = lab && lab->row && p->ch >= fh ? lab->row : NULL;
	p->col_lab = lab && lab->col && p->cw >= fh ? lab->col : NULL;
	for (uint64_t r = 0; p->row_lab && r < s->rows; r++) {
		int w = text_w(c, hm_label_cut(p->row_lab[r], HM_ROW_LABEL,
						  buf)) + TICK + 3;
		p->label_w = w > p->label_w ? w : p->label_w;
	}
	for (uint64_t col = 0; p->col_lab && col < s->cols; col++) {
		int h = text_w(c, hm_label_cut(p->col_lab[col], HM_COL_LABEL,
						  buf)) + 2;
		p->col_h = h > p->col_h ? h : p->col_h;
	}
}

/* The map at (x, y): cells, frame, and ticks of rows (left) and columns
 * (below). */
static void panel_draw(canvas *c, const panel *p, int x, int y)
{
	const hm_slice *s = p->s;
	for (uint64_t r = 0; r < p->shown_rows; r++)
		for (uint64_t col = 0; col < p->shown_cols; col++) {
			double level = 0;
			unsigned char px[3];
			hm_kind k = hm_cell(s, r * p->bh, col * p->bw, p->bh,
					    p->bw, &level);
			hm_rgb(k, level, s->shade, px);
			int x0 = x + (int)col * p->cw, y0 = y + (int)r * p->ch;
			gdImageFilledRectangle(c->im, x0, y0, x0 + p->cw - 1,
					       y0 + p->ch - 1, rgb(c, px));
		}
	gdImageRectangle(c->im, x - 1, y - 1, x + p->map_w, y + p->map_h,
			 c->frame);
	char lab[HM_ROW_LABEL + 24];
	uint64_t step = p->row_lab ? 1 :
			tick_step(s->rows, p->map_h / (2 * c->font->h) + 1);
	for (uint64_t r = 0; r < s->rows; r += step) {
		int ty = y + (int)((double)(r + 0.5) / s->rows * p->map_h);
		gdImageLine(c->im, x - 1 - TICK, ty, x - 2, ty, c->black);
		if (p->row_lab)
			hm_label_cut(p->row_lab[r], HM_ROW_LABEL, lab);
		else
			snprintf(lab, sizeof lab, "%llu",
				 (unsigned long long)hm_query_of(s, r));
		text(c, x - 3 - TICK - text_w(c, lab), ty - c->font->h / 2, lab);
	}
	step = p->col_lab ? 1 : tick_step(s->cols, p->map_w / (6 * c->font->w) + 1);
	for (uint64_t col = 0; col < s->cols; col += step) {
		int tx = x + (int)((double)(col + 0.5) / s->cols * p->map_w);
		gdImageLine(c->im, tx, y + p->map_h + 1, tx,
			    y + p->map_h + TICK, c->black);
		if (p->col_lab) { /* read upwards, under its column */
			hm_label_cut(p->col_lab[col], HM_COL_LABEL, lab);
			gdImageStringUp(c->im, c->font, tx - c->font->h / 2,
					y + p->map_h + TICK + 1 + text_w(c, lab),
					(unsigned char *)lab, c->black);
			continue;
		}
		snprintf(lab, sizeof lab, "%llu", (unsigned long long)col);
		text(c, tx - text_w(c, lab) / 2, y + p->map_h + TICK + 1, lab);
	}
}

/* The colour bar at (x, y), h high, ticked in the values of s's ramp. */
static void bar_draw(canvas *c, const hm_slice *s, int x, int y, int h)
{
	for (int i = 0; i < h; i++) {
		unsigned char px[3];
		hm_rgb(HM_FINITE, 1.0 - (double)i / (h > 1 ? h - 1 : 1), s->shade,
		       px);
		gdImageLine(c->im, x, y + i, x + BAR_W - 1, y + i, rgb(c, px));
	}
	gdImageRectangle(c->im, x - 1, y - 1, x + BAR_W, y + h, c->frame);
	/* ticks two lines apart at least, so that their labels stay apart */
	double ticks[18];
	int most = h / (2 * c->font->h);
	int n = hm_bar_ticks(s, ticks, most < 2 ? 2 : most > 16 ? 16 : most);
	/* an end the values pass (a range given, the log scale's floor) is
	 * ticked and says so: every value beyond it has its colour */
	int below = s->any_finite && s->lo < s->vlo,
	    above = s->any_finite && s->hi > s->vhi, has_lo = 0, has_hi = 0;
	for (int i = 0; i < n; i++) {
		has_lo |= ticks[i] == s->vlo;
		has_hi |= ticks[i] == s->vhi;
	}
	if (below && !has_lo)
		ticks[n++] = s->vlo;
	if (above && !has_hi)
		ticks[n++] = s->vhi;
	for (int i = 0; i < n; i++) {
		int ty = y + (int)lround((1.0 - hm_level(s, ticks[i])) * (h - 1));
		/* a tick whose label would run into an end's is left out */
		int lo_y = y + h - 1, hi_y = y;
		if ((below && ticks[i] != s->vlo && lo_y - ty < c->font->h) ||
		    (above && ticks[i] != s->vhi && ty - hi_y < c->font->h))
			continue;
		gdImageLine(c->im, x + BAR_W + 1, ty, x + BAR_W + TICK, ty,
			    c->black);
		const char *end = below && ticks[i] == s->vlo ? "<=" :
				  above && ticks[i] == s->vhi ? ">=" : "";
		char lab[40];
		snprintf(lab, sizeof lab, "%s%.3g", end, ticks[i]);
		text(c, x + BAR_W + TICK + BAR_GAP, ty - c->font->h / 2, lab);
	}
}

/* The colours off the ramp that the maps use, under the bar. */
static void legend_draw(canvas *c, const hm_slice *const *maps, int n, int x,
			int y)
{
	static const struct {
		hm_kind k;
		const char *what;
	} keys[] = {{HM_MASKED, "masked"}, {HM_PADDING, "padding"},
		    {HM_NEGINF, "-inf"}, {HM_POSINF, "+inf"}, {HM_NAN, "NaN"}};
	for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
		int used = 0;
		for (int m = 0; m < n && !used; m++)
			used = hm_uses(maps[m], keys[i].k);
		if (!used)
			continue;
		unsigned char px[3];
		hm_rgb(keys[i].k, 0, HM_SHADE_LINEAR, px);
		gdImageFilledRectangle(c->im, x, y, x + 10, y + 10, rgb(c, px));
		gdImageRectangle(c->im, x, y, x + 10, y + 10, c->frame);
		text(c, x + 15, y, keys[i].what);
		y += c->font->h + 4;
	}
}

/* The image as PNG into f (gd encodes it in memory through libpng). */
static int put_png(gdImagePtr im, FILE *f, char *err, size_t errlen)
{
	int size = 0;
	void *data = gdImagePngPtrEx(im, &size, 6);
	if (!data) {
		snprintf(err, errlen, "libgd could not encode the PNG");
		return -1;
	}
	int ok = fwrite(data, 1, (size_t)size, f) == (size_t)size;
	int e = errno;
	gdFree(data);
	if (!ok)
		snprintf(err, errlen, "write error: %s", strerror(e));
	return ok ? 0 : -1;
}

int hm_png(FILE *f, const hm_slice *const *maps, const char *const *captions,
	   int n, const hm_figure *fig, char *err, size_t errlen)
{
	canvas c = {.font = gdFontGetSmall()};
	int grid = n > 1, gcols = 1;
	while (gcols * gcols < n)
		gcols++;
	int grows = (n + gcols - 1) / gcols;
	panel p[HM_MAX_PANELS];
	int pw = 0, ph = 0, lw = 0, lh = 0; /* the largest panel's map, labels */
	for (int i = 0; i < n; i++) {
		panel_plan(&p[i], maps[i], grid, fig->lab, &c);
		pw = p[i].map_w > pw ? p[i].map_w : pw;
		ph = p[i].map_h > ph ? p[i].map_h : ph;
		lw = p[i].label_w > lw ? p[i].label_w : lw;
		lh = p[i].col_h > lh ? p[i].col_h : lh;
	}
	int fh = c.font->h, cap = grid ? fh + 4 : 0;
	int cell_w = lw + pw + GAP, cell_h = cap + ph + TICK + lh + GAP / 2;
	int left = PAD + fh + 6, top = PAD + fh + 8;
	int bar_x = left + gcols * cell_w, bar_h = grows * cell_h - GAP / 2;
	int width = bar_x + BAR_W + TICK + BAR_GAP + 10 * c.font->w + PAD;
	/* maps drawn in blocks say so: a cell is then its block's mean */
	uint64_t bh = 1, bw = 1;
	for (int i = 0; i < n; i++) {
		bh = p[i].bh > bh ? p[i].bh : bh;
		bw = p[i].bw > bw ? p[i].bw : bw;
	}
	char title[AT_MAX_ATTR_BYTES + 300];
	snprintf(title, sizeof title, "%s", fig->title);
	if (bh > 1 || bw > 1) {
		size_t at = strlen(title);
		snprintf(title + at, sizeof title - at, "  (a cell: the mean of "
			 "%llux%llu)", (unsigned long long)bh,
			 (unsigned long long)bw);
	}
	if (width < 2 * PAD + text_w(&c, title))
		width = 2 * PAD + text_w(&c, title);
	int height = top + grows * cell_h + fh + PAD;
	if ((double)width * height > 64e6) {
		snprintf(err, errlen, "a figure of %dx%d pixels is too large",
			 width, height);
		return -1;
	}
	c.im = gdImageCreateTrueColor(width, height);
	if (!c.im) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	c.white = gdTrueColor(255, 255, 255);
	c.black = gdTrueColor(0, 0, 0);
	c.frame = gdTrueColor(HM_FRAME_GREY, HM_FRAME_GREY, HM_FRAME_GREY);
	gdImageFilledRectangle(c.im, 0, 0, width - 1, height - 1, c.white);
	gdImageString(c.im, gdFontGetSmall(), PAD, PAD, (unsigned char *)title,
		      c.black);
	for (int i = 0; i < n; i++) {
		int x = left + (i % gcols) * cell_w + lw;
		int y = top + (i / gcols) * cell_h;
		if (grid)
			text(&c, x, y, captions[i]);
		panel_draw(&c, &p[i], x, y + cap);
	}
	/* axis names: columns under the grid, rows up its left side */
	text(&c, left + lw + (gcols * cell_w - GAP) / 2 - text_w(&c, fig->xname) / 2,
	     top + grows * cell_h, fig->xname);
	gdImageStringUp(c.im, c.font, PAD, top + (grows * cell_h) / 2 +
			text_w(&c, fig->yname) / 2, (unsigned char *)fig->yname,
			c.black);
	/* the bar leaves room under it for the legend, a line a kind off the ramp */
	int legend = 5 * (fh + 4);
	bar_draw(&c, maps[0], bar_x, top + cap, bar_h - cap - legend);
	legend_draw(&c, maps, n, bar_x, top + bar_h - legend + 8);
	int rc = put_png(c.im, f, err, errlen);
	gdImageDestroy(c.im);
	return rc;
}

#else

int hm_png(FILE *f, const hm_slice *const *maps, const char *const *captions,
	   int n, const hm_figure *fig, char *err, size_t errlen)
{
	(void)f, (void)maps, (void)captions, (void)n, (void)fig;
	snprintf(err, errlen, "this build has no PNG support (libgd)");
	return -1;
}

#endif
