/* heatmap.c - shaded text and PNG maps of a 2-D slice (see heatmap.h). */
#include "view/heatmap.h"
#include "view/labels.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>


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

/* Whether entry (r, c) of s is one a causal mask hid: a key after row
 * r's query, holding what a mask leaves there (0 in weights, -inf or the
 * fill in scores).  Anything else there is drawn as a value: the weight
 * a finite fill lets leak onto the future shows. */
static int masked(const hm_slice *s, uint64_t r, uint64_t c)
{
	if (!s->causal)
		return 0;
	int hidden = s->rows_at.n ? (long)c > at_positions_nth(&s->rows_at, r)
				  : c + s->rows > r + s->cols;
	if (!hidden)
		return 0;
	double v = at_elem(s->t, s->base + r * s->cols + c);
	return v == 0 || (isinf(v) && v < 0) ||
	       (s->has_fill && v == (double)(float)s->fill);
}

uint64_t hm_query_of(const hm_slice *s, uint64_t r)
{
	return s->rows_at.n ? (uint64_t)at_positions_nth(&s->rows_at, r) : r;
}

/* Whether entry (r, c) of s lies past its row's length in a padded
 * batch: its query does, or where the columns are keys, its key. */
static int padded(const hm_slice *s, uint64_t r, uint64_t c)
{
	return s->valid && (hm_query_of(s, r) >= s->valid ||
			    (s->keys && c >= s->valid));
}

/* The length of the batch row sel picks of a [...,B,...,T,X] record t
 * (B its hm_row_axis) where its `lengths` attribute pads the rows (T the
 * rows' axis); else 0. */
static uint64_t row_length(const at_tensor *t, const uint64_t *sel)
{
	int a = hm_row_axis(t);
	uint64_t B = t->rank >= 3 ? t->dims[a] : 0, len[AT_MAX_VALUE];
	char err[200];
	if (B < 1 ||
	    at_attr_lengths(&t->attrs, B, t->dims[t->rank - 2], len, err,
			    sizeof err) != 1)
		return 0;
	return len[sel[a]];
}

/* The queries of t's rows where a capture kept some of them (its
 * `positions` attribute, naming as many as t has rows); else none. */
static void rows_of(hm_slice *s, const at_tensor *t)
{
	const char *attr = at_attr_get(&t->attrs, "positions");
	s->rows_at.n = 0;
	if (!attr || at_positions_parse(attr, strlen(attr), INT_MAX,
				       &s->rows_at) < 0 ||
	    at_positions_count(&s->rows_at) != s->rows)
		s->rows_at.n = 0;
}

void hm_slice_init(hm_slice *s, const at_tensor *t, const uint64_t *sel,
		   int causal)
{
	int lead = hm_leading(t->rank);
	memset(s, 0, sizeof *s);
	s->t = t;
	s->rows = t->rank >= 2 ? t->dims[t->rank - 2] : 1;
	s->cols = t->rank >= 1 ? t->dims[t->rank - 1] : 1;
	s->causal = causal;
	s->has_fill = at_attr_double(&t->attrs, "fill", &s->fill) == 0;
	rows_of(s, t);
	s->valid = row_length(t, sel);
	s->keys = hm_has_keys(t);
	uint64_t stride = s->rows * s->cols;
	for (int a = lead - 1; a >= 0; a--) {
		s->base += sel[a] * stride;
		stride *= t->dims[a];
	}
	for (uint64_t r = 0; r < s->rows; r++)
		for (uint64_t c = 0; c < s->cols; c++) {
			double v = at_elem(t, s->base + r * s->cols + c);
			hm_kind k = padded(s, r, c) ? HM_PADDING :
				    masked(s, r, c) ? HM_MASKED :
				    isnan(v) ? HM_NAN :
				    isinf(v) ? (v > 0 ? HM_POSINF : HM_NEGINF) :
					       HM_FINITE;
			s->uses |= 1u << k;
			if (k != HM_FINITE)
				continue;
			if (!s->any_finite || v < s->lo)
				s->lo = v;
			if (!s->any_finite || v > s->hi)
				s->hi = v;
			if (v > 0 && (s->min_pos == 0 || v < s->min_pos))
				s->min_pos = v;
			s->any_finite = 1;
		}
	s->shade = HM_SHADE_LINEAR;
	s->vlo = s->lo;
	s->vhi = s->hi;
}

int hm_slice_shade(hm_slice *s, hm_shade shade, const double *range,
		   char *err, size_t errlen)
{
	s->shade = shade;
	if (range) {
		s->vlo = range[0];
		s->vhi = range[1];
	} else if (shade == HM_SHADE_LOG) {
		s->vhi = s->hi;
		s->vlo = s->min_pos > s->hi / 1e4 ? s->min_pos : s->hi / 1e4;
	} else if (shade == HM_SHADE_SIGNED) {
		s->vhi = fabs(s->lo) > fabs(s->hi) ? fabs(s->lo) : fabs(s->hi);
		s->vlo = -s->vhi;
	} else {
		s->vlo = s->lo;
		s->vhi = s->hi;
	}
	if (shade == HM_SHADE_LOG && (range || s->any_finite) &&
	    !(s->vlo > 0 && s->vhi > 0)) {
		snprintf(err, errlen, "a log scale needs positive values "
			 "(the range is %g to %g)", s->vlo, s->vhi);
		return -1;
	}
	return 0;
}

double hm_level(const hm_slice *s, double v)
{
	double lo = s->vlo, hi = s->vhi, l;
	if (!(hi > lo))
		return 0.5;
	if (s->shade == HM_SHADE_LOG)
		l = v > 0 ? log(v / lo) / log(hi / lo) : 0;
	else
		l = (v - lo) / (hi - lo);
	l = l < 0 ? 0 : l > 1 ? 1 : l;
	return s->shade == HM_SHADE_SQRT ? sqrt(l) : l;
}

/* Widens into's statistics (lo, hi, min_pos, uses) by from's. */
static void widen(hm_slice *into, const hm_slice *from)
{
	into->uses |= from->uses;
	if (!from->any_finite)
		return;
	if (!into->any_finite || from->lo < into->lo)
		into->lo = from->lo;
	if (!into->any_finite || from->hi > into->hi)
		into->hi = from->hi;
	if (from->min_pos > 0 &&
	    (into->min_pos == 0 || from->min_pos < into->min_pos))
		into->min_pos = from->min_pos;
	into->any_finite = 1;
}

const char *hm_shade_name(hm_shade s)
{
	static const char *const names[HM_SHADES] = {"linear", "sqrt", "log",
						     "signed"};
	return names[s];
}

int hm_has_keys(const at_tensor *t)
{
	return t->rank >= 2 &&
	       (strcmp(t->name, "scores") == 0 || strcmp(t->name, "attn") == 0);
}

int hm_is_causal(const at_tensor *t)
{
	const char *m = at_attr_get(&t->attrs, "mask");
	return hm_has_keys(t) && m && strcmp(m, "causal") == 0;
}

hm_shade hm_record_shade(const at_tensor *t)
{
	/* weights span decades; a head's share of a logit and a patch's
	 * effect are signed, their zero meaning none */
	if (strcmp(t->name, "attn") == 0)
		return HM_SHADE_LOG;
	if (strcmp(t->name, "attribution") == 0 || strcmp(t->name, "effect") == 0)
		return HM_SHADE_SIGNED;
	return HM_SHADE_LINEAR;
}

int hm_record_maps(const at_tensor *t, const uint64_t *sel, int nsel, int grid,
		   hm_shade shade, const double *range, hm_slice *maps,
		   char *err, size_t errlen)
{
	uint64_t at[AT_MAX_RANK + 1] = {0};
	memcpy(at, sel, (size_t)nsel * sizeof *at);
	int count = grid ? (int)t->dims[nsel] : 1;
	hm_slice joint;
	for (int i = 0; i < count; i++) {
		at[nsel] = (uint64_t)i;
		hm_slice_init(&maps[i], t, at, hm_is_causal(t));
		if (i == 0)
			joint = maps[0];
		widen(&joint, &maps[i]);
	}
	for (int i = 0; i < count; i++) { /* one scale: the joint statistics */
		unsigned uses = maps[i].uses;
		widen(&maps[i], &joint);
		maps[i].uses = uses; /* a legend names what the maps hold */
		if (hm_slice_shade(&maps[i], shade, range, err, errlen) < 0)
			return -1;
	}
	return count;
}

int hm_uses(const hm_slice *s, hm_kind k)
{
	return (s->uses >> k) & 1;
}

/* The largest nice step (1, 2 or 5 times a power of ten) that cuts
 * [lo, hi] into at most `most` pieces. */
static double nice_step(double lo, double hi, int most)
{
	double raw = (hi - lo) / most, p = pow(10, floor(log10(raw)));
	for (int i = 0; i < 4; i++) {
		static const double m[4] = {1, 2, 5, 10};
		if (m[i] * p >= raw)
			return m[i] * p;
	}
	return 10 * p;
}

int hm_bar_ticks(const hm_slice *s, double *ticks, int max)
{
	double lo = s->vlo, hi = s->vhi;
	int n = 0;
	if (!(hi > lo)) { /* one value; none where the map holds none */
		ticks[0] = lo;
		return isfinite(lo) && s->any_finite ? 1 : 0;
	}
	if (s->shade == HM_SHADE_LOG) {
		double first = pow(10, ceil(log10(lo) - 1e-9));
		if (first > 2 * lo) /* the low end, where no decade is near */
			ticks[n++] = lo;
		/* every k-th decade, counted down from the top one, so that
		 * the ticks reach the top end */
		double e0 = log10(first), top = floor(log10(hi) + 1e-9);
		double k = ceil((top - e0 + 1) / (max - n > 1 ? max - n : 1));
		k = k > 1 ? k : 1;
		for (double e = top - k * floor((top - e0) / k); e <= top + 1e-9 &&
		     n < max; e += k)
			ticks[n++] = pow(10, e);
		if (n < 2) { /* less than a decade and no low end: the ends */
			ticks[0] = lo;
			ticks[1] = hi;
			n = 2;
		}
		return n;
	}
	double step = nice_step(lo, hi, max - 1 < 5 ? (max > 2 ? max - 1 : 1) : 5);
	for (double v = ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9 &&
	     n < max; v += step)
		ticks[n++] = fabs(v) < step * 1e-9 ? 0 : v;
	return n;
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
	int pinf = 0, ninf = 0, pad = 0;
	for (uint64_t r = r0; r < r1; r++)
		for (uint64_t c = c0; c < c1; c++) {
			if (padded(s, r, c)) {
				pad = 1;
				continue;
			}
			if (masked(s, r, c))
				continue;
			double v = at_elem(s->t, s->base + r * s->cols + c);
			if (isnan(v))
				return HM_NAN;
			if (isinf(v)) {
				pinf |= v > 0;
				ninf |= v < 0;
			} else {
				sum += v;
				nfinite++;
			}
		}
	if (!nfinite)
		return pinf ? HM_POSINF : ninf ? HM_NEGINF :
		       pad ? HM_PADDING : HM_MASKED;
	*level = hm_level(s, sum / (double)nfinite);
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
			case HM_MASKED:
				ch = HM_CHAR_NEGINF;
				break;
			case HM_PADDING:
				ch = HM_CHAR_PADDING;
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

void hm_rgb(hm_kind k, double level, hm_shade shade, unsigned char *px)
{
	static const unsigned char ramp[3][3] = {HM_RGB_LOW, HM_RGB_MID,
						 HM_RGB_HIGH};
	static const unsigned char sign[3][3] = {HM_RGB_NEGATIVE, HM_RGB_ZERO,
						 HM_RGB_POSITIVE};
	const unsigned char(*stops)[3] = shade == HM_SHADE_SIGNED ? sign : ramp;
	static const unsigned char neginf[3] = HM_RGB_NEGINF;
	static const unsigned char posinf[3] = HM_RGB_POSINF;
	static const unsigned char nan[3] = HM_RGB_NAN;
	static const unsigned char hidden[3] = HM_RGB_MASKED;
	static const unsigned char padding[3] = HM_RGB_PADDING;
	const unsigned char *fixed = k == HM_NAN ? nan :
				     k == HM_POSINF ? posinf :
				     k == HM_NEGINF ? neginf :
				     k == HM_MASKED ? hidden :
				     k == HM_PADDING ? padding : NULL;
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
