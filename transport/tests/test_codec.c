// SPDX-License-Identifier: MIT
// Unit tests of the codec: round trips, and every malformed shape refused.
#include <check.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "proto.gen.h"

static uint8_t *encode(const struct cmx_msgdesc *d, const void *in, size_t *len)
{
	uint8_t *buf;

	*len = cmx_codec_size(d, in);
	buf = aligned_alloc(8, *len ? (*len + 7) & ~(size_t)7 : 8);
	cmx_codec_encode(d, in, buf);
	return buf;
}

START_TEST(roundtrip_enqueue)
{
	uint64_t g[2] = { 1024, 16 }, l[2] = { 64, 4 }, w[3] = { 7, 8, 9 };
	struct cmx_EnqueueKernel_in in = {
		.queue = { 11 }, .kernel = { 12 }, .global = { g, 2 }, .local = { l, 2 },
		.wait = { w, 3 }, .event = { 99 },
	}, out;
	size_t len;
	uint8_t *buf = encode(&cmx_desc_EnqueueKernel_in, &in, &len);

	ck_assert_uint_eq(len % 8, 0);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_EnqueueKernel_in, buf, len, &out), 0);
	ck_assert_uint_eq(out.queue.id, 11);
	ck_assert_uint_eq(out.kernel.id, 12);
	ck_assert_uint_eq(out.offset.n, 0);
	ck_assert_uint_eq(out.global.n, 2);
	ck_assert_uint_eq(out.global.v[1], 16);
	ck_assert_uint_eq(out.local.v[0], 64);
	ck_assert_uint_eq(out.wait.n, 3);
	ck_assert_uint_eq(out.wait.v[2], 9);
	ck_assert_uint_eq(out.event.id, 99);
	free(buf);
}
END_TEST

START_TEST(roundtrip_strings)
{
	static const char name[] = "vector_add";
	uint8_t v[5] = { 1, 2, 3, 4, 5 };
	struct cmx_CreateKernel_in k = { .kernel = { 3 }, .program = { 4 }, .name = { name, sizeof(name) } }, ko;
	struct cmx_SetKernelArg_in a = { .kernel = { 3 }, .index = 2, .size = 5, .value = { v, 5 } }, ao;
	size_t len;
	uint8_t *buf = encode(&cmx_desc_CreateKernel_in, &k, &len);

	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateKernel_in, buf, len, &ko), 0);
	ck_assert_str_eq(ko.name.ptr, "vector_add");
	free(buf);
	buf = encode(&cmx_desc_SetKernelArg_in, &a, &len);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_SetKernelArg_in, buf, len, &ao), 0);
	ck_assert_uint_eq(ao.value.len, 5);
	ck_assert_mem_eq(ao.value.ptr, v, 5);
	free(buf);
}
END_TEST

/* Every prefix of a valid message is refused, and so is a longer one. */
START_TEST(truncated_and_trailing)
{
	uint64_t g[1] = { 1 };
	struct cmx_EnqueueKernel_in in = { .queue = { 1 }, .kernel = { 2 }, .global = { g, 1 } }, out;
	size_t len;
	uint8_t *buf = encode(&cmx_desc_EnqueueKernel_in, &in, &len), *big;

	for (size_t n = 0; n < len; n += 8)
		ck_assert_int_eq(cmx_codec_decode(&cmx_desc_EnqueueKernel_in, buf, n, &out), -EBADMSG);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_EnqueueKernel_in, buf, len - 1, &out), -EBADMSG);
	big = aligned_alloc(8, len + 8);
	memcpy(big, buf, len);
	memset(big + len, 0, 8);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_EnqueueKernel_in, big, len + 8, &out), -EBADMSG);
	free(big);
	free(buf);
}
END_TEST

/* Counts beyond the field's limit, or beyond the bytes present, are refused
 * before anything is multiplied or read. */
START_TEST(absurd_counts)
{
	uint64_t msg[16] = { 0 };
	struct cmx_EnqueueKernel_in out;
	struct cmx_CreateKernel_in ko;

	msg[0] = 1;
	msg[1] = 2;
	msg[2] = 0;		    /* offset: empty */
	msg[3] = 4;		    /* global: 4 > max 3 */
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_EnqueueKernel_in, (uint8_t *)msg, sizeof(msg), &out),
			 -EBADMSG);
	msg[3] = UINT64_MAX / 8 + 2; /* would wrap when multiplied */
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_EnqueueKernel_in, (uint8_t *)msg, sizeof(msg), &out),
			 -EBADMSG);
	/* A string longer than the message. */
	memset(msg, 0, sizeof(msg));
	msg[2] = 1000;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateKernel_in, (uint8_t *)msg, 4 * 8, &ko), -EBADMSG);
}
END_TEST

START_TEST(strings_must_be_terminated)
{
	uint64_t msg[4] = { 3, 4, 8, 0 };
	struct cmx_CreateKernel_in ko;

	memcpy(&msg[3], "abcdefgh", 8); /* no NUL inside its length */
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateKernel_in, (uint8_t *)msg, sizeof(msg), &ko),
			 -EBADMSG);
	memcpy(&msg[3], "ab\0defg\0", 8); /* a NUL before the end */
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateKernel_in, (uint8_t *)msg, sizeof(msg), &ko),
			 -EBADMSG);
	memcpy(&msg[3], "abcdefg\0", 8);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateKernel_in, (uint8_t *)msg, sizeof(msg), &ko), 0);
	/* A required name may not be empty. */
	msg[2] = 0;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateKernel_in, (uint8_t *)msg, 3 * 8, &ko), -EBADMSG);
}
END_TEST

/* Records: a build's kernel info crosses as KernelInfo records, each with
 * an array of KernelArg records, and comes back field for field. */
START_TEST(records_roundtrip)
{
	const struct cmx_KernelArg args[2] = {
	    {.address = 0x119b, .access = 0x11a3, .type_qual = 1,
	     .type_name = {"float*", 7}, .name = {"out", 4}},
	    {.address = 0x119e, .type_name = {"uint", 5}, .name = {"n", 2}},
	};
	const uint64_t reqd[3] = {64, 1, 1};
	const struct cmx_KernelInfo ks[2] = {
	    {.name = {"scale", 6}, .attributes = {"", 1}, .args = {args, 2},
	     .reqd = {reqd, 3}},
	    {.name = {"empty", 6}, .attributes = {"", 1}},
	};
	struct cmx_BuildProgram_out out = {.kernels = {ks, 2}}, back;
	size_t n = cmx_codec_size(&cmx_desc_BuildProgram_out, &out);
	uint64_t buf[64];

	/* count; per kernel: name, attributes, args count, reqd count. */
	ck_assert_uint_le(n, sizeof(buf));
	ck_assert(cmx_desc_BuildProgram_out.flags & CMX_D_OWNS);
	cmx_codec_encode(&cmx_desc_BuildProgram_out, &out, (uint8_t *)buf);
	ck_assert_uint_eq(buf[0], 2);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_BuildProgram_out, (uint8_t *)buf, n, &back), 0);
	ck_assert_uint_eq(back.kernels.n, 2);
	ck_assert_str_eq(back.kernels.v[0].name.ptr, "scale");
	ck_assert_uint_eq(back.kernels.v[0].args.n, 2);
	ck_assert_uint_eq(back.kernels.v[0].args.v[0].access, 0x11a3);
	ck_assert_str_eq(back.kernels.v[0].args.v[1].type_name.ptr, "uint");
	ck_assert_uint_eq(back.kernels.v[0].reqd.n, 3);
	ck_assert_uint_eq(back.kernels.v[0].reqd.v[0], 64);
	ck_assert_uint_eq(back.kernels.v[1].args.n, 0);
	ck_assert_ptr_null(back.kernels.v[1].args.v);
	ck_assert_uint_eq(back.kernels.v[1].reqd.n, 0);
	cmx_codec_release(&cmx_desc_BuildProgram_out, &back);
	ck_assert_ptr_null(back.kernels.v);

	/* Every truncation fails, and frees what it had decoded (ASan). */
	for (size_t cut = 8; cut < n; cut += 8)
		ck_assert_int_eq(cmx_codec_decode(&cmx_desc_BuildProgram_out, (uint8_t *)buf, cut,
						  &back), -EBADMSG);
}
END_TEST

/* A count is checked against the bytes there before anything is
 * allocated, and against the schema's max; a bad field deep inside fails
 * the whole message. */
START_TEST(records_bounds)
{
	uint64_t msg[16] = {0};
	struct cmx_BuildProgram_out k;
	struct cmx_GetDeviceInfoAll_out di;
	struct cmx_IncludeFiles_bulk inc;
	static char longpath[1025];
	struct cmx_IncludeFile f = {.path = {longpath, sizeof(longpath)}, .data = {"x", 1}};
	struct cmx_IncludeFiles_bulk big = {.files = {&f, 1}};
	static uint64_t enc[256];

	/* 2^40 kernels in 8 bytes: refused without allocating. */
	msg[0] = 1ull << 40;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_BuildProgram_out, (uint8_t *)msg, 8, &k),
			 -EBADMSG);
	/* One kernel takes at least 4 * 8 bytes. */
	msg[0] = 2;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_BuildProgram_out, (uint8_t *)msg, 8 * 8, &k),
			 -EBADMSG);
	/* One kernel: name "k", attributes "", no args, reqd of 4 (max 3). */
	msg[0] = 1;
	msg[1] = 2;
	memcpy(&msg[2], "k", 2);
	msg[3] = 1;
	msg[4] = 0;
	msg[5] = 0;
	msg[6] = 4;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_BuildProgram_out, (uint8_t *)msg, 11 * 8, &k),
			 -EBADMSG);
	msg[6] = 0;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_BuildProgram_out, (uint8_t *)msg, 7 * 8, &k), 0);
	cmx_codec_release(&cmx_desc_BuildProgram_out, &k);
	/* A kernel name without its NUL. */
	memcpy(&msg[2], "kk", 2);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_BuildProgram_out, (uint8_t *)msg, 7 * 8, &k),
			 -EBADMSG);
	/* A device info value over its 1 MiB. */
	msg[0] = 1;
	msg[1] = 0x1000;
	msg[2] = (1u << 20) + 1;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_GetDeviceInfoAll_out, (uint8_t *)msg, 3 * 8,
					  &di), -EBADMSG);
	/* An include path over the schema's 1024 bytes. */
	ck_assert_uint_le(cmx_codec_size(&cmx_desc_IncludeFiles_bulk, &big), sizeof(enc));
	cmx_codec_encode(&cmx_desc_IncludeFiles_bulk, &big, (uint8_t *)enc);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_IncludeFiles_bulk, (uint8_t *)enc,
					  cmx_codec_size(&cmx_desc_IncludeFiles_bulk, &big), &inc),
			 -EBADMSG);
	f.path.len = 1024;
	cmx_codec_encode(&cmx_desc_IncludeFiles_bulk, &big, (uint8_t *)enc);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_IncludeFiles_bulk, (uint8_t *)enc,
					  cmx_codec_size(&cmx_desc_IncludeFiles_bulk, &big), &inc),
			 0);
	ck_assert_uint_eq(inc.files.n, 1);
	ck_assert_uint_eq(inc.files.v[0].data.len, 1);
	cmx_codec_release(&cmx_desc_IncludeFiles_bulk, &inc);
}
END_TEST

/* The op table agrees with the schema's rules. */
START_TEST(op_table)
{
	unsigned n = 0;

	for (unsigned op = 0; op < CMX_OP_LIMIT; op++) {
		const struct cmx_opinfo *oi = cmx_op_info(op);
		if (!oi)
			continue;
		n++;
		ck_assert_uint_eq(oi->in->op, op);
		ck_assert(!(oi->flags & CMX_OPF_SYNC) == !oi->out);
		ck_assert(oi->flags & (CMX_OPF_SYNC | CMX_OPF_ASYNC));
	}
	ck_assert_uint_ge(n, 60); /* every call of the schema */
	ck_assert_ptr_null(cmx_op_info(0));
	ck_assert_ptr_null(cmx_op_info(CMX_OP_LIMIT));
	ck_assert_ptr_null(cmx_op_info(0xffff));
}
END_TEST

/* A call goes sync or async as the schema allows: `both` calls either way,
 * the header saying which; an area block only where data can land. */
START_TEST(sync_bit)
{
	struct cmx_hdr h = { .size = 0 };
	static const struct {
		uint16_t op, flags;
		int ok;
	} cases[] = {
		{ CMX_OP_ReadBuffer, CMX_HDR_SYNC, 1 },
		{ CMX_OP_ReadBuffer, 0, 1 },
		{ CMX_OP_WriteBuffer, CMX_HDR_SYNC, 1 },
		{ CMX_OP_WriteBuffer, 0, 1 },
		{ CMX_OP_Finish, CMX_HDR_SYNC, 1 },
		{ CMX_OP_Finish, 0, 0 },	     /* sync only */
		{ CMX_OP_CopyBuffer, CMX_HDR_SYNC, 0 }, /* async only */
		{ CMX_OP_ReadBuffer, CMX_HDR_AREA, 1 }, /* bulk area */
		{ CMX_OP_ReadBuffer, CMX_HDR_SYNC | CMX_HDR_AREA, 1 },
		{ CMX_OP_ReadImage, CMX_HDR_SYNC | CMX_HDR_AREA, 1 }, /* bulk out */
		{ CMX_OP_ReadImage, CMX_HDR_AREA, 0 },		       /* no bulk area */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		h.op = cases[i].op;
		h.flags = cases[i].flags;
		h.bulk = cases[i].flags & CMX_HDR_AREA ? 64 : 0;
		ck_assert_msg((cmx_frame_check_call(&h) == 0) == cases[i].ok, "case %zu", i);
	}
}
END_TEST

/* The bytes of docs/protocol.md's example `name` (the block after its
 * "<!-- wire: name -->" line): each line an offset, bytes one space apart,
 * and after two spaces the field's words. The offsets must count along. */
static size_t doc_example(const char *name, uint8_t *b, size_t cap)
{
	const char *dir = getenv("srcdir");
	char path[4096], line[256], mark[128];
	int in = 0, found = 0;
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/docs/protocol.md", dir ? dir : ".");
	snprintf(mark, sizeof(mark), "<!-- wire: %s -->\n", name);
	f = fopen(path, "r");
	ck_assert_msg(f, "%s", path);
	while (fgets(line, sizeof(line), f)) {
		const char *p = line;
		char *end;

		if (!found) {
			found = !strcmp(line, mark);
			continue;
		}
		if (!strncmp(line, "```", 3)) {
			if (in)
				break;
			in = 1;
			continue;
		}
		ck_assert_msg(in, "%s: no block after the mark", name);
		ck_assert_msg(strtoul(p, &end, 16) == n && end == p + 4, "%s: offset %s", name, p);
		p = end + 2;
		while (isxdigit((unsigned char)p[0]) && isxdigit((unsigned char)p[1]) &&
		       (p[2] == ' ' || p[2] == '\n')) {
			ck_assert(n < cap);
			b[n++] = (uint8_t)strtoul((char[]){ p[0], p[1], 0 }, NULL, 16);
			p += 2;
			if (p[0] != ' ' || p[1] == ' ')
				break;
			p++;
		}
	}
	fclose(f);
	ck_assert_msg(found && in, "%s: not in %s", name, path);
	return n;
}

/* A message as the sender builds it: header, encoded arguments (after the
 * status, for a reply), payload. */
static size_t wire_msg(uint8_t *b, uint16_t op, uint16_t flags, uint32_t seq,
		       const struct cmx_msgdesc *d, const void *args, const int64_t *status,
		       const void *payload, uint64_t bulk)
{
	size_t k = status ? 8 : 0, sz = k + cmx_codec_size(d, args);
	struct cmx_hdr h = { .size = (uint32_t)sz, .op = op, .flags = flags, .seq = seq,
			     .bulk = bulk };

	memcpy(b, &h, CMX_HDR_SIZE);
	if (status)
		memcpy(b + CMX_HDR_SIZE, status, 8);
	cmx_codec_encode(d, args, b + CMX_HDR_SIZE + k);
	if (bulk)
		memcpy(b + CMX_HDR_SIZE + sz, payload, bulk);
	return CMX_HDR_SIZE + sz + bulk;
}

/* docs/protocol.md's worked example (A call on the wire) is what the
 * schema's descriptors encode: a ReadBuffer sent sync and its Reply, then
 * sent async and its ReadDone. */
START_TEST(doc_wire_example)
{
	uint8_t want[256], doc[256], data[16];
	struct cmx_hdr h;
	struct cmx_ReadBuffer_in rb = { .queue = { 0x10002 }, .mem = { 0x10003 }, .offset = 64,
					.size = sizeof(data) };
	struct cmx_ReadBuffer_out none = { 0 };
	struct cmx_ReadDone_in rd = { .tag = 0x7fa0013b40 };
	const int64_t ok = 0;
	size_t n;

	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)i;
	n = wire_msg(want, CMX_OP_ReadBuffer, CMX_HDR_SYNC, 7, &cmx_desc_ReadBuffer_in, &rb, NULL,
		     NULL, 0);
	ck_assert_uint_eq(doc_example("ReadBuffer sync", doc, sizeof(doc)), n);
	ck_assert_mem_eq(doc, want, n);
	memcpy(&h, want, CMX_HDR_SIZE);
	ck_assert_int_eq(cmx_frame_check_call(&h), 0);

	n = wire_msg(want, CMX_OP_REPLY, 0, 7, cmx_op_info(CMX_OP_ReadBuffer)->out, &none, &ok,
		     data, sizeof(data));
	ck_assert_uint_eq(doc_example("ReadBuffer reply", doc, sizeof(doc)), n);
	ck_assert_mem_eq(doc, want, n);

	rb.tag = rd.tag;
	n = wire_msg(want, CMX_OP_ReadBuffer, 0, 0, &cmx_desc_ReadBuffer_in, &rb, NULL, NULL, 0);
	ck_assert_uint_eq(doc_example("ReadBuffer async", doc, sizeof(doc)), n);
	ck_assert_mem_eq(doc, want, n);
	memcpy(&h, want, CMX_HDR_SIZE);
	ck_assert_int_eq(cmx_frame_check_call(&h), 0);

	n = wire_msg(want, CMX_OP_ReadDone, 0, 0, &cmx_desc_ReadDone_in, &rd, NULL, data,
		     sizeof(data));
	ck_assert_uint_eq(doc_example("ReadDone", doc, sizeof(doc)), n);
	ck_assert_mem_eq(doc, want, n);
}
END_TEST

/* The guest's stale-id check: the smallest id at least `from` among the
 * id, new-id and id[] fields, whatever else the call carries. */
START_TEST(min_id)
{
	uint64_t g[1] = { 5 }, w[3] = { 0x20005, 0x10003, 0x30000 };
	struct cmx_EnqueueKernel_in in = {
		.queue = { 0x20001 }, .kernel = { 0x20002 }, .global = { g, 1 },
		.wait = { w, 3 }, .event = { 0x20009 },
	};
	struct cmx_SetKernelArg_in a = { .kernel = { 0x40000 } };

	ck_assert_uint_eq(cmx_codec_min_id(&cmx_desc_EnqueueKernel_in, &in, 0x10000), 0x10003);
	ck_assert_uint_eq(cmx_codec_min_id(&cmx_desc_EnqueueKernel_in, &in, 0x10004), 0x20001);
	in.wait.n = 0;
	in.event.id = 0;
	ck_assert_uint_eq(cmx_codec_min_id(&cmx_desc_EnqueueKernel_in, &in, 0x10000), 0x20001);
	ck_assert_uint_eq(cmx_codec_min_id(&cmx_desc_EnqueueKernel_in, &in, 0x30000), UINT64_MAX);
	ck_assert_uint_eq(cmx_codec_min_id(&cmx_desc_SetKernelArg_in, &a, 0x10000), 0x40000);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("codec");
	TCase *tc = tcase_create("codec");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, roundtrip_enqueue);
	tcase_add_test(tc, roundtrip_strings);
	tcase_add_test(tc, truncated_and_trailing);
	tcase_add_test(tc, absurd_counts);
	tcase_add_test(tc, strings_must_be_terminated);
	tcase_add_test(tc, records_roundtrip);
	tcase_add_test(tc, records_bounds);
	tcase_add_test(tc, op_table);
	tcase_add_test(tc, sync_bit);
	tcase_add_test(tc, doc_wire_example);
	tcase_add_test(tc, min_id);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
