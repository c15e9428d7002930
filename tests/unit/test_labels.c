/* test_labels.c - unit test of a map's label cut (lib/view/labels.h).
 *
 * Prints one line per failed check and a final "N passed, M failed";
 * exits 1 when anything failed.
 */
#include <stdlib.h>
#include <string.h>

#include "view/labels.h"
#include "check.h"

/* hm_label_cut(label, n) is want. */
static int cuts_to(const char *label, int n, const char *want)
{
	char buf[64];
	return strcmp(hm_label_cut(label, n, buf), want) == 0;
}

/* The PNG's labels of the bytes of s as byte tokens: label i is want[i]. */
static int spelt(const char *s, const char *const *want)
{
	int32_t id[16];
	size_t T = strlen(s);
	for (size_t i = 0; i < T; i++)
		id[i] = (unsigned char)s[i];
	at_tensor tok = {.dtype = AT_I32, .rank = 2, .dims = {1, T}, .data = id};
	at_tokenizer *bytes = at_tok_bytes();
	char **label = NULL;
	int ok = bytes && hm_token_labels(bytes, &tok, 0, T, 1, &label) == 1;
	for (size_t i = 0; ok && i < T; i++)
		ok = strcmp(label[i], want[i]) == 0;
	free(label);
	at_tok_free(bytes);
	return ok;
}

int main(void)
{
	/* a space is _, a backslash an escape as a byte without a glyph is,
	 * so that every \x of a label begins an escape */
	CHECK(spelt("a \\\x01~", (const char *const[]){
		"a", "_", "\\x5c", "\\x01", "~"}));
	/* short labels whole, long ones cut to n */
	CHECK(cuts_to("cat", 12, "cat"));
	CHECK(cuts_to("", 4, ""));
	CHECK(cuts_to("abcdefghijklmnop", 12, "abcdefghijkl"));
	/* a \xHH escape is kept whole or not at all: the cut falls before
	 * its backslash wherever it would split it */
	CHECK(cuts_to("ab\\xe2\\x80\\x99", 12, "ab\\xe2\\x80"));
	CHECK(cuts_to("ab\\xe2\\x80\\x99", 11, "ab\\xe2\\x80"));
	CHECK(cuts_to("ab\\xe2\\x80\\x99", 10, "ab\\xe2\\x80"));
	CHECK(cuts_to("ab\\xe2\\x80\\x99", 9, "ab\\xe2"));
	CHECK(cuts_to("ab\\xe2\\x80\\x99", 14, "ab\\xe2\\x80\\x99"));
	CHECK(cuts_to("\\xe2\\x80", 7, "\\xe2"));
	CHECK(cuts_to("\\xe2", 3, ""));
	/* a label that ends at n is not cut, escape or not */
	CHECK(cuts_to("abcdefgh\\x99", 12, "abcdefgh\\x99"));
	/* a backslash that begins no escape is a character like any */
	CHECK(cuts_to("a\\bcdefghijklm", 12, "a\\bcdefghijk"));
	return check_finish("test_labels");
}
