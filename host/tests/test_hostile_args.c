// SPDX-License-Identifier: MIT
// A hostile tenant against a live clmuxd on PoCL: arguments the driver would
// trust (huge __local sizes, bytes for handles, short image pitches, boxes
// outside their objects), fresh memory that held another tenant's bytes, and
// failed replies. Tenant A, a raw client that skips every guest check, gets
// the specification's error; another tenant's checksummed work goes on.
#include <CL/cl_ext.h>
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../guest/tests/e2e.h"
#include "proto.gen.h"

#include "rawclient.h"

/* Reads one reply and its payload (at most cap bytes, into buf); returns
 * its status and sets *got to the payload's length. */
static int recv_reply_bulk(struct client *c, const struct cmx_msgdesc *d, void *out, void *buf,
			   uint64_t cap, uint64_t *got)
{
	struct cmx_hdr h;
	uint8_t *args;
	int64_t status;

	ck_assert_int_eq(recv(c->fd, &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
	ck_assert_uint_eq(h.op, CMX_OP_REPLY);
	ck_assert_uint_eq(h.seq, c->seq);
	args = aligned_alloc(8, h.size + 8);
	ck_assert_int_eq(recv(c->fd, args, h.size, MSG_WAITALL), (ssize_t)h.size);
	memcpy(&status, args, 8);
	if (d)
		ck_assert_int_eq(cmx_codec_decode(d, args + 8, h.size - 8, out), 0);
	free(args);
	ck_assert_uint_le(h.bulk, cap);
	if (h.bulk)
		ck_assert_int_eq(recv(c->fd, buf, h.bulk, MSG_WAITALL), (ssize_t)h.bulk);
	*got = h.bulk;
	return (int)status;
}

/* The session's failed async calls so far, and the last one's status. */
static void async_errors(struct client *c, uint64_t *n, int32_t *last)
{
	struct cmx_GetStats_in in = {0};
	struct cmx_GetStats_out out;
	uint8_t *keep;

	send_msg(c, &cmx_desc_GetStats_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_GetStats_out, &out, &keep), 0);
	ck_assert_uint_ge(out.counters.n, 9);
	*n = out.counters.v[5];
	*last = (int32_t)out.counters.v[8];
	free(keep);
}

/* Sends an async call and checks that it, alone, failed with want. */
static void async_fails(struct client *c, const struct cmx_msgdesc *d, const void *in,
			const void *bulk, uint64_t len, int32_t want, const char *what)
{
	uint64_t n0, n1;
	int32_t last;

	async_errors(c, &n0, &last);
	send_msg(c, d, in, 0, bulk, len);
	async_errors(c, &n1, &last);
	ck_assert_msg(n1 == n0 + 1 && last == want, "%s: %llu failures, last %d (want %d)", what,
		      (unsigned long long)(n1 - n0), last, want);
}

static void async_ok(struct client *c, const struct cmx_msgdesc *d, const void *in,
		     const void *bulk, uint64_t len, const char *what)
{
	uint64_t n0, n1;
	int32_t last;

	async_errors(c, &n0, &last);
	send_msg(c, d, in, 0, bulk, len);
	async_errors(c, &n1, &last);
	ck_assert_msg(n1 == n0, "%s failed: %d", what, last);
}

/* A context (id) and an in-order queue (id + 1) on device 1. */
static void ctx_queue(struct client *c, uint64_t id)
{
	uint64_t devs[1] = {1}, qprops[1] = {0};
	struct cmx_CreateContext_in ctx = {.context = {id}, .devices = {devs, 1}};
	struct cmx_CreateQueue_in qu = {
	    .queue = {id + 1}, .context = {id}, .device = {1}, .props = {qprops, 1}};

	send_msg(c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
}

/* Program `id` of context ctx built from src, and its kernel kid named name. */
static void program_kernel(struct client *c, uint64_t ctx, uint64_t id, const char *src,
			   uint64_t kid, const char *name)
{
	uint64_t devs[1] = {1};
	struct cmx_CreateProgramWithSource_in ps = {
	    .program = {id}, .context = {ctx}, .source = {src, strlen(src)}};
	struct cmx_BuildProgram_in b = {.program = {id}, .devices = {devs, 1}};
	struct cmx_BuildProgram_out bout;
	struct cmx_CreateKernel_in k = {
	    .kernel = {kid}, .program = {id}, .name = {name, strlen(name) + 1}};
	uint8_t *keep;

	send_msg(c, &cmx_desc_CreateProgramWithSource_in, &ps, 0, NULL, 0);
	send_msg(c, &cmx_desc_BuildProgram_in, &b, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_BuildProgram_out, &bout, &keep), CL_SUCCESS);
	cmx_codec_release(&cmx_desc_BuildProgram_out, &bout);
	free(keep);
	send_msg(c, &cmx_desc_CreateKernel_in, &k, 0, NULL, 0);
}

static uint64_t device_local_mem(struct client *c)
{
	struct cmx_GetDeviceInfo_in in = {.device = {1}, .param = CL_DEVICE_LOCAL_MEM_SIZE};
	struct cmx_GetDeviceInfo_out out;
	uint64_t v = 0;
	uint8_t *keep;

	send_msg(c, &cmx_desc_GetDeviceInfo_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_GetDeviceInfo_out, &out, &keep), CL_SUCCESS);
	ck_assert_uint_eq(out.value.len, sizeof(v));
	memcpy(&v, out.value.ptr, sizeof(v));
	free(keep);
	ck_assert_uint_gt(v, 0);
	return v;
}

static struct cmx_SetKernelArg_in arg_mem(uint64_t k, uint64_t i, uint64_t mem)
{
	return (struct cmx_SetKernelArg_in){
	    .kernel = {k}, .index = i, .kind = 1, .mem = {mem}, .size = sizeof(cl_mem)};
}

static struct cmx_SetKernelArg_in arg_local(uint64_t k, uint64_t i, uint64_t size)
{
	return (struct cmx_SetKernelArg_in){.kernel = {k}, .index = i, .kind = 2, .size = size};
}

static struct cmx_SetKernelArg_in arg_bytes(uint64_t k, uint64_t i, const void *v, uint64_t n)
{
	return (struct cmx_SetKernelArg_in){
	    .kernel = {k}, .index = i, .kind = 0, .size = n, .value = {v, n}};
}

/* Launches kernel k on queue q over n items in groups of local (0: the
 * driver's choice) with a new event ev; returns the event's creation
 * status (a failed launch poisons it with its error). */
static int launch(struct client *c, uint64_t q, uint64_t k, uint64_t n, uint64_t local, uint64_t ev)
{
	uint64_t g[1] = {n}, l[1] = {local};
	struct cmx_EnqueueKernel_in in = {.queue = {q},
					  .kernel = {k},
					  .global = {g, 1},
					  .local = {l, local ? 1 : 0},
					  .event = {ev}};
	struct cmx_GetCreateStatus_in st = {.object = ev};
	struct cmx_GetCreateStatus_out out;

	send_msg(c, &cmx_desc_EnqueueKernel_in, &in, 0, NULL, 0);
	send_msg(c, &cmx_desc_GetCreateStatus_in, &st, 1, NULL, 0);
	return recv_reply(c, &cmx_desc_GetCreateStatus_out, &out, NULL);
}

static void finish(struct client *c, uint64_t q)
{
	struct cmx_Finish_in in = {.queue = {q}};

	send_msg(c, &cmx_desc_Finish_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, NULL, NULL, NULL), CL_SUCCESS);
}

static int read_buffer(struct client *c, uint64_t q, uint64_t mem, uint64_t off, uint64_t size,
		       void *dst, uint64_t *got)
{
	struct cmx_ReadBuffer_in in = {.queue = {q}, .mem = {mem}, .offset = off, .size = size};

	send_msg(c, &cmx_desc_ReadBuffer_in, &in, 1, NULL, 0);
	return recv_reply_bulk(c, NULL, NULL, dst, size, got);
}

/*
 * Another tenant's work while A misbehaves: 4096 words through a kernel
 * (x * 2 + 1) in a session of its own, every one checked. Fails the test
 * if the daemon is gone or the result is wrong.
 */
static void other_tenant_works(void)
{
	static const char src[] = "__kernel void f(__global uint *x) {\n"
				  "  size_t i = get_global_id(0); x[i] = x[i] * 2u + 1u;\n"
				  "}\n";
	enum { N = 4096 };
	struct cmx_CreateBuffer_in buf = {.mem = {0x2f002}, .context = {0x2f000}, .size = N * 4};
	struct cmx_SetKernelArg_in a = arg_mem(0x2f004, 0, 0x2f002);
	static uint32_t in[N], out[N];
	struct client b;
	uint64_t got;

	for (uint32_t i = 0; i < N; i++)
		in[i] = i * 2654435761u;
	hello(&b);
	ping_ok(&b);
	ctx_queue(&b, 0x2f000);
	send_msg(&b, &cmx_desc_CreateBuffer_in, &buf, 0, in, sizeof(in));
	program_kernel(&b, 0x2f000, 0x2f003, src, 0x2f004, "f");
	async_ok(&b, &cmx_desc_SetKernelArg_in, &a, NULL, 0, "B's argument");
	ck_assert_int_eq(launch(&b, 0x2f001, 0x2f004, N, 0, 0x2f005), CL_SUCCESS);
	ck_assert_int_eq(read_buffer(&b, 0x2f001, 0x2f002, 0, sizeof(out), out, &got), CL_SUCCESS);
	ck_assert_uint_eq(got, sizeof(out));
	for (uint32_t i = 0; i < N; i++)
		ck_assert_msg(out[i] == in[i] * 2u + 1u, "B's word %u: %u, want %u", i, out[i],
			      in[i] * 2u + 1u);
	close(b.fd);
}

/* Case 3: a __local argument of 2^40 bytes aborted PoCL, and the daemon
 * with it, at launch. The size is refused at clSetKernelArg; sizes that fit
 * one by one but not together are refused at launch. */
START_TEST(local_sizes)
{
	static const char src[] =
	    "__kernel void k(__global int *o, __local char *a, __local char *b) {\n"
	    "  a[get_local_id(0)] = 1; b[get_local_id(0)] = 2;\n"
	    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
	    "  o[get_global_id(0)] = a[0] + b[0];\n"
	    "}\n";
	struct cmx_CreateBuffer_in buf = {.mem = {0x20002}, .context = {0x20000}, .size = 256};
	struct cmx_SetKernelArg_in o = arg_mem(0x20004, 0, 0x20002);
	struct cmx_SetKernelArg_in huge = arg_local(0x20004, 1, 1ull << 40);
	struct cmx_SetKernelArg_in zero = arg_local(0x20004, 1, 0);
	struct cmx_SetKernelArg_in small_a = arg_local(0x20004, 1, 64),
				   small_b = arg_local(0x20004, 2, 64);
	struct client a;
	uint64_t lm, o0, b0;

	daemon_counts(&o0, &b0);
	hello(&a);
	lm = device_local_mem(&a);
	ctx_queue(&a, 0x20000);
	send_msg(&a, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
	program_kernel(&a, 0x20000, 0x20003, src, 0x20004, "k");
	async_ok(&a, &cmx_desc_SetKernelArg_in, &o, NULL, 0, "the buffer");
	async_fails(&a, &cmx_desc_SetKernelArg_in, &huge, NULL, 0, CL_INVALID_ARG_SIZE,
		    "2^40 bytes");
	huge.size = lm + 1;
	async_fails(&a, &cmx_desc_SetKernelArg_in, &huge, NULL, 0, CL_INVALID_ARG_SIZE,
		    "one too many");
	async_fails(&a, &cmx_desc_SetKernelArg_in, &zero, NULL, 0, CL_INVALID_ARG_SIZE, "no bytes");
	/* The launch that would have aborted: argument 1 is still unset. */
	ck_assert_int_eq(launch(&a, 0x20001, 0x20004, 64, 64, 0x20010), CL_INVALID_KERNEL_ARGS);
	other_tenant_works();
	/* Each fits, both do not: PoCL 3.1 aborted in the launch. */
	huge.size = lm;
	async_ok(&a, &cmx_desc_SetKernelArg_in, &huge, NULL, 0, "all of it");
	small_b.size = lm;
	async_ok(&a, &cmx_desc_SetKernelArg_in, &small_b, NULL, 0, "all of it again");
	ck_assert_int_eq(launch(&a, 0x20001, 0x20004, 64, 64, 0x20011), CL_OUT_OF_RESOURCES);
	/* Sizes that fit run, and the kernel sees its memory. */
	async_ok(&a, &cmx_desc_SetKernelArg_in, &small_a, NULL, 0, "64 bytes");
	small_b.size = 64;
	async_ok(&a, &cmx_desc_SetKernelArg_in, &small_b, NULL, 0, "64 bytes");
	ck_assert_int_eq(launch(&a, 0x20001, 0x20004, 64, 64, 0x20012), CL_SUCCESS);
	{
		int32_t res[64];
		uint64_t got;

		ck_assert_int_eq(read_buffer(&a, 0x20001, 0x20002, 0, sizeof(res), res, &got), 0);
		for (int i = 0; i < 64; i++)
			ck_assert_int_eq(res[i], 3);
	}
	other_tenant_works();
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

/* Bytes where the kernel takes a handle, and handles where it takes bytes:
 * each the specification's error, none reaching the driver (PoCL 3.1
 * dereferenced 8 bytes given for a buffer: SIGSEGV in the daemon). */
START_TEST(argument_kinds)
{
	static const char src[] =
	    "typedef struct { int v[4]; } quad;\n"
	    "__kernel void k(__global long *o, int i, long l, __local int *loc, sampler_t s,\n"
	    "                __read_only image2d_t img, quad q) {\n"
	    "  o[0] = i + l + q.v[3] + read_imagei(img, s, (int2)(0, 0)).x; loc[0] = 0;\n"
	    "}\n";
	uint64_t fmt[2] = {CL_RGBA, CL_SIGNED_INT32}, desc[9] = {CL_MEM_OBJECT_IMAGE2D, 4, 4};
	uint64_t smp_props[6] = {CL_SAMPLER_NORMALIZED_COORDS, 0,
				 CL_SAMPLER_ADDRESSING_MODE,   CL_ADDRESS_NONE,
				 CL_SAMPLER_FILTER_MODE,       CL_FILTER_NEAREST};
	struct cmx_CreateBuffer_in buf = {.mem = {0x21002}, .context = {0x21000}, .size = 64};
	struct cmx_CreateImage_in img = {.mem = {0x21005},
					 .context = {0x21000},
					 .flags = CL_MEM_READ_ONLY,
					 .format = {fmt, 2},
					 .desc = {desc, 9}};
	struct cmx_CreateImage_out iout;
	struct cmx_CreateSampler_in smp = {
	    .sampler = {0x21006}, .context = {0x21000}, .props = {smp_props, 6}};
	static const uint64_t wild = 0x4141414141414141ull;
	static const uint8_t one = 5, wide[64] = {7};
	struct cmx_SetKernelArg_in bad[] = {
	    arg_bytes(0x21004, 0, &wild, 8),	       /* bytes for a buffer */
	    arg_bytes(0x21004, 4, &wild, 8),	       /* bytes for a sampler */
	    arg_mem(0x21004, 4, 0x21002),	       /* a buffer for a sampler */
	    arg_mem(0x21004, 5, 0x21002),	       /* a buffer for an image */
	    arg_mem(0x21004, 0, 0x21005),	       /* an image for a buffer */
	    arg_mem(0x21004, 2, 0x21002),	       /* a handle for a long */
	    arg_bytes(0x21004, 2, &one, 1),	       /* 1 byte for a long */
	    arg_bytes(0x21004, 1, wide, sizeof(wide)), /* 64 bytes for an int */
	    arg_local(0x21004, 1, 4),		       /* no value for an int */
	    arg_bytes(0x21004, 3, wide, 4),	       /* a value for __local */
	    arg_mem(0x21004, 3, 0x21002),	       /* a buffer for __local */
	    arg_local(0x21004, 7, 4),		       /* past the last argument */
	};
	static const int32_t want[] = {
	    CL_INVALID_MEM_OBJECT, CL_INVALID_SAMPLER,	  CL_INVALID_SAMPLER,
	    CL_INVALID_MEM_OBJECT, CL_INVALID_MEM_OBJECT, CL_INVALID_ARG_VALUE,
	    CL_INVALID_ARG_SIZE,   CL_INVALID_ARG_SIZE,	  CL_INVALID_ARG_VALUE,
	    CL_INVALID_ARG_VALUE,  CL_INVALID_ARG_VALUE,  CL_INVALID_ARG_INDEX,
	};
	struct client a;
	uint64_t o0, b0;

	_Static_assert(sizeof(bad) / sizeof(*bad) == sizeof(want) / sizeof(*want), "one each");
	daemon_counts(&o0, &b0);
	hello(&a);
	ctx_queue(&a, 0x21000);
	send_msg(&a, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
	program_kernel(&a, 0x21000, 0x21003, src, 0x21004, "k");
	send_msg(&a, &cmx_desc_CreateImage_in, &img, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_CreateImage_out, &iout, NULL), CL_SUCCESS);
	send_msg(&a, &cmx_desc_CreateSampler_in, &smp, 0, NULL, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		char what[32];

		snprintf(what, sizeof(what), "bad argument %zu", i);
		async_fails(&a, &cmx_desc_SetKernelArg_in, &bad[i], NULL, 0, want[i], what);
	}
	other_tenant_works();
	/* Each argument as its kind wants it is taken. */
	{
		int32_t i4 = 1;
		int64_t l8 = 2;
		int32_t q[4] = {0, 0, 0, 4};
		struct cmx_SetKernelArg_in good[] = {
		    arg_mem(0x21004, 0, 0x21002),
		    arg_bytes(0x21004, 1, &i4, 4),
		    arg_bytes(0x21004, 2, &l8, 8),
		    arg_local(0x21004, 3, 16),
		    {.kernel = {0x21004},
		     .index = 4,
		     .kind = 3,
		     .sampler = {0x21006},
		     .size = sizeof(cl_sampler)},
		    arg_mem(0x21004, 5, 0x21005),
		    arg_bytes(0x21004, 6, q, sizeof(q)),
		};

		for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
			async_ok(&a, &cmx_desc_SetKernelArg_in, &good[i], NULL, 0,
				 "a good argument");
		ck_assert_int_eq(launch(&a, 0x21001, 0x21004, 1, 1, 0x21010), CL_SUCCESS);
		finish(&a, 0x21001);
	}
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

/*
 * By-value arguments: a scalar or vector of the wrong size is
 * CL_INVALID_ARG_SIZE. A struct's size no query tells, and PoCL 3.1 takes
 * any size for one: given 4 bytes for a 256-byte struct, the kernel read
 * 252 bytes of the driver's heap past them. The kernel sees zeros past
 * what the tenant gave, never another tenant's bytes.
 */
START_TEST(value_sizes)
{
	static const char src[] = "typedef struct { uint v[64]; } big;\n"
				  "__kernel void k(__global uint *o, big b, uint2 w) {\n"
				  "  for (int i = 0; i < 64; i++) o[i] = b.v[i] + w.y;\n"
				  "}\n";
	static const uint32_t one = 0x11111111u, two[2] = {0, 0}, three[3] = {0, 0, 0};
	static const uint8_t wide[64] = {9};
	struct cmx_CreateBuffer_in buf = {.mem = {0x2a002}, .context = {0x2a000}, .size = 256};
	struct cmx_SetKernelArg_in o = arg_mem(0x2a004, 0, 0x2a002);
	struct cmx_SetKernelArg_in bad[] = {
	    arg_bytes(0x2a004, 2, &one, 4),		 /* 4 bytes for a uint2 */
	    arg_bytes(0x2a004, 2, three, sizeof(three)), /* 12 bytes for a uint2 */
	    arg_bytes(0x2a004, 2, wide, sizeof(wide)),	 /* 64 bytes for a uint2 */
	};
	struct cmx_SetKernelArg_in w = arg_bytes(0x2a004, 2, two, sizeof(two));
	struct cmx_SetKernelArg_in b = arg_bytes(0x2a004, 1, &one, sizeof(one));
	uint32_t res[64];
	unsigned foreign = 0;
	struct client a;
	uint64_t o0, b0, got, n0, n1;
	int32_t last;

	daemon_counts(&o0, &b0);
	hello(&a);
	ctx_queue(&a, 0x2a000);
	send_msg(&a, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
	program_kernel(&a, 0x2a000, 0x2a003, src, 0x2a004, "k");
	async_ok(&a, &cmx_desc_SetKernelArg_in, &o, NULL, 0, "the buffer");
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		async_fails(&a, &cmx_desc_SetKernelArg_in, &bad[i], NULL, 0, CL_INVALID_ARG_SIZE,
			    "a uint2 of the wrong size");
	async_ok(&a, &cmx_desc_SetKernelArg_in, &w, NULL, 0, "a uint2");
	/* 4 bytes for the struct: no query tells its size. A driver that
	 * knows it refuses them (NVIDIA); PoCL takes them. */
	async_errors(&a, &n0, &last);
	send_msg(&a, &cmx_desc_SetKernelArg_in, &b, 0, NULL, 0);
	async_errors(&a, &n1, &last);
	if (n1 != n0) {
		ck_assert_int_eq(last, CL_INVALID_ARG_SIZE);
		goto out;
	}
	ck_assert_int_eq(launch(&a, 0x2a001, 0x2a004, 1, 1, 0x2a010), CL_SUCCESS);
	memset(res, 0x5a, sizeof(res));
	ck_assert_int_eq(read_buffer(&a, 0x2a001, 0x2a002, 0, sizeof(res), res, &got), 0);
	ck_assert_uint_eq(got, sizeof(res));
	ck_assert_uint_eq(res[0], one);
	for (int i = 1; i < 64; i++)
		foreign += res[i] != 0;
	ck_assert_msg(!foreign, "%u of 63 words past the 4 bytes given were not 0 (word 1: %#x)",
		      foreign, res[1]);
out:
	other_tenant_works();
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

/* Case 7: a 4x2 RGBA8 image with row_pitch 8 and a 16-byte payload was
 * made from 8 bytes of daemon heap past the payload. Pitches shorter than
 * a row or slice, and pitches without contents, are
 * CL_INVALID_IMAGE_DESCRIPTOR; an image larger than its buffer too. */
START_TEST(image_pitches)
{
	static const uint8_t px[256] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	uint64_t fmt[2] = {CL_RGBA, CL_UNSIGNED_INT8};
	static const struct {
		uint64_t desc[9];
		uint64_t bulk;
		int32_t want;
	} cases[] = {
	    /* type, w, h, d, array, row, slice, mips, samples */
	    {{CL_MEM_OBJECT_IMAGE2D, 4, 2, 0, 0, 8, 0}, 16, CL_INVALID_IMAGE_DESCRIPTOR},
	    {{CL_MEM_OBJECT_IMAGE2D, 4, 2, 0, 0, 18, 0}, 36, CL_INVALID_IMAGE_DESCRIPTOR},
	    {{CL_MEM_OBJECT_IMAGE2D, 4, 2, 0, 0, 64, 0}, 0, CL_INVALID_IMAGE_DESCRIPTOR},
	    {{CL_MEM_OBJECT_IMAGE3D, 4, 2, 2, 0, 16, 16}, 32, CL_INVALID_IMAGE_DESCRIPTOR},
	    {{CL_MEM_OBJECT_IMAGE2D_ARRAY, 4, 2, 0, 2, 16, 40}, 80, CL_INVALID_IMAGE_DESCRIPTOR},
	    {{CL_MEM_OBJECT_IMAGE1D_ARRAY, 4, 0, 0, 2, 16, 8}, 16, CL_INVALID_IMAGE_DESCRIPTOR},
	    {{CL_MEM_OBJECT_IMAGE2D, 1ull << 62, 4, 0, 0, 0, 0}, 0, CL_INVALID_IMAGE_SIZE},
	    {{CL_MEM_OBJECT_IMAGE2D, 0, 2, 0, 0, 0, 0}, 0, CL_INVALID_IMAGE_DESCRIPTOR},
	    {{CL_MEM_OBJECT_IMAGE2D, 4, 2, 0, 0, 16, 0}, 32, CL_SUCCESS},
	};
	uint64_t devs[1] = {1}, buf_desc[9] = {CL_MEM_OBJECT_IMAGE1D_BUFFER, 64}, o0, b0;
	struct cmx_CreateContext_in ctx = {.context = {0x22000}, .devices = {devs, 1}};
	struct cmx_CreateBuffer_in small = {.mem = {0x22001}, .context = {0x22000}, .size = 64};
	struct cmx_CreateImage_out out;
	struct client a;

	daemon_counts(&o0, &b0);
	hello(&a);
	send_msg(&a, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
		struct cmx_CreateImage_in img = {.mem = {0x22100 + i},
						 .context = {0x22000},
						 .flags = CL_MEM_READ_WRITE,
						 .format = {fmt, 2},
						 .desc = {cases[i].desc, 9}};

		send_msg(&a, &cmx_desc_CreateImage_in, &img, 1, px, cases[i].bulk);
		ck_assert_msg(recv_reply(&a, &cmx_desc_CreateImage_out, &out, NULL) ==
				  cases[i].want,
			      "image %zu", i);
		/* A failed reply carries no outputs (case 16). */
		if (cases[i].want)
			ck_assert_uint_eq(out.size, 0);
	}
	/* 64 RGBA8 pixels over a 64-byte buffer: 256 bytes it does not have. */
	send_msg(&a, &cmx_desc_CreateBuffer_in, &small, 0, NULL, 0);
	{
		struct cmx_CreateImage_in img = {.mem = {0x22200},
						 .context = {0x22000},
						 .flags = CL_MEM_READ_WRITE,
						 .format = {fmt, 2},
						 .desc = {buf_desc, 9},
						 .buffer = {0x22001}};

		send_msg(&a, &cmx_desc_CreateImage_in, &img, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(&a, &cmx_desc_CreateImage_out, &out, NULL),
				 CL_INVALID_IMAGE_DESCRIPTOR);
		buf_desc[1] = 16;
		img.mem.id = 0x22201;
		send_msg(&a, &cmx_desc_CreateImage_in, &img, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(&a, &cmx_desc_CreateImage_out, &out, NULL), CL_SUCCESS);
	}
	other_tenant_works();
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

/* Boxes of buffer, rect and image transfers outside their objects, or
 * whose sizes overflow when multiplied: CL_INVALID_VALUE before the
 * driver, and no staging of the size asked. */
START_TEST(transfer_boxes)
{
	uint64_t fmt[2] = {CL_RGBA, CL_UNSIGNED_INT8}, desc[9] = {CL_MEM_OBJECT_IMAGE2D, 4, 2};
	struct cmx_CreateBuffer_in buf = {.mem = {0x23002}, .context = {0x23000}, .size = 4096};
	struct cmx_CreateImage_in img = {.mem = {0x23003},
					 .context = {0x23000},
					 .flags = CL_MEM_READ_WRITE,
					 .format = {fmt, 2},
					 .desc = {desc, 9}};
	struct cmx_CreateImage_out iout;
	static const struct {
		uint64_t o[3], r[3], row, slice;
	} rects[] = {
	    {{0, 300, 0}, {16, 16, 1}, 16, 0},	      /* past the end */
	    {{0, 0, 0}, {16, 16, 1}, 8, 0},	      /* a row pitch shorter than a row */
	    {{0, 0, 0}, {16, 2, 2}, 16, 8},	      /* a slice pitch shorter than its rows */
	    {{0, 0, 0}, {16, 2, 2}, 16, 40},	      /* not a multiple of the row pitch */
	    {{0, 0, 0}, {16, 1ull << 60, 16}, 16, 0}, /* rows * pitch overflows */
	    {{~0ull, 0, 0}, {16, 1, 1}, 0, 0},	      /* the origin wraps */
	    {{0, 0, 0}, {1ull << 32, 1ull << 32, 1ull << 32}, 0, 0}, /* the packed size */
	};
	static const struct {
		uint64_t o[3], r[3];
	} boxes[] = {
	    {{3, 0, 0}, {4, 2, 1}}, {{0, 0, 1}, {4, 2, 1}},	{{0, 0, 0}, {4, 1ull << 62, 1}},
	    {{0, 0, 0}, {4, 2, 0}}, {{~0ull, 0, 0}, {2, 1, 1}},
	};
	static uint8_t dst[4096];
	struct client a;
	uint64_t o0, b0, got;

	daemon_counts(&o0, &b0);
	hello(&a);
	ctx_queue(&a, 0x23000);
	send_msg(&a, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
	send_msg(&a, &cmx_desc_CreateImage_in, &img, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_CreateImage_out, &iout, NULL), CL_SUCCESS);
	ck_assert_int_eq(read_buffer(&a, 0x23001, 0x23002, 4000, 200, dst, &got), CL_INVALID_VALUE);
	ck_assert_int_eq(read_buffer(&a, 0x23001, 0x23002, 1ull << 63, 1ull << 63, dst, &got),
			 CL_INVALID_VALUE);
	ck_assert_uint_eq(got, 0);
	for (size_t i = 0; i < sizeof(rects) / sizeof(*rects); i++) {
		struct cmx_ReadBufferRect_in rd = {.queue = {0x23001},
						       .mem = {0x23002},
						       .origin = {rects[i].o, 3},
						       .region = {rects[i].r, 3},
						       .row_pitch = rects[i].row,
						       .slice_pitch = rects[i].slice};

		send_msg(&a, &cmx_desc_ReadBufferRect_in, &rd, 1, NULL, 0);
		ck_assert_msg(recv_reply_bulk(&a, NULL, NULL, dst, sizeof(dst), &got) ==
				  CL_INVALID_VALUE,
			      "rect %zu", i);
	}
	for (size_t i = 0; i < sizeof(boxes) / sizeof(*boxes); i++) {
		struct cmx_ReadImage_in rd = {.queue = {0x23001},
						  .mem = {0x23003},
						  .origin = {boxes[i].o, 3},
						  .region = {boxes[i].r, 3}};

		send_msg(&a, &cmx_desc_ReadImage_in, &rd, 1, NULL, 0);
		ck_assert_msg(recv_reply_bulk(&a, NULL, NULL, dst, sizeof(dst), &got) ==
				  CL_INVALID_VALUE,
			      "image box %zu", i);
	}
	/* Async commands: their failure is the session's last. */
	{
		uint64_t o[3] = {0, 0, 0}, r[3] = {4, 2, 1};
		static const uint8_t pat[4] = {1, 2, 3, 4}; /* the first 3, then all 4 */
		struct cmx_CopyImageToBuffer_in i2b = {.queue = {0x23001},
						       .src = {0x23003},
						       .dst = {0x23002},
						       .src_origin = {o, 3},
						       .region = {r, 3},
						       .dst_offset = 4090};
		struct cmx_CopyBufferToImage_in b2i = {.queue = {0x23001},
						       .src = {0x23002},
						       .dst = {0x23003},
						       .src_offset = 4090,
						       .dst_origin = {o, 3},
						       .region = {r, 3}};
		struct cmx_CopyBuffer_in cp = {.queue = {0x23001},
					       .src = {0x23002},
					       .dst = {0x23002},
					       .src_offset = 0,
					       .dst_offset = 4000,
					       .size = 200};
		struct cmx_FillBuffer_in fill = {.queue = {0x23001},
						 .mem = {0x23002},
						 .pattern = {pat, 3},
						 .offset = 0,
						 .size = 12};

		async_fails(&a, &cmx_desc_CopyImageToBuffer_in, &i2b, NULL, 0, CL_INVALID_VALUE,
			    "image to buffer past its end");
		async_fails(&a, &cmx_desc_CopyBufferToImage_in, &b2i, NULL, 0, CL_INVALID_VALUE,
			    "buffer to image past its end");
		async_fails(&a, &cmx_desc_CopyBuffer_in, &cp, NULL, 0, CL_INVALID_VALUE,
			    "copy past the end");
		async_fails(&a, &cmx_desc_FillBuffer_in, &fill, NULL, 0, CL_INVALID_VALUE,
			    "a 3-byte pattern");
		fill.pattern.len = 4;
		fill.offset = 4092;
		fill.size = 8;
		async_fails(&a, &cmx_desc_FillBuffer_in, &fill, NULL, 0, CL_INVALID_VALUE,
			    "a fill past the end");
	}
	other_tenant_works();
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

enum { NBUF = 64, BUF = 16 << 10 };

/* Session B writes a pattern into NBUF buffers of BUF bytes and releases
 * them (after they are written: a Finish, then a sync call). */
static void tenant_b_leaves_secrets(void)
{
	static uint8_t secret[BUF];
	struct client b;

	memset(secret, 0xa5, sizeof(secret));
	hello(&b);
	ctx_queue(&b, 0x24000);
	for (uint64_t i = 0; i < NBUF; i++) {
		struct cmx_CreateBuffer_in buf = {
		    .mem = {0x24100 + i}, .context = {0x24000}, .size = BUF};
		struct cmx_WriteBuffer_in wr = {
		    .queue = {0x24001}, .mem = {0x24100 + i}, .offset = 0, .size = BUF};

		send_msg(&b, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
		send_msg(&b, &cmx_desc_WriteBuffer_in, &wr, 0, secret, sizeof(secret));
	}
	finish(&b, 0x24001);
	for (uint64_t i = 0; i < NBUF; i++) {
		struct cmx_ReleaseMem_in rel = {.mem = {0x24100 + i}};
		send_msg(&b, &cmx_desc_ReleaseMem_in, &rel, 0, NULL, 0);
	}
	ping_ok(&b);
	close(b.fd);
}

/* Case 6: 42-63 of 64 fresh 16 KiB buffers held another tenant's freed
 * bytes. Every byte of A's fresh buffers is 0, read on the queue that
 * existed before they were made and on one made after. */
START_TEST(fresh_buffers_zeroed)
{
	uint64_t qprops[1] = {0}, o0, b0;
	struct cmx_CreateQueue_in q2 = {
	    .queue = {0x25002}, .context = {0x25000}, .device = {1}, .props = {qprops, 1}};
	static uint8_t got_bytes[BUF];
	unsigned dirty = 0;
	struct client a;

	daemon_counts(&o0, &b0);
	tenant_b_leaves_secrets();
	hello(&a);
	ctx_queue(&a, 0x25000);
	for (uint64_t i = 0; i < NBUF; i++) {
		struct cmx_CreateBuffer_in buf = {
		    .mem = {0x25100 + i}, .context = {0x25000}, .size = BUF};
		send_msg(&a, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
	}
	send_msg(&a, &cmx_desc_CreateQueue_in, &q2, 0, NULL, 0);
	for (uint64_t i = 0; i < NBUF; i++) {
		uint64_t got;

		memset(got_bytes, 0x5a, sizeof(got_bytes));
		ck_assert_int_eq(read_buffer(&a, i % 2 ? 0x25002 : 0x25001, 0x25100 + i, 0, BUF,
					     got_bytes, &got),
				 CL_SUCCESS);
		ck_assert_uint_eq(got, BUF);
		for (size_t k = 0; k < BUF; k++)
			if (got_bytes[k]) {
				dirty++;
				break;
			}
	}
	ck_assert_msg(!dirty, "%u of %u fresh buffers held bytes A never wrote", dirty, NBUF);
	other_tenant_works();
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

/* The same for images: 64x64 RGBA8 (16 KiB) written by B, then fresh ones
 * of A read back as zeros. */
START_TEST(fresh_images_zeroed)
{
	uint64_t fmt[2] = {CL_RGBA, CL_UNSIGNED_INT8}, desc[9] = {CL_MEM_OBJECT_IMAGE2D, 64, 64};
	uint64_t zero[3] = {0, 0, 0}, whole[3] = {64, 64, 1}, o0, b0;
	static uint8_t secret[BUF], got_bytes[BUF];
	struct cmx_CreateImage_out out;
	unsigned dirty = 0;
	struct client a, b;

	daemon_counts(&o0, &b0);
	memset(secret, 0xa5, sizeof(secret));
	hello(&b);
	ctx_queue(&b, 0x26000);
	for (uint64_t i = 0; i < NBUF; i++) {
		struct cmx_CreateImage_in img = {.mem = {0x26100 + i},
						 .context = {0x26000},
						 .flags = CL_MEM_READ_WRITE,
						 .format = {fmt, 2},
						 .desc = {desc, 9}};
		struct cmx_WriteImage_in wr = {.queue = {0x26001},
					       .mem = {0x26100 + i},
					       .origin = {zero, 3},
					       .region = {whole, 3}};

		send_msg(&b, &cmx_desc_CreateImage_in, &img, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(&b, &cmx_desc_CreateImage_out, &out, NULL), 0);
		send_msg(&b, &cmx_desc_WriteImage_in, &wr, 0, secret, sizeof(secret));
	}
	finish(&b, 0x26001);
	for (uint64_t i = 0; i < NBUF; i++) {
		struct cmx_ReleaseMem_in rel = {.mem = {0x26100 + i}};
		send_msg(&b, &cmx_desc_ReleaseMem_in, &rel, 0, NULL, 0);
	}
	ping_ok(&b);
	close(b.fd);

	hello(&a);
	ctx_queue(&a, 0x27000);
	for (uint64_t i = 0; i < NBUF; i++) {
		struct cmx_CreateImage_in img = {.mem = {0x27100 + i},
						 .context = {0x27000},
						 .flags = CL_MEM_READ_WRITE,
						 .format = {fmt, 2},
						 .desc = {desc, 9}};
		struct cmx_ReadImage_in rd = {.queue = {0x27001},
						  .mem = {0x27100 + i},
						  .origin = {zero, 3},
						  .region = {whole, 3}};
		uint64_t got;

		send_msg(&a, &cmx_desc_CreateImage_in, &img, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(&a, &cmx_desc_CreateImage_out, &out, NULL), 0);
		memset(got_bytes, 0x5a, sizeof(got_bytes));
		send_msg(&a, &cmx_desc_ReadImage_in, &rd, 1, NULL, 0);
		ck_assert_int_eq(
		    recv_reply_bulk(&a, NULL, NULL, got_bytes, sizeof(got_bytes), &got),
		    CL_SUCCESS);
		ck_assert_uint_eq(got, BUF);
		for (size_t k = 0; k < BUF; k++)
			if (got_bytes[k]) {
				dirty++;
				break;
			}
	}
	ck_assert_msg(!dirty, "%u of %u fresh images held bytes A never wrote", dirty, NBUF);
	other_tenant_works();
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

/*
 * Case 16: GetProgramInfo(CL_PROGRAM_BINARIES) built its reply from
 * malloc'd scratch before it knew the driver's result, and failed replies
 * carried their outputs. The binaries come back at exactly their sizes;
 * failed replies carry nothing.
 */
START_TEST(reply_outputs)
{
	static const char src[] = "__kernel void k(__global int *x) { x[0] = 1; }\n";
	uint64_t devs[1] = {1}, o0, b0;
	struct cmx_CreateContext_in ctx = {.context = {0x28000}, .devices = {devs, 1}};
	struct cmx_CreateProgramWithSource_in unbuilt = {
	    .program = {0x28010}, .context = {0x28000}, .source = {src, sizeof(src) - 1}};
	struct cmx_GetProgramInfo_in pi = {.program = {0x28003}, .param = CL_PROGRAM_BINARY_SIZES};
	struct cmx_GetProgramInfo_out pout;
	struct cmx_GetKernelWorkGroupInfo_in wg = {
	    .kernel = {0x28004}, .device = {1}, .param = 0x7777};
	struct cmx_GetKernelWorkGroupInfo_out wout;
	size_t size = 0;
	uint8_t *keep;
	struct client a;

	daemon_counts(&o0, &b0);
	hello(&a);
	send_msg(&a, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	program_kernel(&a, 0x28000, 0x28003, src, 0x28004, "k");
	send_msg(&a, &cmx_desc_GetProgramInfo_in, &pi, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetProgramInfo_out, &pout, &keep), CL_SUCCESS);
	ck_assert_uint_eq(pout.value.len, sizeof(size));
	memcpy(&size, pout.value.ptr, sizeof(size));
	free(keep);
	ck_assert_uint_gt(size, 0);
	pi.param = CL_PROGRAM_BINARIES;
	send_msg(&a, &cmx_desc_GetProgramInfo_in, &pi, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetProgramInfo_out, &pout, &keep), CL_SUCCESS);
	ck_assert_uint_eq(pout.value.len, size);
	free(keep);
	/* No binary yet: the error, and an empty value. */
	send_msg(&a, &cmx_desc_CreateProgramWithSource_in, &unbuilt, 0, NULL, 0);
	pi.program.id = 0x28010;
	send_msg(&a, &cmx_desc_GetProgramInfo_in, &pi, 1, NULL, 0);
	ck_assert_int_ne(recv_reply(&a, &cmx_desc_GetProgramInfo_out, &pout, &keep), CL_SUCCESS);
	ck_assert_uint_eq(pout.value.len, 0);
	free(keep);
	send_msg(&a, &cmx_desc_GetKernelWorkGroupInfo_in, &wg, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetKernelWorkGroupInfo_out, &wout, &keep),
			 CL_INVALID_VALUE);
	ck_assert_uint_eq(wout.value.len, 0);
	free(keep);
	other_tenant_works();
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

/* Command buffers: sync points, ids and ranges the driver would trust,
 * each refused before it; the first error of a record is its Finalize's
 * answer, and a record that fits replays. */
static int finalize(struct client *c, uint64_t cb)
{
	struct cmx_FinalizeCommandBuffer_in in = {.cmdbuf = {cb}};

	send_msg(c, &cmx_desc_FinalizeCommandBuffer_in, &in, 1, NULL, 0);
	return recv_reply(c, NULL, NULL, NULL);
}

START_TEST(command_buffers)
{
	static const char src[] =
	    "__kernel void k(__global int *o, __local char *a, __local char *b) {\n"
	    "  a[get_local_id(0)] = 1; b[get_local_id(0)] = 2;\n"
	    "  barrier(CLK_LOCAL_MEM_FENCE);\n"
	    "  o[get_global_id(0)] = a[0] + b[0];\n"
	    "}\n";
	struct cmx_CreateBuffer_in buf = {.mem = {0x21002}, .context = {0x21000}, .size = 256};
	struct cmx_SetKernelArg_in o = arg_mem(0x21004, 0, 0x21002);
	struct cmx_SetKernelArg_in la = arg_local(0x21004, 1, 0), lb = arg_local(0x21004, 2, 0);
	uint64_t g[1] = {64}, l[1] = {64}, five[1] = {5}, one[1] = {1};
	uint32_t pat = 9;
	struct client a;
	uint64_t lm, o0, b0;

	daemon_counts(&o0, &b0);
	hello(&a);
	lm = device_local_mem(&a);
	ctx_queue(&a, 0x21000);
	send_msg(&a, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
	program_kernel(&a, 0x21000, 0x21003, src, 0x21004, "k");
	async_ok(&a, &cmx_desc_SetKernelArg_in, &o, NULL, 0, "the buffer");
	for (uint64_t id = 0x21010; id <= 0x21014; id++) {
		struct cmx_CreateCommandBuffer_in cc = {.cmdbuf = {id}, .queue = {0x21001}};
		async_ok(&a, &cmx_desc_CreateCommandBuffer_in, &cc, NULL, 0, "a command buffer");
	}
	/* A wait for a point no command has. */
	struct cmx_CommandBarrier_in bar = {.cmdbuf = {0x21010}, .points = {five, 1}, .point = 1};
	async_fails(&a, &cmx_desc_CommandBarrier_in, &bar, NULL, 0,
		    CL_INVALID_SYNC_POINT_WAIT_LIST_KHR, "point 5 of none");
	ck_assert_int_eq(finalize(&a, 0x21010), CL_INVALID_SYNC_POINT_WAIT_LIST_KHR);
	/* A point out of order, and a wait for the command itself. */
	struct cmx_CommandFillBuffer_in fill = {
	    .cmdbuf = {0x21011}, .mem = {0x21002}, .pattern = {&pat, 4}, .size = 256, .point = 7};
	async_fails(&a, &cmx_desc_CommandFillBuffer_in, &fill, NULL, 0, CL_INVALID_VALUE,
		    "point 7 first");
	bar = (struct cmx_CommandBarrier_in){.cmdbuf = {0x21012}, .points = {one, 1}, .point = 1};
	async_fails(&a, &cmx_desc_CommandBarrier_in, &bar, NULL, 0,
		    CL_INVALID_SYNC_POINT_WAIT_LIST_KHR, "a wait for itself");
	/* Ranges past the buffer, a forged buffer. */
	fill = (struct cmx_CommandFillBuffer_in){
	    .cmdbuf = {0x21013}, .mem = {0x21002}, .pattern = {&pat, 4}, .offset = 4, .size = 256,
	    .point = 1};
	async_fails(&a, &cmx_desc_CommandFillBuffer_in, &fill, NULL, 0, CL_INVALID_VALUE,
		    "a fill past the end");
	struct cmx_CommandCopyBuffer_in cp = {.cmdbuf = {0x21013},
					      .src = {0x21002},
					      .dst = {0x21002},
					      .src_offset = 1ull << 62,
					      .size = 1ull << 62,
					      .point = 2};
	async_fails(&a, &cmx_desc_CommandCopyBuffer_in, &cp, NULL, 0, CL_INVALID_VALUE,
		    "a copy past the end");
	cp.src.id = 0x21099;
	cp.point = 3;
	async_fails(&a, &cmx_desc_CommandCopyBuffer_in, &cp, NULL, 0, CL_INVALID_MEM_OBJECT,
		    "a forged buffer");
	ck_assert_int_eq(finalize(&a, 0x21013), CL_INVALID_VALUE);
	{
		/* Rows 1..8 of a 64-byte pitch, from (32, 1): past 256 bytes. */
		uint64_t o3[3] = {32, 1, 0}, z3[3] = {0, 0, 0}, r3[3] = {32, 8, 1};
		struct cmx_CreateCommandBuffer_in cc = {.cmdbuf = {0x21016}, .queue = {0x21001}};
		struct cmx_CommandCopyBufferRect_in cr = {.cmdbuf = {0x21016},
							  .src = {0x21002},
							  .dst = {0x21002},
							  .src_origin = {o3, 3},
							  .dst_origin = {z3, 3},
							  .region = {r3, 3},
							  .src_row_pitch = 64,
							  .dst_row_pitch = 32,
							  .point = 1};
		async_ok(&a, &cmx_desc_CreateCommandBuffer_in, &cc, NULL, 0, "a command buffer");
		async_fails(&a, &cmx_desc_CommandCopyBufferRect_in, &cr, NULL, 0, CL_INVALID_VALUE,
			    "a rect past the end");
	}
	/* Arguments 1 and 2 unset: PoCL 3.1 records it and crashes. */
	{
		struct cmx_CreateCommandBuffer_in cc = {.cmdbuf = {0x21017}, .queue = {0x21001}};
		struct cmx_CommandKernel_in unset = {.cmdbuf = {0x21017},
						     .kernel = {0x21004},
						     .global = {g, 1},
						     .local = {l, 1},
						     .point = 1};
		async_ok(&a, &cmx_desc_CreateCommandBuffer_in, &cc, NULL, 0, "a command buffer");
		async_fails(&a, &cmx_desc_CommandKernel_in, &unset, NULL, 0,
			    CL_INVALID_KERNEL_ARGS, "arguments unset");
	}
	/* __local sizes each within the device, together past it: PoCL 3.1
	 * aborts such a launch. */
	la.size = lm;
	lb.size = lm;
	async_ok(&a, &cmx_desc_SetKernelArg_in, &la, NULL, 0, "all of it");
	async_ok(&a, &cmx_desc_SetKernelArg_in, &lb, NULL, 0, "all of it again");
	struct cmx_CommandKernel_in ck = {
	    .cmdbuf = {0x21014}, .kernel = {0x21004}, .global = {g, 1}, .local = {l, 1}, .point = 1};
	async_fails(&a, &cmx_desc_CommandKernel_in, &ck, NULL, 0, CL_OUT_OF_RESOURCES,
		    "__local past the device");
	ck_assert_int_eq(finalize(&a, 0x21014), CL_OUT_OF_RESOURCES);
	/* Forged command buffers: unknown, another kind's id. */
	ck_assert_int_eq(finalize(&a, 0x21099), CL_INVALID_COMMAND_BUFFER_KHR);
	ck_assert_int_eq(finalize(&a, 0x21002), CL_INVALID_COMMAND_BUFFER_KHR);
	struct cmx_EnqueueCommandBuffer_in en = {.queue = {0x21001}, .cmdbuf = {0x21099}};
	async_fails(&a, &cmx_desc_EnqueueCommandBuffer_in, &en, NULL, 0,
		    CL_INVALID_COMMAND_BUFFER_KHR, "replay of a forged id");
	/* A record that fits replays; a finalized one records no more. */
	{
		struct cmx_CreateCommandBuffer_in cc = {.cmdbuf = {0x21015}, .queue = {0x21001}};
		int32_t res[64];
		uint64_t got;

		async_ok(&a, &cmx_desc_CreateCommandBuffer_in, &cc, NULL, 0, "a command buffer");
		en.cmdbuf.id = 0x21015;
		async_fails(&a, &cmx_desc_EnqueueCommandBuffer_in, &en, NULL, 0,
			    CL_INVALID_OPERATION, "replay before finalize");
		la.size = lb.size = 64;
		async_ok(&a, &cmx_desc_SetKernelArg_in, &la, NULL, 0, "64 bytes");
		async_ok(&a, &cmx_desc_SetKernelArg_in, &lb, NULL, 0, "64 bytes");
		ck.cmdbuf.id = 0x21015;
		async_ok(&a, &cmx_desc_CommandKernel_in, &ck, NULL, 0, "a launch that fits");
		ck_assert_int_eq(finalize(&a, 0x21015), CL_SUCCESS);
		ck.point = 2;
		async_fails(&a, &cmx_desc_CommandKernel_in, &ck, NULL, 0, CL_INVALID_OPERATION,
			    "a record after finalize");
		async_ok(&a, &cmx_desc_EnqueueCommandBuffer_in, &en, NULL, 0, "the replay");
		ck_assert_int_eq(read_buffer(&a, 0x21001, 0x21002, 0, sizeof(res), res, &got), 0);
		for (int i = 0; i < 64; i++)
			ck_assert_int_eq(res[i], 3);
	}
	other_tenant_works();
	for (uint64_t id = 0x21010; id <= 0x21017; id++) {
		struct cmx_ReleaseCommandBuffer_in rc = {.cmdbuf = {id}};
		async_ok(&a, &cmx_desc_ReleaseCommandBuffer_in, &rc, NULL, 0, "its release");
	}
	close(a.fd);
	counts_return(o0, b0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile_args");
	TCase *tc = tcase_create("hostile_args");

	tcase_add_test(tc, local_sizes);
	tcase_add_test(tc, argument_kinds);
	tcase_add_test(tc, value_sizes);
	tcase_add_test(tc, image_pitches);
	tcase_add_test(tc, transfer_boxes);
	tcase_add_test(tc, fresh_buffers_zeroed);
	tcase_add_test(tc, fresh_images_zeroed);
	tcase_add_test(tc, reply_outputs);
	tcase_add_test(tc, command_buffers);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return e2e_daemon_run(s);
}
