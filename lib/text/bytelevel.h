/* bytelevel.h - GPT-2's byte-level alphabet.
 *
 * A byte-level BPE vocabulary (vocab.json, merges.txt) spells each token's
 * bytes as printable Unicode characters, one character a byte: the bytes
 * '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for themselves (as U+0021..,
 * U+00A1.., U+00AE..), and the other 68 bytes, in increasing order, for
 * U+0100, U+0101, ... (so the space 0x20 is U+0120, 'Ġ').
 */
#ifndef ANDREA_BYTELEVEL_H
#define ANDREA_BYTELEVEL_H

#include <stddef.h>

/* The code point that spells byte b. */
unsigned at_bytelevel_char(unsigned char b);
/* Decodes the n bytes of UTF-8 at s, one alphabet character a byte, into
 * out (room for n bytes).  The byte count, or -1 where s holds a
 * character outside the alphabet or is not UTF-8. */
long at_bytelevel_decode(const char *s, size_t n, unsigned char *out);
/* Spells the n bytes b in the alphabet as UTF-8 into out (room for 2n + 1
 * bytes, NUL-terminated); the length written. */
size_t at_bytelevel_encode(const unsigned char *b, size_t n, char *out);

#endif
