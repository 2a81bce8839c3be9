// SPDX-License-Identifier: MIT
// Compressed payloads: LZ4 blocks of at most 1 MiB, each stored raw when it
// does not shrink; decoding checks every length against the bytes left.
#include "compress.h"

#include <errno.h>
#include <lz4.h>
#include <string.h>

#define HDR 8u	 /* u64 raw length */
#define BLOCK 8u /* u32 raw_len, u32 enc_len */

size_t cmx_compress_bound(uint64_t len)
{
	uint64_t blocks = (len + CMX_COMPRESS_BLOCK - 1) / CMX_COMPRESS_BLOCK;

	/* Stored blocks bound every block: enc_len <= raw_len. */
	return (size_t)(HDR + blocks * BLOCK + len);
}

uint64_t cmx_compress_encode(const void *src, uint64_t len, void *dst)
{
	const char *in = src;
	char *out = dst, *p = out + HDR;
	uint64_t left = len;

	memcpy(out, &len, HDR);
	while (left) {
		uint32_t raw = left < CMX_COMPRESS_BLOCK ? (uint32_t)left : CMX_COMPRESS_BLOCK;
		/* Up to raw - 1 bytes: a block that does not shrink is stored. */
		int enc = LZ4_compress_default(in, p + BLOCK, (int)raw, (int)raw - 1);
		uint32_t e = enc > 0 ? (uint32_t)enc : raw;

		/* Incompressible data shows in its first block: stop early. */
		if (e == raw && in == (const char *)src)
			return 0;
		if (e == raw)
			memcpy(p + BLOCK, in, raw);
		memcpy(p, &raw, 4);
		memcpy(p + 4, &e, 4);
		p += BLOCK + e;
		in += raw;
		left -= raw;
	}
	return (uint64_t)(p - out) < len ? (uint64_t)(p - out) : 0;
}

int cmx_compress_raw_len(const void *src, uint64_t len, uint64_t max, uint64_t *raw)
{
	if (len < HDR)
		return -EBADMSG;
	memcpy(raw, src, HDR);
	return *raw && *raw <= max ? 0 : -EBADMSG;
}

int cmx_compress_decode(const void *src, uint64_t len, void *dst, uint64_t raw)
{
	const char *p = (const char *)src + HDR;
	uint64_t left, out = 0;

	if (len < HDR)
		return -EBADMSG;
	left = len - HDR;
	while (left) {
		uint32_t r, e;

		if (left < BLOCK)
			return -EBADMSG;
		memcpy(&r, p, 4);
		memcpy(&e, p + 4, 4);
		p += BLOCK;
		left -= BLOCK;
		if (!r || r > CMX_COMPRESS_BLOCK || e > r || e > left || r > raw - out)
			return -EBADMSG;
		if (e == r)
			memcpy((char *)dst + out, p, r);
		else if (LZ4_decompress_safe(p, (char *)dst + out, (int)e, (int)r) != (int)r)
			return -EBADMSG;
		p += e;
		left -= e;
		out += r;
	}
	return out == raw ? 0 : -EBADMSG;
}
