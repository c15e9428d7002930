/* fuzz_rendezvous.c - what a rank reads from a rendezvous file or socket
 * (lib/train/rendezvous.h): byte 0's low bit picks the message rank 0
 * sends (tr_rdv_decode) or the hello a rank sends it
 * (tr_rdv_hello_rank), its other bits the world size (1 .. 128); the
 * rest is the bytes received.  What either accepts must encode back to
 * exactly those bytes, and a refusal must say why in one line. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "train/rendezvous.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int world = (data[0] >> 1) + 1;
	const unsigned char *in = data + 1;
	size_t n = size - 1;
	if (data[0] & 1) {
		int r = tr_rdv_hello_rank(in, n, world);
		if (r == -1)
			return 0;
		unsigned char h[TR_RDV_HELLO];
		if (r < 1 || r >= world)
			abort();
		tr_rdv_hello(h, world, r);
		if (n != sizeof h || memcmp(h, in, n))
			abort();
		return 0;
	}
	unsigned char id[TR_ID_BYTES], msg[TR_RDV_MSG];
	char err[600];
	err[0] = 0;
	if (tr_rdv_decode(in, n, world, "rdv", id, err, sizeof err) < 0) {
		if (!err[0] || strchr(err, '\n'))
			abort();
		return 0;
	}
	tr_rdv_encode(msg, world, id);
	if (n != sizeof msg || memcmp(msg, in, n))
		abort();
	return 0;
}
