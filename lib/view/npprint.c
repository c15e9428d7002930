/* npprint.c - NumPy-compatible array text (see npprint.h).
 *
 * The array layout of numpy.array2string, written line by line instead of
 * built as one string; the digits of each float32 are f32fmt.c's.
 */
#include "view/npprint.h"
#include "view/f32fmt.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NP_LINEWIDTH 75
#define NP_PRECISION 8
#define NP_THRESHOLD 1000
#define NP_EDGE 3

/* ---- array layout ---- */

/* How every element of one array is written: NumPy's FloatingFormat and
 * IntegerFormat, fitted to the elements that will be shown. */
typedef struct {
	at_dtype dtype;
	int sci;
	int pad_left, pad_right;
	int precision; /* sci: digits after the point */
	int exp_size;
	int int_width;
	/* while fitting */
	int any_nonzero, any_finite, any_nonfinite, neg_inf;
	float max_abs, min_abs;
	long long imin, imax;
	int any;
} np_fmt;

typedef struct {
	FILE *out;
	const at_tensor *t;
	np_fmt fmt;
	int summary;
	uint64_t stride[AT_MAX_RANK];
	char *line;
	size_t len, cap;
	int oom; /* a line could not grow: the rest is dropped */
} np_printer;

static float get_f32(const at_tensor *t, uint64_t i)
{
	return ((const float *)t->data)[i];
}

static long long get_int(const at_tensor *t, uint64_t i)
{
	if (t->dtype == AT_I32)
		return ((const int32_t *)t->data)[i];
	return ((const uint8_t *)t->data)[i];
}

/* Calls fn on every element shown: all of them, or with a summary only the
 * NP_EDGE leading and trailing indices of each axis longer than 2*NP_EDGE.
 * Elements come in row-major order. */
static void each_shown(np_printer *p, void (*fn)(np_printer *, uint64_t))
{
	const at_tensor *t = p->t;
	int rank = t->rank;
	uint64_t idx[AT_MAX_RANK] = {0};
	for (;;) {
		uint64_t off = 0;
		for (int a = 0; a < rank; a++)
			off += idx[a] * p->stride[a];
		fn(p, off);
		int a = rank - 1;
		for (; a >= 0; a--) {
			uint64_t d = t->dims[a];
			idx[a]++;
			if (p->summary && d > 2 * NP_EDGE && idx[a] == NP_EDGE)
				idx[a] = d - NP_EDGE;
			if (idx[a] < d)
				break;
			idx[a] = 0;
		}
		if (a < 0)
			return;
	}
}

/* First pass: magnitudes, and which kinds of value occur. */
static void fit_scan(np_printer *p, uint64_t i)
{
	np_fmt *f = &p->fmt;
	if (f->dtype != AT_F32) {
		long long v = get_int(p->t, i);
		if (!f->any || v < f->imin)
			f->imin = v;
		if (!f->any || v > f->imax)
			f->imax = v;
		f->any = 1;
		return;
	}
	float v = get_f32(p->t, i);
	if (!isfinite(v)) {
		f->any_nonfinite = 1;
		if (isinf(v) && v < 0)
			f->neg_inf = 1;
		return;
	}
	f->any_finite = 1;
	if (v != 0) {
		float a = fabsf(v);
		if (!f->any_nonzero || a > f->max_abs)
			f->max_abs = a;
		if (!f->any_nonzero || a < f->min_abs)
			f->min_abs = a;
		f->any_nonzero = 1;
	}
}

/* Second pass: the widest integer part, fraction and exponent. */
static void fit_widths(np_printer *p, uint64_t i)
{
	np_fmt *f = &p->fmt;
	float v = get_f32(p->t, i);
	if (!isfinite(v))
		return;
	char s[128];
	if (f->sci) {
		np_fmt_scientific(s, v, NP_PRECISION, 0, 0, 0);
		char *dot = strchr(s, '.'), *e = strchr(s, 'e');
		int il = (int)(dot - s), fl = (int)(e - dot - 1);
		int xl = (int)strlen(e + 1) - 1; /* digits after the sign */
		if (il > f->pad_left)
			f->pad_left = il;
		if (fl > f->precision)
			f->precision = fl;
		if (xl > f->exp_size)
			f->exp_size = xl;
	} else {
		np_fmt_positional(s, v, NP_PRECISION, 0, 0);
		char *dot = strchr(s, '.');
		int il = (int)(dot - s), fl = (int)strlen(dot + 1);
		if (il > f->pad_left)
			f->pad_left = il;
		if (fl > f->pad_right)
			f->pad_right = fl;
	}
}

static void fit(np_printer *p)
{
	np_fmt *f = &p->fmt;
	memset(f, 0, sizeof *f);
	f->dtype = p->t->dtype;
	each_shown(p, fit_scan);
	if (f->dtype != AT_F32) {
		char a[32], b[32];
		int la = snprintf(a, sizeof a, "%lld", f->imin);
		int lb = snprintf(b, sizeof b, "%lld", f->imax);
		f->int_width = la > lb ? la : lb;
		return;
	}
	if (f->any_nonzero) {
		float ratio = f->max_abs / f->min_abs; /* in float32, as NumPy */
		f->sci = f->max_abs >= 1e8 || (double)f->min_abs < 1e-4 ||
			 ratio > 1000.0f;
	}
	if (f->any_finite) {
		f->exp_size = -1;
		each_shown(p, fit_widths);
		if (f->sci)
			f->pad_right = f->exp_size + 2 + f->precision;
	}
	if (f->any_nonfinite) {
		int inflen = 3 + f->neg_inf, offset = f->pad_right + 1;
		if (3 - offset > f->pad_left)
			f->pad_left = 3 - offset;
		if (inflen - offset > f->pad_left)
			f->pad_left = inflen - offset;
	}
}

static int fmt_elem(const np_fmt *f, const at_tensor *t, uint64_t i, char *buf)
{
	if (f->dtype != AT_F32)
		return sprintf(buf, "%*lld", f->int_width, get_int(t, i));
	float v = get_f32(t, i);
	if (!isfinite(v)) {
		const char *s = isnan(v) ? "nan" : v < 0 ? "-inf" : "inf";
		return sprintf(buf, "%*s", f->pad_left + f->pad_right + 1, s);
	}
	if (f->sci)
		return np_fmt_scientific(buf, v, f->precision, 1, f->pad_left,
				      f->exp_size);
	return np_fmt_positional(buf, v, NP_PRECISION, f->pad_left, f->pad_right);
}

static void put(np_printer *p, const char *s, size_t n)
{
	if (p->oom)
		return;
	if (p->len + n + 1 > p->cap) {
		size_t cap = (p->len + n + 1) * 2;
		char *l = realloc(p->line, cap);
		if (!l) {
			p->oom = 1;
			return;
		}
		p->line = l;
		p->cap = cap;
	}
	memcpy(p->line + p->len, s, n);
	p->len += n;
}

static void put_spaces(np_printer *p, int n)
{
	for (; n > 0; n--)
		put(p, " ", 1);
}

static void end_line(np_printer *p)
{
	if (p->oom)
		return;
	fwrite(p->line, 1, p->len, p->out);
	putc('\n', p->out);
	p->len = 0;
}

/* Adds one word to a row, first breaking the line (trailing blanks
 * dropped) when the word would pass `width` and the line holds more than
 * its indent. */
static void add_word(np_printer *p, const char *w, size_t wl, int width,
		     int hang)
{
	if (p->len + wl > (size_t)width && p->len > (size_t)hang) {
		while (p->len > 0 && p->line[p->len - 1] == ' ')
			p->len--;
		end_line(p);
		put_spaces(p, hang);
	}
	put(p, w, wl);
}

/* Writes the sub-array at offset off starting at axis `axis`; the line
 * already holds `hang` - 1 columns, and rows may use `width` columns. */
static void print_axis(np_printer *p, uint64_t off, int axis, int hang,
		       int width)
{
	const at_tensor *t = p->t;
	uint64_t d = t->dims[axis];
	int left = t->rank - axis;
	int summary = p->summary && d > 2 * NP_EDGE;
	uint64_t nitems = summary ? 2 * NP_EDGE + 1 : d;
	char w[160];

	put(p, "[", 1);
	for (uint64_t k = 0; k < nitems; k++) {
		int dots = summary && k == NP_EDGE;
		uint64_t i = !summary ? k : k < NP_EDGE ? k : d - (nitems - k);
		uint64_t sub = off + i * p->stride[axis];
		if (left == 1) {
			if (dots)
				add_word(p, "...", 3, width - 1, hang);
			else
				add_word(p, w, (size_t)fmt_elem(&p->fmt, t, sub, w),
					 width - 1, hang);
			if (k + 1 < nitems)
				put(p, " ", 1);
			continue;
		}
		if (k > 0)
			put_spaces(p, hang);
		if (dots)
			put(p, "...", 3);
		else
			print_axis(p, sub, axis + 1, hang + 1, width - 1);
		if (k + 1 < nitems)
			for (int nl = 0; nl < left - 1; nl++)
				end_line(p);
	}
	put(p, "]", 1);
}

int np_print(FILE *out, const at_tensor *t, int full)
{
	np_printer p = {.out = out, .t = t};
	uint64_t n = at_numel(t);
	if (n == 0) {
		fputs("[]\n", out);
		return 0;
	}
	p.summary = !full && n > NP_THRESHOLD;
	uint64_t s = 1;
	for (int a = t->rank - 1; a >= 0; a--) {
		p.stride[a] = s;
		s *= t->dims[a];
	}
	fit(&p);
	if (t->rank == 0) {
		char w[160];
		fmt_elem(&p.fmt, t, 0, w);
		fprintf(out, "%s\n", w);
		return 0;
	}
	print_axis(&p, 0, 0, 1, NP_LINEWIDTH);
	end_line(&p);
	free(p.line);
	return p.oom ? -1 : 0;
}
