/* heatmap.c - shaded text and PNG maps of a 2-D slice (see heatmap.h). */
#include "view/heatmap.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef ANDREA_PNG
#include <png.h>
#include <setjmp.h>
#endif

int hm_parse_select(const char *s, uint64_t *sel, int max)
{
	int n = 0;
	if (!*s)
		return 0;
	for (;;) {
		if (*s < '0' || *s > '9' || n == max)
			return -1;
		uint64_t v = 0;
		for (; *s >= '0' && *s <= '9'; s++) {
			if (v > (UINT64_MAX - 9) / 10)
				return -1;
			v = v * 10 + (uint64_t)(*s - '0');
		}
		sel[n++] = v;
		if (!*s)
			return n;
		if (*s++ != ',')
			return -1;
	}
}

int hm_leading(int rank)
{
	return rank > 2 ? rank - 2 : 0;
}

int hm_check_select(int rank, const uint64_t *dims, const uint64_t *sel,
		    int nsel, char *err, size_t errlen)
{
	int lead = hm_leading(rank);
	if (nsel != lead) {
		snprintf(err, errlen, "%d ind%s for %d leading ax%s", nsel,
			 nsel == 1 ? "ex" : "ices", lead, lead == 1 ? "is" : "es");
		return -1;
	}
	for (int a = 0; a < lead; a++)
		if (sel[a] >= dims[a]) {
			snprintf(err, errlen,
				 "index %llu is past axis %d (size %llu)",
				 (unsigned long long)sel[a], a,
				 (unsigned long long)dims[a]);
			return -1;
		}
	return 0;
}

void hm_slice_init(hm_slice *s, const at_tensor *t, const uint64_t *sel)
{
	int lead = hm_leading(t->rank);
	memset(s, 0, sizeof *s);
	s->t = t;
	s->rows = t->rank >= 2 ? t->dims[t->rank - 2] : 1;
	s->cols = t->rank >= 1 ? t->dims[t->rank - 1] : 1;
	uint64_t stride = s->rows * s->cols;
	for (int a = lead - 1; a >= 0; a--) {
		s->base += sel[a] * stride;
		stride *= t->dims[a];
	}
	uint64_t n = s->rows * s->cols;
	for (uint64_t i = 0; i < n; i++) {
		double v = at_elem(t, s->base + i);
		if (!isfinite(v))
			continue;
		if (!s->any_finite || v < s->lo)
			s->lo = v;
		if (!s->any_finite || v > s->hi)
			s->hi = v;
		s->any_finite = 1;
	}
}

void hm_blocks(uint64_t rows, uint64_t cols, uint64_t max_rows,
	       uint64_t max_cols, uint64_t *bh, uint64_t *bw)
{
	if (max_rows < 1)
		max_rows = 1;
	if (max_cols < 1)
		max_cols = 1;
	*bh = rows > max_rows ? (rows + max_rows - 1) / max_rows : 1;
	*bw = cols > max_cols ? (cols + max_cols - 1) / max_cols : 1;
}

hm_kind hm_cell(const hm_slice *s, uint64_t r0, uint64_t c0, uint64_t bh,
		uint64_t bw, double *level)
{
	uint64_t r1 = r0 + bh < s->rows ? r0 + bh : s->rows;
	uint64_t c1 = c0 + bw < s->cols ? c0 + bw : s->cols;
	double sum = 0;
	uint64_t nfinite = 0;
	int pinf = 0;
	for (uint64_t r = r0; r < r1; r++)
		for (uint64_t c = c0; c < c1; c++) {
			double v = at_elem(s->t, s->base + r * s->cols + c);
			if (isnan(v))
				return HM_NAN;
			if (isinf(v))
				pinf |= v > 0;
			else {
				sum += v;
				nfinite++;
			}
		}
	if (!nfinite)
		return pinf ? HM_POSINF : HM_NEGINF;
	double mean = sum / (double)nfinite;
	if (s->hi > s->lo) {
		double l = (mean - s->lo) / (s->hi - s->lo);
		*level = l < 0 ? 0 : l > 1 ? 1 : l;
	} else {
		*level = 0.5;
	}
	return HM_FINITE;
}

/* Characters of UTF-8 text (of one- and two-byte characters), and the
 * byte length of its first n. */
static size_t chars(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return n;
}

static size_t prefix_bytes(const char *s, size_t n)
{
	size_t b = 0;
	while (s[b] && n) {
		b++;
		while (((unsigned char)s[b] & 0xc0) == 0x80)
			b++;
		n--;
	}
	return b;
}

/* The width of the widest of n labels, at most cap. */
static size_t widest(const char *const *label, uint64_t n, size_t cap)
{
	size_t w = 0;
	for (uint64_t i = 0; i < n; i++) {
		size_t c = chars(label[i]);
		w = c > w ? c : w;
	}
	return w < cap ? w : cap;
}

/* The column labels down the page above the map, after `indent` spaces. */
static void column_labels(FILE *out, const char *const *col, uint64_t cols,
			  size_t indent)
{
	size_t lines = widest(col, cols, HM_COL_LABEL);
	for (size_t k = 0; k < lines; k++) {
		fprintf(out, "%*s", (int)indent, "");
		for (uint64_t c = 0; c < cols; c++) {
			const char *at = col[c] + prefix_bytes(col[c], k);
			size_t len = prefix_bytes(at, 1);
			if (len)
				fwrite(at, 1, len, out);
			else
				putc(' ', out);
		}
		putc('\n', out);
	}
}

void hm_ascii(FILE *out, const hm_slice *s, uint64_t bh, uint64_t bw,
	      const hm_labels *lab)
{
	static const char ramp[] = HM_RAMP;
	const int nramp = (int)sizeof ramp - 1;
	const char *const *row = lab && bh == 1 ? lab->row : NULL;
	size_t width = row ? widest(row, s->rows, HM_ROW_LABEL) + 1 : 0;
	if (lab && lab->col && bw == 1)
		column_labels(out, lab->col, s->cols, width);
	for (uint64_t r = 0; r < s->rows; r += bh) {
		if (row) { /* left-aligned, cut and padded by characters */
			size_t shown = chars(row[r]) < width - 1 ? chars(row[r])
								  : width - 1;
			fwrite(row[r], 1, prefix_bytes(row[r], shown), out);
			fprintf(out, "%*s", (int)(width - shown), "");
		}
		for (uint64_t c = 0; c < s->cols; c += bw) {
			double level = 0;
			int ch;
			switch (hm_cell(s, r, c, bh, bw, &level)) {
			case HM_NAN:
				ch = HM_CHAR_NAN;
				break;
			case HM_POSINF:
				ch = HM_CHAR_POSINF;
				break;
			case HM_NEGINF:
				ch = HM_CHAR_NEGINF;
				break;
			default: {
				int i = (int)(level * nramp);
				ch = ramp[i >= nramp ? nramp - 1 : i];
			}
			}
			putc(ch, out);
		}
		putc('\n', out);
	}
}

unsigned hm_png_scale(uint64_t rows, uint64_t cols)
{
	uint64_t side = rows > cols ? rows : cols;
	if (side >= HM_PNG_MIN_SIDE)
		return 1;
	return (unsigned)((HM_PNG_MIN_SIDE + side - 1) / side);
}

/* Colour of one cell: the ramp through three stops, or a fixed colour. */
static void cell_rgb(hm_kind k, double level, unsigned char *px)
{
	static const unsigned char stops[3][3] = {HM_RGB_LOW, HM_RGB_MID,
						  HM_RGB_HIGH};
	static const unsigned char neginf[3] = HM_RGB_NEGINF;
	static const unsigned char posinf[3] = HM_RGB_POSINF;
	static const unsigned char nan[3] = HM_RGB_NAN;
	const unsigned char *fixed = k == HM_NAN ? nan :
				     k == HM_POSINF ? posinf :
				     k == HM_NEGINF ? neginf : NULL;
	if (fixed) {
		memcpy(px, fixed, 3);
		return;
	}
	int seg = level < 0.5 ? 0 : 1;
	double u = level < 0.5 ? level * 2 : (level - 0.5) * 2;
	for (int i = 0; i < 3; i++)
		px[i] = (unsigned char)lround(stops[seg][i] +
					      u * (stops[seg + 1][i] - stops[seg][i]));
}

#ifdef ANDREA_PNG

typedef struct {
	jmp_buf jb;
	char msg[200];
} png_trap;

static void png_fail(png_structp png, png_const_charp msg)
{
	png_trap *trap = png_get_error_ptr(png);
	snprintf(trap->msg, sizeof trap->msg, "%s", msg);
	longjmp(trap->jb, 1);
}

static void png_warn(png_structp png, png_const_charp msg)
{
}

/* What the rows of one PNG need; kept in memory across the longjmp. */
typedef struct {
	const hm_slice *s;
	unsigned scale;
	uint32_t width, height;
	unsigned char *row;
} png_job;

static void png_rows(png_structp png, png_infop info, const png_job *j)
{
	const hm_slice *s = j->s;
	png_set_IHDR(png, info, j->width, j->height, 8, PNG_COLOR_TYPE_RGB,
		     PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
		     PNG_FILTER_TYPE_DEFAULT);
	png_write_info(png, info);
	for (uint64_t r = 0; r < s->rows; r++) {
		for (uint64_t c = 0; c < s->cols; c++) {
			double level = 0;
			unsigned char px[3];
			hm_kind kind = hm_cell(s, r, c, 1, 1, &level);
			cell_rgb(kind, level, px);
			for (unsigned k = 0; k < j->scale; k++)
				memcpy(j->row + (c * j->scale + k) * 3, px, 3);
		}
		for (unsigned k = 0; k < j->scale; k++)
			png_write_row(png, j->row);
	}
	png_write_end(png, NULL);
}

int hm_png(FILE *f, const hm_slice *s, char *err, size_t errlen)
{
	png_job job = {.s = s, .scale = hm_png_scale(s->rows, s->cols)};
	if (s->rows * job.scale > HM_PNG_MAX_SIDE ||
	    s->cols * job.scale > HM_PNG_MAX_SIDE) {
		snprintf(err, errlen, "a %llux%llu map is too large for a PNG "
			 "(at most %d pixels a side)", (unsigned long long)s->rows,
			 (unsigned long long)s->cols, HM_PNG_MAX_SIDE);
		return -1;
	}
	job.width = (uint32_t)(s->cols * job.scale);
	job.height = (uint32_t)(s->rows * job.scale);
	job.row = malloc((size_t)job.width * 3);
	png_trap trap = {.msg = ""};
	png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &trap,
						  png_fail, png_warn);
	png_infop info = png ? png_create_info_struct(png) : NULL;
	if (!job.row || !png || !info) {
		snprintf(err, errlen, "out of memory");
		png_destroy_write_struct(&png, &info);
		free(job.row);
		return -1;
	}
	int failed = 0;
	if (setjmp(trap.jb)) {
		failed = 1;
		snprintf(err, errlen, "libpng: %s", trap.msg);
	} else {
		png_init_io(png, f);
		png_rows(png, info, &job);
	}
	png_destroy_write_struct(&png, &info);
	free(job.row);
	return failed ? -1 : 0;
}

#else

int hm_png(FILE *f, const hm_slice *s, char *err, size_t errlen)
{
	(void)cell_rgb;
	snprintf(err, errlen, "this build has no PNG support (libpng)");
	return -1;
}

#endif
