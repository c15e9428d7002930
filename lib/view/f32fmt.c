/* f32fmt.c - float32 digits as NumPy writes them (f32fmt.h): the
 * free-format algorithm of Steele & White as NumPy's Dragon4 runs it, with
 * the same cutoffs, rounding and tie-breaking, on exact integer
 * arithmetic; np_f32_repr (npprint.h) on top. */
#include "view/f32fmt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "view/npprint.h"

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

/* np_fmt_positional's work; cut_min 0 takes the digits down to the
 * units (as NumPy's arrays print 99999992.), -1 stops at the unique ones
 * (its scalars: 99999990.0). */
static int positional(char *buf, float x, int precision, int cut_min,
		      int pad_left, int pad_right)
{
	char dig[MAX_DIGITS], ip[64], fp[MAX_DIGITS + 64];
	int lead, n = f32_digits(x, 0, precision, cut_min, dig, &lead);
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

int np_fmt_positional(char *buf, float x, int precision, int pad_left,
		       int pad_right)
{
	return positional(buf, x, precision, 0, pad_left, pad_right);
}

int np_fmt_scientific(char *buf, float x, int precision, int keep,
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
	/* NumPy's cutoffs, against x widened to double: float32's 1e-4 is
	 * below 1e-4, so it is 1e-04 */
	double a = fabs((double)x);
	if (a == 0 || (a >= 1e-4 && a < 1e16)) {
		int l = positional(tmp, x, -1, -1, 0, 0);
		if (tmp[l - 1] == '.')
			strcpy(tmp + l, "0");
	} else {
		np_fmt_scientific(tmp, x, -1, 0, 0, 2);
		char *e = strchr(tmp, 'e');
		if (e[-1] == '.') /* "1.e-05" -> "1e-05" */
			memmove(e - 1, e, strlen(e) + 1);
	}
	snprintf(buf, len, "%s", tmp);
}

