/* f32fmt.h - float32 values as NumPy writes their digits (f32fmt.c),
 * for npprint.c's array layout and np_f32_repr: the shortest digits that
 * tell x from its float32 neighbours, as NumPy's Dragon4 produces them. */
#ifndef ANDREA_F32FMT_H
#define ANDREA_F32FMT_H

/* Positional notation, unique digits, at most `precision` after the point,
 * trailing zeros trimmed but the point kept ("1.", "0.25"), the sign and
 * integer digits right-aligned in pad_left columns, the fraction padded
 * with spaces to pad_right columns.  Returns the length written to buf. */
int np_fmt_positional(char *buf, float x, int precision, int pad_left,
		      int pad_right);

/* Scientific notation "d.ddde+XX".  First pass (keep 0): unique digits, at
 * most `precision` after the point, trailing zeros trimmed.  Final pass
 * (keep 1): exactly `precision` digits after the point, the extra ones
 * exact digits of x rounded half to even.  The exponent has at least
 * max(2, exp_digits) digits; sign and first digit right-aligned in
 * pad_left columns.  Returns the length written to buf. */
int np_fmt_scientific(char *buf, float x, int precision, int keep,
		      int pad_left, int exp_digits);

#endif
