/* npprint.c - NumPy-compatible array text (see npprint.h).
 *
 * Two parts: float32 digit generation with exact integer arithmetic (the
 * free-format algorithm of Steele & White as NumPy's Dragon4 runs it, with
 * the same cutoffs, rounding and tie-breaking), and the array layout of
 * numpy.array2string, written line by line instead of built as one string.
 */
#include "view/npprint.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NP_LINEWIDTH 75
#define NP_PRECISION 8
#define NP_THRESHOLD 1000
#define NP_EDGE 3

/* ---- small unsigned big integers, enough for any float32 ---- */

#define BN_LIMBS 12 /* 384 bits; float32 needs under 200 */

typedef struct {
	int n; /* limbs in use, no leading zero limb */
	uint32_t d[BN_LIMBS];
} bn;

static void bn_set(bn *a, uint64_t v)
{
	a->n = 0;
	while (v) {
		a->d[a->n++] = (uint32_t)v;
		v >>= 32;
	}
}

static void bn_mul_small(bn *a, uint32_t m)
{
	uint64_t carry = 0;
	for (int i = 0; i < a->n; i++) {
		uint64_t p = (uint64_t)a->d[i] * m + carry;
		a->d[i] = (uint32_t)p;
		carry = p >> 32;
	}
	if (carry && a->n < BN_LIMBS)
		a->d[a->n++] = (uint32_t)carry;
}

/* a *= 10^k, k >= 0 */
static void bn_mul_pow10(bn *a, int k)
{
	for (; k >= 9; k -= 9)
		bn_mul_small(a, 1000000000u);
	static const uint32_t p10[9] = {1, 10, 100, 1000, 10000, 100000,
					1000000, 10000000, 100000000};
	if (k > 0)
		bn_mul_small(a, p10[k]);
}

static void bn_shl(bn *a, int s)
{
	int words = s / 32, bits = s % 32;
	if (a->n == 0)
		return;
	uint32_t out[BN_LIMBS] = {0};
	for (int i = 0; i < a->n && i + words < BN_LIMBS; i++) {
		uint64_t v = (uint64_t)a->d[i] << bits;
		out[i + words] |= (uint32_t)v;
		if (i + words + 1 < BN_LIMBS)
			out[i + words + 1] |= (uint32_t)(v >> 32);
	}
	int n = a->n + words + 1;
	if (n > BN_LIMBS)
		n = BN_LIMBS;
	while (n > 0 && out[n - 1] == 0)
		n--;
	memcpy(a->d, out, sizeof out);
	a->n = n;
}

static int bn_cmp(const bn *a, const bn *b)
{
	if (a->n != b->n)
		return a->n < b->n ? -1 : 1;
	for (int i = a->n - 1; i >= 0; i--)
		if (a->d[i] != b->d[i])
			return a->d[i] < b->d[i] ? -1 : 1;
	return 0;
}

/* a -= b, where a >= b */
static void bn_sub(bn *a, const bn *b)
{
	int64_t borrow = 0;
	for (int i = 0; i < a->n; i++) {
		int64_t v = (int64_t)a->d[i] - (i < b->n ? b->d[i] : 0) - borrow;
		borrow = v < 0;
		a->d[i] = (uint32_t)(v + (borrow ? (int64_t)1 << 32 : 0));
	}
	while (a->n > 0 && a->d[a->n - 1] == 0)
		a->n--;
}

/* r = a + b */
static void bn_add(bn *r, const bn *a, const bn *b)
{
	int n = a->n > b->n ? a->n : b->n;
	uint64_t carry = 0;
	for (int i = 0; i < n; i++) {
		uint64_t v = carry + (i < a->n ? a->d[i] : 0) +
			     (i < b->n ? b->d[i] : 0);
		r->d[i] = (uint32_t)v;
		carry = v >> 32;
	}
	r->n = n;
	if (carry && n < BN_LIMBS)
		r->d[r->n++] = (uint32_t)carry;
}

/* ---- float32 digits ---- */

#define MAX_DIGITS 80

/* Decimal digits of |x| (finite) as NumPy's Dragon4 produces them in its
 * unique mode.  sci: cut_max counts significant digits, otherwise digits
 * after the point (-1: no cutoff); digit generation stops at the first digit
 * that tells x from its float32 neighbours, but not before cut_min digits
 * (same units, -1: none), and never after cut_max.  Writes the digits to
 * dig and the power of ten of dig[0] to *lead; returns the digit count. */
static int f32_digits(float x, int sci, int cut_max, int cut_min, char *dig,
		      int *lead)
{
	uint32_t bits;
	memcpy(&bits, &x, sizeof bits);
	uint32_t frac = bits & 0x7fffffu, ex = bits >> 23 & 0xffu;
	uint32_t m = ex ? frac | 0x800000u : frac;
	int e2 = ex ? (int)ex - 150 : -149;
	int unequal = ex > 1 && frac == 0; /* the gap below is half as wide */
	if (m == 0) {
		dig[0] = '0';
		*lead = 0;
		return 1;
	}
	int even = !(m & 1); /* round-half-even reading accepts the bounds */
	uint32_t f = unequal ? 2 : 1;

	/* value = R/S, half gaps below and above = ML/S and MH/S */
	bn R, S, ML, MH, T;
	bn_set(&R, 2ull * f * m);
	bn_set(&S, 2ull * f);
	bn_set(&ML, 1);
	bn_set(&MH, f);
	if (e2 >= 0) {
		bn_shl(&R, e2);
		bn_shl(&ML, e2);
		bn_shl(&MH, e2);
	} else {
		bn_shl(&S, -e2);
	}

	/* scale so that 1 <= R/S < 10: value = R/S * 10^k */
	int k = (int)floor(log10(fabs((double)x)));
	if (k >= 0) {
		bn_mul_pow10(&S, k);
	} else {
		bn_mul_pow10(&R, -k);
		bn_mul_pow10(&ML, -k);
		bn_mul_pow10(&MH, -k);
	}
	for (;;) {
		T = S;
		bn_mul_small(&T, 10);
		if (bn_cmp(&R, &T) >= 0) {
			S = T;
			k++;
		} else if (bn_cmp(&R, &S) < 0) {
			bn_mul_small(&R, 10);
			bn_mul_small(&ML, 10);
			bn_mul_small(&MH, 10);
			k--;
		} else {
			break;
		}
	}
	/* a fraction cutoff below the first digit starts at the cutoff */
	if (!sci && cut_max >= 0 && k < -cut_max) {
		bn_mul_pow10(&S, -cut_max - k);
		k = -cut_max;
	}

	int max_pos = k - MAX_DIGITS + 2, min_pos = k + 1;
	if (cut_max >= 0) {
		int want = sci ? k + 1 - cut_max : -cut_max;
		if (want > max_pos)
			max_pos = want;
	}
	if (cut_min >= 0) {
		int want = sci ? k + 1 - cut_min : -cut_min;
		if (want < min_pos)
			min_pos = want;
	}

	int n = 0, pos = k, low, high, digit;
	for (;;) {
		digit = 0;
		while (bn_cmp(&R, &S) >= 0) {
			bn_sub(&R, &S);
			digit++;
		}
		bn_add(&T, &R, &MH);
		int c = bn_cmp(&R, &ML);
		low = even ? c <= 0 : c < 0;
		c = bn_cmp(&T, &S);
		high = even ? c >= 0 : c > 0;
		if (((low || high) && pos <= min_pos) || pos == max_pos)
			break;
		dig[n++] = (char)('0' + digit);
		bn_mul_small(&R, 10);
		bn_mul_small(&ML, 10);
		bn_mul_small(&MH, 10);
		pos--;
	}

	int down = low;
	if (low == high) { /* either way is exact enough: take the nearer */
		bn_add(&T, &R, &R);
		int c = bn_cmp(&T, &S);
		down = c < 0 || (c == 0 && !(digit & 1));
	}
	if (down) {
		dig[n++] = (char)('0' + digit);
	} else if (digit < 9) {
		dig[n++] = (char)('0' + digit + 1);
	} else {
		while (n > 0 && dig[n - 1] == '9')
			n--;
		if (n == 0) {
			dig[n++] = '1';
			k++;
		} else {
			dig[n - 1]++;
		}
	}
	*lead = k;
	return n;
}

/* Appends c n times. */
static char *fill(char *p, int c, int n)
{
	for (; n > 0; n--)
		*p++ = (char)c;
	return p;
}

/* Positional notation, unique digits, at most `precision` after the point,
 * trailing zeros trimmed but the point kept ("1.", "0.25"), the sign and
 * integer digits right-aligned in pad_left columns, the fraction padded
 * with spaces to pad_right columns.  Returns the length written to buf. */
static int fmt_positional(char *buf, float x, int precision, int pad_left,
			  int pad_right)
{
	char dig[MAX_DIGITS], ip[64], fp[MAX_DIGITS + 64];
	int lead, n = f32_digits(x, 0, precision, 0, dig, &lead);
	char *q = ip;
	if (signbit(x))
		*q++ = '-';
	if (lead >= 0) {
		for (int p = lead; p >= 0; p--)
			*q++ = lead - p < n ? dig[lead - p] : '0';
	} else {
		*q++ = '0';
	}
	int il = (int)(q - ip), fl = 0;
	for (int p = -1; p >= lead - n + 1; p--) {
		int i = lead - p;
		fp[fl++] = i >= 0 && i < n ? dig[i] : '0';
	}
	while (fl > 0 && fp[fl - 1] == '0')
		fl--;
	char *o = fill(buf, ' ', pad_left - il);
	memcpy(o, ip, (size_t)il);
	o += il;
	*o++ = '.';
	memcpy(o, fp, (size_t)fl);
	o += fl;
	o = fill(o, ' ', pad_right - fl);
	*o = 0;
	return (int)(o - buf);
}

/* Scientific notation "d.ddde+XX".  First pass (keep 0): unique digits, at
 * most `precision` after the point, trailing zeros trimmed.  Final pass
 * (keep 1): exactly `precision` digits after the point, the extra ones
 * exact digits of x rounded half to even.  The exponent has at least
 * max(2, exp_digits) digits; sign and first digit right-aligned in
 * pad_left columns. */
static int fmt_scientific(char *buf, float x, int precision, int keep,
			  int pad_left, int exp_digits)
{
	char dig[MAX_DIGITS];
	int lead, n = f32_digits(x, 1, precision + 1,
				 keep ? precision + 1 : -1, dig, &lead);
	int fl = n - 1;
	if (!keep)
		while (fl > 0 && dig[fl] == '0')
			fl--;
	int neg = signbit(x) != 0;
	char *o = fill(buf, ' ', pad_left - 1 - neg);
	if (neg)
		*o++ = '-';
	*o++ = dig[0];
	*o++ = '.';
	memcpy(o, dig + 1, (size_t)fl);
	o += fl;
	if (keep)
		o = fill(o, '0', precision - fl);
	int e = lead < 0 ? -lead : lead;
	char eb[16];
	int el = snprintf(eb, sizeof eb, "%d", e);
	*o++ = 'e';
	*o++ = lead < 0 ? '-' : '+';
	o = fill(o, '0', (exp_digits > 2 ? exp_digits : 2) - el);
	memcpy(o, eb, (size_t)el);
	o += el;
	*o = 0;
	return (int)(o - buf);
}

void np_f32_repr(float x, char *buf, size_t len)
{
	char tmp[128];
	if (isnan(x)) {
		snprintf(buf, len, "nan");
		return;
	}
	if (isinf(x)) {
		snprintf(buf, len, "%s", x < 0 ? "-inf" : "inf");
		return;
	}
	float a = fabsf(x);
	if (a == 0 || (a >= 1e-4f && a < 1e16f)) {
		int l = fmt_positional(tmp, x, -1, 0, 0);
		if (tmp[l - 1] == '.')
			strcpy(tmp + l, "0");
	} else {
		fmt_scientific(tmp, x, -1, 0, 0, 2);
		char *e = strchr(tmp, 'e');
		if (e[-1] == '.') /* "1.e-05" -> "1e-05" */
			memmove(e - 1, e, strlen(e) + 1);
	}
	snprintf(buf, len, "%s", tmp);
}

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
		fmt_scientific(s, v, NP_PRECISION, 0, 0, 0);
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
		fmt_positional(s, v, NP_PRECISION, 0, 0);
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
		return fmt_scientific(buf, v, f->precision, 1, f->pad_left,
				      f->exp_size);
	return fmt_positional(buf, v, NP_PRECISION, f->pad_left, f->pad_right);
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
