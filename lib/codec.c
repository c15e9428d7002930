/* codec.c - one chunk of payload: byte shuffle, deflate, CRC32.
 *
 * A chunk is stored deflated (raw deflate, no zlib wrapper: the chunk
 * carries its own CRC32 of the raw bytes) when that is shorter, else as is.
 * The byte shuffle gathers byte 0 of every element, then byte 1, ...: the
 * sign/exponent bytes of float32 data then form long similar runs that
 * deflate codes cheaply, while the noisy low mantissa bytes go out as stored
 * deflate blocks, which inflate at memory speed.
 */
#include "stream.h"

#include <stdio.h>
#include <string.h>
#include <zlib.h>

static void shuffle(const unsigned char *in, unsigned char *out, size_t n,
		    size_t elem)
{
	size_t count = n / elem;
	if (elem == 4) {
		unsigned char *o0 = out, *o1 = out + count, *o2 = out + 2 * count,
			      *o3 = out + 3 * count;
		for (size_t i = 0; i < count; i++) {
			o0[i] = in[4 * i];
			o1[i] = in[4 * i + 1];
			o2[i] = in[4 * i + 2];
			o3[i] = in[4 * i + 3];
		}
		return;
	}
	for (size_t b = 0; b < elem; b++)
		for (size_t i = 0; i < count; i++)
			out[b * count + i] = in[i * elem + b];
}

static void unshuffle(const unsigned char *in, unsigned char *out, size_t n,
		      size_t elem)
{
	size_t count = n / elem;
	if (elem == 4) {
		const unsigned char *i0 = in, *i1 = in + count,
				    *i2 = in + 2 * count, *i3 = in + 3 * count;
		for (size_t i = 0; i < count; i++) {
			out[4 * i] = i0[i];
			out[4 * i + 1] = i1[i];
			out[4 * i + 2] = i2[i];
			out[4 * i + 3] = i3[i];
		}
		return;
	}
	for (size_t b = 0; b < elem; b++)
		for (size_t i = 0; i < count; i++)
			out[i * elem + b] = in[b * count + i];
}

size_t at_chunk_bound(size_t raw_len)
{
	return compressBound((uLong)raw_len) + 64;
}

size_t at_chunk_encode(const unsigned char *raw, size_t raw_len,
		       unsigned char *out, size_t elem, const at_write_opts *o,
		       unsigned char *scratch)
{
	const unsigned char *src = raw;
	if (o->shuffle && elem > 1) {
		shuffle(raw, scratch, raw_len, elem);
		src = scratch;
	}
	if (o->level > 0) {
		z_stream z;
		memset(&z, 0, sizeof z);
		int strategy = o->level == 1 ? Z_RLE : Z_DEFAULT_STRATEGY;
		if (deflateInit2(&z, o->level, Z_DEFLATED, -15, 8, strategy) == Z_OK) {
			z.next_in = (Bytef *)src;
			z.avail_in = (uInt)raw_len;
			z.next_out = out;
			z.avail_out = (uInt)at_chunk_bound(raw_len);
			int rc = deflate(&z, Z_FINISH);
			size_t n = z.total_out;
			deflateEnd(&z);
			if (rc == Z_STREAM_END && n < raw_len)
				return n;
		}
	}
	memcpy(out, src, raw_len); /* stored: deflate did not pay */
	return raw_len;
}

int at_chunk_decode(const unsigned char *stored, size_t stored_len,
		    unsigned char *raw, size_t raw_len, size_t elem,
		    int shuffled, uint32_t crc, unsigned char *scratch,
		    char *err, size_t errlen)
{
	int shuf = shuffled && elem > 1;
	unsigned char *dst = shuf ? scratch : raw;
	if (stored_len == raw_len) {
		if (shuf)
			dst = (unsigned char *)stored;
		else
			memcpy(raw, stored, raw_len);
	} else {
		z_stream z;
		memset(&z, 0, sizeof z);
		if (inflateInit2(&z, -15) != Z_OK) {
			snprintf(err, errlen, "out of memory in inflate");
			return -1;
		}
		z.next_in = (Bytef *)stored;
		z.avail_in = (uInt)stored_len;
		z.next_out = dst;
		z.avail_out = (uInt)raw_len;
		int rc = inflate(&z, Z_FINISH);
		int ok = rc == Z_STREAM_END && z.total_out == raw_len &&
			 z.avail_in == 0;
		inflateEnd(&z);
		if (!ok) {
			snprintf(err, errlen, "corrupt deflate data");
			return -1;
		}
	}
	if (shuf)
		unshuffle(dst, raw, raw_len, elem);
	if ((uint32_t)crc32(0L, raw, (uInt)raw_len) != crc) {
		snprintf(err, errlen, "CRC32 mismatch: the data is damaged");
		return -1;
	}
	return 0;
}
