// SPDX-License-Identifier: MIT
// Compressed payloads (LZ4): the block format both sides write and read
// (docs/protocol.md, Compression).
#ifndef CMX_COMPRESS_H
#define CMX_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

/* Compress's `algos` and `algo` bits. */
#define CMX_COMPRESS_LZ4 0x1u
/* Payloads shorter than this are never worth compressing. */
#define CMX_COMPRESS_MIN (64u << 10)
/* Raw bytes per block: a receiver decodes at most this much per step. */
#define CMX_COMPRESS_BLOCK (1u << 20)

/*
 * A compressed payload: u64 raw length, then blocks, each u32 raw_len
 * (1..CMX_COMPRESS_BLOCK), u32 enc_len (<= raw_len) and enc_len bytes: the
 * raw bytes themselves when enc_len == raw_len (stored), else an LZ4 block
 * that decodes to exactly raw_len bytes. The raw lengths add up to the raw
 * length, and the blocks fill the payload exactly.
 */

/* Room a payload of len bytes may take while being encoded. */
size_t cmx_compress_bound(uint64_t len);
/* Encodes src[0..len) into dst (cmx_compress_bound(len) bytes): the
 * encoded length, or 0 when that would not be smaller than len (the first
 * block does not shrink, or the whole does not): send it raw then. */
uint64_t cmx_compress_encode(const void *src, uint64_t len, void *dst);
/* The raw length an encoded payload of `len` bytes announces: 0, or
 * -EBADMSG (shorter than a header, or more than `max`). */
int cmx_compress_raw_len(const void *src, uint64_t len, uint64_t max, uint64_t *raw);
/* Decodes src[0..len) into dst[0..raw), raw from cmx_compress_raw_len().
 * 0, or -EBADMSG for anything not exactly as described above. */
int cmx_compress_decode(const void *src, uint64_t len, void *dst, uint64_t raw);

#endif
