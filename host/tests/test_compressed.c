// SPDX-License-Identifier: MIT
// Compressed payloads against a live clmuxd: granted and used both ways,
// then sent without the grant or malformed; each bad one ends only its connection and
// returns what the session held, while another client keeps working.
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../guest/tests/e2e.h"
#include "addr.h"
#include "compress.h"
#include "proto.gen.h"

#include "rawclient.h"

#define LEN (3u << 20)

/* A context, an in-order queue and a LEN-byte buffer (ids 0x10010..12). */
static void setup(struct client *c)
{
	static uint64_t devs[1] = { 1 }, qprops[1] = { 0 };
	struct cmx_CreateContext_in ctx = { .context = { 0x10010 }, .devices = { devs, 1 } };
	struct cmx_CreateQueue_in qu = { .queue = { 0x10011 }, .context = { 0x10010 }, .device = { 1 },
					 .props = { qprops, 1 } };
	struct cmx_CreateBuffer_in buf = { .mem = { 0x10012 }, .context = { 0x10010 }, .size = LEN };

	hello(c);
	send_msg(c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
	ping_ok(c);
}

static int ask(struct client *c)
{
	struct cmx_Compress_in in = { .algos = CMX_COMPRESS_LZ4 | 0x80 };
	struct cmx_Compress_out out;

	send_msg(c, &cmx_desc_Compress_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_Compress_out, &out, NULL), 0);
	return (int)out.algo;
}

/* A sync WriteBuffer of the whole buffer with an encoded payload. */
static void write_packed(struct client *c, const void *enc, uint64_t n)
{
	struct cmx_WriteBuffer_in in = { .queue = { 0x10011 }, .mem = { 0x10012 }, .size = LEN };
	size_t size = cmx_codec_size(&cmx_desc_WriteBuffer_in, &in);
	uint8_t *buf = malloc(CMX_HDR_SIZE + size);
	struct cmx_hdr h = { .size = (uint32_t)size, .op = CMX_OP_WriteBuffer,
			     .flags = CMX_HDR_SYNC | CMX_HDR_LZ4, .seq = ++c->seq, .bulk = n };

	memcpy(buf, &h, CMX_HDR_SIZE);
	cmx_codec_encode(&cmx_desc_WriteBuffer_in, &in, buf + CMX_HDR_SIZE);
	send_raw(c->fd, buf, CMX_HDR_SIZE + size);
	send_raw(c->fd, enc, n);
	free(buf);
}

/* Data that compresses, and its encoding. */
static uint8_t *data(uint64_t *n, uint8_t **enc)
{
	uint8_t *p = malloc(LEN);

	for (size_t i = 0; i < LEN; i++)
		p[i] = (uint8_t)(i / 4096 * 7 + (i & 3));
	*enc = malloc(cmx_compress_bound(LEN));
	*n = cmx_compress_encode(p, LEN, *enc);
	ck_assert_uint_gt(*n, 0);
	return p;
}

START_TEST(granted)
{
	struct cmx_ReadBuffer_in rd = { .queue = { 0x10011 }, .mem = { 0x10012 }, .size = LEN };
	struct cmx_hdr h;
	struct client c;
	uint8_t *enc, *raw, *back = malloc(LEN);
	uint64_t n;
	int64_t status;

	raw = data(&n, &enc);
	setup(&c);
	ck_assert_int_eq(ask(&c), CMX_COMPRESS_LZ4); /* unknown bits are not granted */
	write_packed(&c, enc, n);
	ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), 0);
	/* The data comes back compressed too, and decodes to what went in. */
	send_msg(&c, &cmx_desc_ReadBuffer_in, &rd, 1, NULL, 0);
	ck_assert_int_eq(recv(c.fd, &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
	ck_assert_uint_eq(h.flags & CMX_HDR_LZ4, CMX_HDR_LZ4);
	ck_assert_uint_lt(h.bulk, LEN);
	ck_assert_int_eq(recv(c.fd, &status, 8, MSG_WAITALL), 8);
	ck_assert_int_eq(status, 0);
	ck_assert_int_eq(recv(c.fd, enc, h.bulk, MSG_WAITALL), (ssize_t)h.bulk);
	ck_assert_int_eq(cmx_compress_raw_len(enc, h.bulk, LEN, &n), 0);
	ck_assert_uint_eq(n, LEN);
	ck_assert_int_eq(cmx_compress_decode(enc, h.bulk, back, LEN), 0);
	ck_assert_mem_eq(back, raw, LEN);
	close(c.fd);
	free(raw);
	free(enc);
	free(back);
}
END_TEST

/* Each lie ends its connection; the objects go; another session works. */
static void refused(int grant, void (*spoil)(uint8_t *enc, uint64_t *n))
{
	uint64_t o0, b0, n;
	struct client c, other;
	uint8_t *enc, *raw = data(&n, &enc);

	daemon_counts(&o0, &b0);
	hello(&other);
	setup(&c);
	if (grant)
		ck_assert_int_eq(ask(&c), CMX_COMPRESS_LZ4);
	spoil(enc, &n);
	write_packed(&c, enc, n);
	ck_assert(closed_by_daemon(c.fd));
	close(c.fd);
	ping_ok(&other);
	close(other.fd);
	counts_return(o0, b0);
	free(raw);
	free(enc);
}

static void as_is(uint8_t *enc, uint64_t *n)
{
}

static void corrupt(uint8_t *enc, uint64_t *n)
{
	memset(enc + 16, 0xff, 32); /* the first block's LZ4 sequences */
}

static void longer(uint8_t *enc, uint64_t *n)
{
	uint64_t raw = LEN + 1; /* announces more than the blocks hold */
	memcpy(enc, &raw, 8);
}

static void huge(uint8_t *enc, uint64_t *n)
{
	uint64_t raw = 1ull << 62;
	memcpy(enc, &raw, 8);
}

START_TEST(not_granted)
{
	refused(0, as_is);
}
END_TEST

START_TEST(malformed)
{
	refused(1, corrupt);
	refused(1, longer);
	refused(1, huge);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("compressed");
	TCase *tc = tcase_create("compressed");

	tcase_add_test(tc, granted);
	tcase_add_test(tc, not_granted);
	tcase_add_test(tc, malformed);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return e2e_daemon_run(s);
}
