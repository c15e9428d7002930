/* bytelevel.c - GPT-2's byte-level alphabet. */
#include "text/bytelevel.h"

#include <pthread.h>

/* Bytes that stand for themselves. */
static int printable(unsigned b)
{
	return (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
}

unsigned at_bytelevel_char(unsigned char b)
{
	if (printable(b))
		return b;
	unsigned n = 0; /* the non-printable bytes below b */
	for (unsigned c = 0; c < b; c++)
		n += !printable(c);
	return 256 + n;
}

/* The alphabet's 324 code points (U+0000..U+0143) back to bytes. */
static short byte_of_cp[324];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void fill_byte_of_cp(void)
{
	for (unsigned cp = 0; cp < 324; cp++)
		byte_of_cp[cp] = -1;
	for (unsigned b = 0; b < 256; b++)
		byte_of_cp[at_bytelevel_char((unsigned char)b)] = (short)b;
}

/* The byte spelt by code point cp, or -1. */
static int byte_of(unsigned cp)
{
	pthread_once(&once, fill_byte_of_cp);
	return cp < 324 ? byte_of_cp[cp] : -1;
}

long at_bytelevel_decode(const char *s, size_t n, unsigned char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	long len = 0;
	for (size_t i = 0; i < n;) {
		unsigned cp;
		if (u[i] < 0x80) {
			cp = u[i++];
		} else if ((u[i] & 0xe0) == 0xc0 && i + 1 < n &&
			   (u[i + 1] & 0xc0) == 0x80) {
			cp = (u[i] & 0x1fu) << 6 | (u[i + 1] & 0x3fu);
			if (cp < 0x80)
				return -1; /* overlong */
			i += 2;
		} else {
			return -1; /* U+0800 and above are not in the alphabet */
		}
		int b = byte_of(cp);
		if (b < 0)
			return -1;
		out[len++] = (unsigned char)b;
	}
	return len;
}

size_t at_bytelevel_encode(const unsigned char *b, size_t n, char *out)
{
	size_t len = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned cp = at_bytelevel_char(b[i]);
		if (cp < 0x80) {
			out[len++] = (char)cp;
		} else {
			out[len++] = (char)(0xc0 | cp >> 6);
			out[len++] = (char)(0x80 | (cp & 0x3f));
		}
	}
	out[len] = 0;
	return len;
}
