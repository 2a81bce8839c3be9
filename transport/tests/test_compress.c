// SPDX-License-Identifier: MIT
// Compressed payloads: round trips, data that does not shrink, and every
// malformed block refused (transport/compress.c).
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compress.h"

#define MIB (1u << 20)

/* Bytes no compressor shrinks (xorshift). */
static void noise(uint8_t *p, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		seed ^= seed << 13;
		seed ^= seed >> 7;
		seed ^= seed << 17;
		p[i] = (uint8_t)seed;
	}
}

/* Encodes src, checks the announced length, decodes, compares. */
static uint64_t round_trip(const uint8_t *src, uint64_t len)
{
	uint8_t *enc = malloc(cmx_compress_bound(len)), *dec = malloc(len);
	uint64_t n = cmx_compress_encode(src, len, enc), raw = 0;

	ck_assert_ptr_nonnull(enc);
	ck_assert_ptr_nonnull(dec);
	if (n) {
		ck_assert_uint_lt(n, len);
		ck_assert_int_eq(cmx_compress_raw_len(enc, n, UINT64_MAX, &raw), 0);
		ck_assert_uint_eq(raw, len);
		ck_assert_int_eq(cmx_compress_decode(enc, n, dec, raw), 0);
		ck_assert_mem_eq(dec, src, len);
	}
	free(enc);
	free(dec);
	return n;
}

START_TEST(shrinks)
{
	size_t len = 3 * MIB + 12345;
	uint8_t *p = malloc(len);

	/* Floats as an application has them: compressible, not trivially. */
	for (size_t i = 0; i < len / 4; i++) {
		float f = (float)(i % 4096) * 0.25f;
		memcpy(p + 4 * i, &f, 4);
	}
	ck_assert_uint_gt(round_trip(p, len), 0);
	memset(p, 0, len);
	ck_assert_uint_lt(round_trip(p, len), len / 100);
	/* A compressible first block, then noise: the noise is stored. */
	noise(p + MIB, len - MIB, 7);
	ck_assert_uint_gt(round_trip(p, len), 0);
	free(p);
}
END_TEST

START_TEST(never_expands)
{
	size_t len = 2 * MIB;
	uint8_t *p = malloc(len), *enc = malloc(cmx_compress_bound(len));

	noise(p, len, 42);
	ck_assert_uint_eq(cmx_compress_encode(p, len, enc), 0);
	/* Noise after a compressible half block: smaller than raw, not 0. */
	memset(p, 'a', MIB / 2);
	ck_assert_uint_lt(cmx_compress_encode(p, len, enc) - 1, len - 1);
	free(p);
	free(enc);
}
END_TEST

/* A valid encoding of 2 MiB of zeros to break in every way. */
static uint8_t *zeros_enc(uint64_t *n)
{
	uint8_t *src = calloc(1, 2 * MIB), *enc = malloc(cmx_compress_bound(2 * MIB));

	*n = cmx_compress_encode(src, 2 * MIB, enc);
	ck_assert_uint_gt(*n, 0);
	free(src);
	return enc;
}

START_TEST(malformed)
{
	uint64_t n, raw = 2 * MIB, big = 1ull << 40;
	uint8_t *enc = zeros_enc(&n), *bad = malloc(n + 64), *dst = malloc(2 * MIB);
	uint32_t v;

	ck_assert_int_eq(cmx_compress_raw_len(enc, 7, UINT64_MAX, &raw), -EBADMSG);
	ck_assert_int_eq(cmx_compress_raw_len(enc, n, MIB, &raw), -EBADMSG);
	memcpy(bad, &big, 8);
	ck_assert_int_eq(cmx_compress_raw_len(bad, n, 16ull << 30, &raw), -EBADMSG);
	raw = 2 * MIB;
	/* Cut anywhere: too short for what it announces. */
	for (uint64_t cut = 0; cut < n; cut += 1 + cut / 3)
		ck_assert_int_eq(cmx_compress_decode(enc, cut, dst, raw), -EBADMSG);
	/* Bytes after the last block. */
	memcpy(bad, enc, n);
	memset(bad + n, 0, 64);
	ck_assert_int_eq(cmx_compress_decode(bad, n + 8, dst, raw), -EBADMSG);
	/* A raw length that differs from the blocks'. */
	ck_assert_int_eq(cmx_compress_decode(enc, n, dst, raw - 1), -EBADMSG);
	/* First block: raw_len 0, above the block size, enc_len above raw_len
	 * or past the end, and LZ4 data that does not decode to raw_len. */
	v = 0;
	memcpy(bad, enc, n), memcpy(bad + 8, &v, 4);
	ck_assert_int_eq(cmx_compress_decode(bad, n, dst, raw), -EBADMSG);
	v = CMX_COMPRESS_BLOCK + 1;
	memcpy(bad, enc, n), memcpy(bad + 8, &v, 4);
	ck_assert_int_eq(cmx_compress_decode(bad, n, dst, raw), -EBADMSG);
	v = CMX_COMPRESS_BLOCK + 1;
	memcpy(bad, enc, n), memcpy(bad + 12, &v, 4);
	ck_assert_int_eq(cmx_compress_decode(bad, n, dst, raw), -EBADMSG);
	v = (uint32_t)n;
	memcpy(bad, enc, n), memcpy(bad + 12, &v, 4);
	ck_assert_int_eq(cmx_compress_decode(bad, n, dst, raw), -EBADMSG);
	memcpy(bad, enc, n);
	memset(bad + 16, 0xff, 8);
	ck_assert_int_eq(cmx_compress_decode(bad, n, dst, raw), -EBADMSG);
	ck_assert_int_eq(cmx_compress_decode(enc, n, dst, raw), 0);
	free(enc);
	free(bad);
	free(dst);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("compress");
	TCase *tc = tcase_create("compress");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, shrinks);
	tcase_add_test(tc, never_expands);
	tcase_add_test(tc, malformed);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
