// SPDX-License-Identifier: MIT
// Writes the session fuzzers' seed corpora (host/tests/corpus-session,
// corpus-area): the calls an OpenCL program makes, in the harness's records.
//   fuzz_seeds SESSION_DIR AREA_DIR
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "area_layout.h"
#include "compress.h"
#include "proto.gen.h"

#define G(n) (CMX_FIRST_GUEST_ID + (n))
#define DEV  1 /* the host's first device, numbered at Hello */

/* Message flags of a record (host/tests/fuzz_session.c). */
#define F_SYNC	 0x1
#define F_AREA	 0x2
#define F_LZ4	 0x4
#define F_ROOM	 0x10 /* an area block for a read's data: length only */
#define F_NOWAIT 0x20 /* a sync call whose reply the next message does not wait for */

static unsigned char out[1 << 20];
static size_t n;

static void put(const void *p, size_t len)
{
	if (n + len > sizeof(out))
		abort();
	if (len)
		memcpy(out + n, p, len);
	n += len;
}

static void put_u(uint64_t v, unsigned bytes)
{
	for (unsigned i = 0; i < bytes; i++) {
		unsigned char b = (unsigned char)(v >> (8 * i));
		put(&b, 1);
	}
}

/* A message record; `area` places the payload in the data region at
 * block `blk`. A call the schema lets go either way goes async unless
 * `extra` has F_SYNC (a blocking transfer). */
static void msgx(uint16_t op, const void *in, unsigned extra, const void *payload, size_t plen,
		 unsigned blk)
{
	const struct cmx_opinfo *oi = cmx_op_info(op);
	size_t sz = cmx_codec_size(oi->in, in);
	unsigned char args[4096];
	unsigned fl = extra | (!(oi->flags & CMX_OPF_ASYNC) ? F_SYNC : 0);

	if (sz > sizeof(args) || sz / 8 > 255 || plen > 65535)
		abort();
	cmx_codec_encode(oi->in, in, args);
	put_u(0, 1);
	put_u(op, 2);
	put_u(fl, 1);
	put_u(sz / 8, 1);
	put(args, sz);
	put_u(plen, 2);
	if (!(fl & F_ROOM))
		put(payload, plen);
	if (fl & F_AREA)
		put_u(blk, 2);
}

static void msg(uint16_t op, const void *in, const void *payload, size_t plen)
{
	msgx(op, in, 0, payload, plen, 0);
}

/* The call sent sync: for one the schema lets go either way. */
static void rpc(uint16_t op, const void *in, const void *payload, size_t plen)
{
	msgx(op, in, F_SYNC, payload, plen, 0);
}

static void begin(unsigned mode)
{
	n = 0;
	put_u(mode, 1);
}

static void save(const char *dir, const char *name)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static const uint64_t one_dev[] = {DEV};
#define DEVS                                                                                       \
	{                                                                                          \
		one_dev, 1, NULL                                                                   \
	}
#define NOWAIT                                                                                     \
	{                                                                                          \
		NULL, 0, NULL                                                                      \
	}
#define REF(x)                                                                                     \
	{                                                                                          \
		(x), NULL                                                                          \
	}

static void context_queue(void)
{
	struct cmx_GetDeviceIDs_in gd = {0};
	struct cmx_CreateContext_in cc = {.context = REF(G(1)), .devices = DEVS};
	struct cmx_CreateQueue_in cq = {
	    .queue = REF(G(2)), .context = REF(G(1)), .device = REF(DEV)};

	msg(CMX_OP_GetDeviceIDs, &gd, NULL, 0);
	msg(CMX_OP_CreateContext, &cc, NULL, 0);
	msg(CMX_OP_CreateQueue, &cq, NULL, 0);
}

static void buffer(uint64_t id, uint64_t size)
{
	struct cmx_CreateBuffer_in cb = {
	    .mem = REF(id), .context = REF(G(1)), .flags = 1, .size = size};

	msg(CMX_OP_CreateBuffer, &cb, NULL, 0);
}

static void finish(void)
{
	struct cmx_Finish_in f = {.queue = REF(G(2))};

	msg(CMX_OP_Finish, &f, NULL, 0);
}

static void program(uint64_t id, unsigned src, const char *options)
{
	unsigned char pick = (unsigned char)src;
	struct cmx_CreateProgramWithSource_in cp = {
	    .program = REF(id), .context = REF(G(1)), .source = {&pick, 1}};
	struct cmx_BuildProgram_in bp = {
	    .program = REF(id), .devices = DEVS, .options = {options, strlen(options) + 1}};

	msg(CMX_OP_CreateProgramWithSource, &cp, NULL, 0);
	msg(CMX_OP_BuildProgram, &bp, NULL, 0);
}

static void kernel(uint64_t id, uint64_t prog, const char *name)
{
	struct cmx_CreateKernel_in ck = {
	    .kernel = REF(id), .program = REF(prog), .name = {name, strlen(name) + 1}};

	msg(CMX_OP_CreateKernel, &ck, NULL, 0);
}

static void arg_mem(uint64_t k, uint64_t i, uint64_t mem)
{
	struct cmx_SetKernelArg_in a = {
	    .kernel = REF(k), .index = i, .kind = CMX_ARG_MEM, .mem = REF(mem)};

	msg(CMX_OP_SetKernelArg, &a, NULL, 0);
}

static void arg_val(uint64_t k, uint64_t i, const void *v, size_t size)
{
	struct cmx_SetKernelArg_in a = {
	    .kernel = REF(k), .index = i, .kind = CMX_ARG_VALUE, .size = size, .value = {v, size}};

	msg(CMX_OP_SetKernelArg, &a, NULL, 0);
}

static void arg_local(uint64_t k, uint64_t i, uint64_t size)
{
	struct cmx_SetKernelArg_in a = {
	    .kernel = REF(k), .index = i, .kind = CMX_ARG_LOCAL, .size = size};

	msg(CMX_OP_SetKernelArg, &a, NULL, 0);
}

static void launch(uint64_t k, uint64_t global, uint64_t local, uint64_t event)
{
	uint64_t g[1] = {global}, l[1] = {local};
	struct cmx_EnqueueKernel_in e = {.queue = REF(G(2)),
					 .kernel = REF(k),
					 .global = {g, 1},
					 .local = {l, local ? 1 : 0},
					 .event = REF(event)};

	msg(CMX_OP_EnqueueKernel, &e, NULL, 0);
}

static void seed_buffers(const char *dir)
{
	unsigned char data[256];
	uint64_t o3[3] = {8, 1, 0}, r3[3] = {16, 2, 1}, z3[3] = {0, 0, 0};
	uint64_t pattern = 0x0102030405060708ull;

	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)i;
	begin(0);
	context_queue();
	buffer(G(3), 4096);
	buffer(G(4), 4096);
	struct cmx_WriteBuffer_in wb = {
	    .queue = REF(G(2)), .mem = REF(G(3)), .offset = 64, .size = sizeof(data)};
	msg(CMX_OP_WriteBuffer, &wb, data, sizeof(data));
	struct cmx_ReadBuffer_in rb = {
	    .queue = REF(G(2)), .mem = REF(G(3)), .offset = 0, .size = 512};
	rpc(CMX_OP_ReadBuffer, &rb, NULL, 0);
	struct cmx_WriteBufferRect_in wr = {.queue = REF(G(2)),
					    .mem = REF(G(3)),
					    .origin = {o3, 3},
					    .region = {r3, 3},
					    .row_pitch = 64,
					    .slice_pitch = 0};
	msg(CMX_OP_WriteBufferRect, &wr, data, 32);
	struct cmx_ReadBufferRect_in rr = {.queue = REF(G(2)),
					   .mem = REF(G(3)),
					   .origin = {z3, 3},
					   .region = {r3, 3},
					   .row_pitch = 64};
	rpc(CMX_OP_ReadBufferRect, &rr, NULL, 0);
	struct cmx_CopyBufferRect_in cr = {.queue = REF(G(2)),
					   .src = REF(G(3)),
					   .dst = REF(G(4)),
					   .src_origin = {o3, 3},
					   .dst_origin = {z3, 3},
					   .region = {r3, 3},
					   .src_row_pitch = 64,
					   .dst_row_pitch = 32};
	msg(CMX_OP_CopyBufferRect, &cr, NULL, 0);
	struct cmx_FillBuffer_in fb = {.queue = REF(G(2)),
				       .mem = REF(G(4)),
				       .pattern = {&pattern, 8},
				       .offset = 8,
				       .size = 64};
	msg(CMX_OP_FillBuffer, &fb, NULL, 0);
	struct cmx_CreateSubBuffer_in sb = {
	    .mem = REF(G(5)), .parent = REF(G(3)), .flags = 1, .origin = 0, .size = 128};
	msg(CMX_OP_CreateSubBuffer, &sb, NULL, 0);
	struct cmx_GetMemInfo_in gm = {.mem = REF(G(5)), .param = 0x1102 /* CL_MEM_SIZE */};
	msg(CMX_OP_GetMemInfo, &gm, NULL, 0);
	finish();
	struct cmx_ReleaseMem_in rm = {.mem = REF(G(5))};
	msg(CMX_OP_ReleaseMem, &rm, NULL, 0);
	save(dir, "buffers");
}

static void seed_kernel(const char *dir)
{
	int v = 42;
	int64_t lv = 7;

	begin(0);
	context_queue();
	buffer(G(3), 64);
	program(G(10), 0, "-cl-std=CL1.2");
	kernel(G(11), G(10), "k");
	arg_mem(G(11), 0, G(3));
	arg_val(G(11), 1, &v, sizeof(v));
	launch(G(11), 4, 0, G(12));
	kernel(G(13), G(10), "k2");
	arg_mem(G(13), 0, G(3));
	arg_local(G(13), 1, 16);
	arg_val(G(13), 2, &lv, sizeof(lv));
	launch(G(13), 8, 4, 0);
	struct cmx_GetKernelWorkGroupInfo_in wg = {
	    .kernel = REF(G(13)), .device = REF(DEV), .param = 0x11B0 /* WORK_GROUP_SIZE */};
	msg(CMX_OP_GetKernelWorkGroupInfo, &wg, NULL, 0);
	struct cmx_GetProgramInfo_in pi = {.program = REF(G(10)),
					   .param = 0x1168 /* KERNEL_NAMES */};
	msg(CMX_OP_GetProgramInfo, &pi, NULL, 0);
	struct cmx_GetProgramBuildInfo_in bi = {
	    .program = REF(G(10)), .device = REF(DEV), .param = 0x1183 /* BUILD_LOG */};
	msg(CMX_OP_GetProgramBuildInfo, &bi, NULL, 0);
	struct cmx_WaitForEvents_in we = {.events = {(const uint64_t[]){G(12)}, 1, NULL}};
	msg(CMX_OP_WaitForEvents, &we, NULL, 0);
	finish();
	struct cmx_ReadBuffer_in rb = {.queue = REF(G(2)), .mem = REF(G(3)), .size = 64};
	rpc(CMX_OP_ReadBuffer, &rb, NULL, 0);
	save(dir, "kernel");

	/* A struct and a vector by value; a build that fails. */
	begin(0);
	context_queue();
	buffer(G(3), 64);
	program(G(10), 5, "");
	kernel(G(11), G(10), "st");
	struct {
		int a;
		float b;
	} s = {3, 1.5f};
	unsigned char u[16] = {1, 2, 3, 4};
	arg_val(G(11), 0, &s, sizeof(s));
	arg_mem(G(11), 1, G(3));
	arg_val(G(11), 2, u, sizeof(u));
	launch(G(11), 2, 0, 0);
	program(G(14), 4, "");
	struct cmx_GetProgramBuildInfo_in bi2 = {
	    .program = REF(G(14)), .device = REF(DEV), .param = 0x1183};
	msg(CMX_OP_GetProgramBuildInfo, &bi2, NULL, 0);
	finish();
	save(dir, "kernel_struct");

	/* A NULL buffer argument, which OpenCL allows: the kernel gets a NULL
	 * pointer (the harness's sources test it before they store). */
	begin(0);
	context_queue();
	program(G(10), 0, "");
	kernel(G(11), G(10), "k");
	arg_mem(G(11), 0, 0);
	arg_val(G(11), 1, &v, sizeof(v));
	launch(G(11), 4, 0, 0);
	finish();
	save(dir, "kernel_null");
}

/* A compile with a header program and a link, each input released while
 * the driver works. */
static void seed_compile_link(const char *dir)
{
	unsigned char hdr = 6, src = 3;
	struct cmx_CreateProgramWithSource_in ch = {
	    .program = REF(G(15)), .context = REF(G(1)), .source = {&hdr, 1}};
	struct cmx_CreateProgramWithSource_in cs = {
	    .program = REF(G(10)), .context = REF(G(1)), .source = {&src, 1}};
	struct cmx_CompileProgram_in cp = {.program = REF(G(10)),
					   .devices = DEVS,
					   .options = {"", 1},
					   .headers = {(const uint64_t[]){G(15)}, 1, NULL},
					   .header_names = {"a/h.h", 6}};
	struct cmx_LinkProgram_in lp = {.program = REF(G(16)),
					.context = REF(G(1)),
					.devices = DEVS,
					.options = {"", 1},
					.inputs = {(const uint64_t[]){G(10)}, 1, NULL}};

	begin(0);
	context_queue();
	buffer(G(3), 64);
	msg(CMX_OP_CreateProgramWithSource, &ch, NULL, 0);
	msg(CMX_OP_CreateProgramWithSource, &cs, NULL, 0);
	msgx(CMX_OP_CompileProgram, &cp, F_NOWAIT, NULL, 0, 0);
	msg(CMX_OP_ReleaseProgram, &(struct cmx_ReleaseProgram_in){.program = REF(G(15))}, NULL, 0);
	msgx(CMX_OP_LinkProgram, &lp, F_NOWAIT, NULL, 0, 0);
	msg(CMX_OP_ReleaseProgram, &(struct cmx_ReleaseProgram_in){.program = REF(G(10))}, NULL, 0);
	msg(CMX_OP_ReleaseContext, &(struct cmx_ReleaseContext_in){.context = REF(G(1))}, NULL, 0);
	kernel(G(11), G(16), "inc");
	arg_mem(G(11), 0, G(3));
	launch(G(11), 1, 0, 0);
	finish();
	save(dir, "compile_link");
}

/* A source in parts: two parts, the creation that takes them, a build and
 * a launch; then parts out of order, a creation of the wrong length, one
 * with nothing staged, and one that carries its bytes. */
static void seed_parts(const char *dir)
{
	static const char src[] = "__kernel void inc(__global int *x) { x[0] += 1; }";
	const uint64_t len = sizeof(src) - 1, half = len / 2;
	struct cmx_ProgramPart_in p1 = {
	    .program = G(10), .offset = 0, .total = len, .data = {src, half}};
	struct cmx_ProgramPart_in p2 = {
	    .program = G(10), .offset = half, .total = len, .data = {src + half, len - half}};
	struct cmx_CreateProgramWithParts_in cp = {
	    .program = REF(G(10)), .context = REF(G(1)), .il = 0, .length = len};
	struct cmx_BuildProgram_in bp = {
	    .program = REF(G(10)), .devices = DEVS, .options = {"", 1}};

	begin(0);
	context_queue();
	buffer(G(3), 64);
	msg(CMX_OP_ProgramPart, &p1, NULL, 0);
	msg(CMX_OP_ProgramPart, &p2, NULL, 0);
	msg(CMX_OP_CreateProgramWithParts, &cp, NULL, 0);
	msg(CMX_OP_BuildProgram, &bp, NULL, 0);
	kernel(G(11), G(10), "inc");
	arg_mem(G(11), 0, G(3));
	launch(G(11), 1, 0, 0);
	finish();
	/* Out of order, then the wrong length, then nothing staged. */
	p2.program = p1.program = G(12);
	msg(CMX_OP_ProgramPart, &p2, NULL, 0);
	msg(CMX_OP_ProgramPart, &p1, NULL, 0);
	msg(CMX_OP_ProgramPart, &p1, NULL, 0);
	cp.program.id = G(12);
	cp.length = len + 1;
	msg(CMX_OP_CreateProgramWithParts, &cp, NULL, 0);
	cp.program.id = G(13);
	cp.length = len;
	msg(CMX_OP_CreateProgramWithParts, &cp, NULL, 0);
	/* The bytes themselves, as a restore replays it. */
	cp.program.id = G(14);
	msg(CMX_OP_CreateProgramWithParts, &cp, src, len);
	/* Binaries in parts (junk to the driver), lengths past the bytes
	 * staged, and as many lengths as devices but not the staged size. */
	uint64_t lens[1] = {len};
	struct cmx_CreateProgramWithBinaryParts_in bin = {
	    .program = REF(G(15)), .context = REF(G(1)), .devices = DEVS, .lengths = {lens, 1},
	    .length = len};
	p2.program = p1.program = G(15);
	msg(CMX_OP_ProgramPart, &p1, NULL, 0);
	msg(CMX_OP_ProgramPart, &p2, NULL, 0);
	msg(CMX_OP_CreateProgramWithBinaryParts, &bin, NULL, 0);
	p2.program = p1.program = G(16);
	msg(CMX_OP_ProgramPart, &p1, NULL, 0);
	msg(CMX_OP_ProgramPart, &p2, NULL, 0);
	lens[0] = len + 1;
	bin.program.id = G(16);
	msg(CMX_OP_CreateProgramWithBinaryParts, &bin, NULL, 0);
	lens[0] = len;
	bin.program.id = G(17);
	bin.length = len - 1;
	msg(CMX_OP_CreateProgramWithBinaryParts, &bin, src, len - 1);
	save(dir, "program_parts");
}

/* Compiles and links of one program in flight together: builds run on
 * executor threads side by side, and a compile that fails while a link
 * reads the program aborted PoCL 3.1 (the session fuzzer's finding). */
static void seed_build_race(const char *dir)
{
	unsigned char src = 3;
	struct cmx_CreateProgramWithSource_in cs = {
	    .program = REF(G(10)), .context = REF(G(1)), .source = {&src, 1}};
	struct cmx_CompileProgram_in good = {
	    .program = REF(G(10)), .devices = DEVS, .options = {"", 1}};
	struct cmx_CompileProgram_in bad = {
	    .program = REF(G(10)), .devices = DEVS, .options = {"-DX(", 5}};
	struct cmx_LinkProgram_in lp = {.program = REF(G(16)),
					.context = REF(G(1)),
					.devices = DEVS,
					.options = {"", 1},
					.inputs = {(const uint64_t[]){G(10)}, 1, NULL}};

	begin(0);
	context_queue();
	buffer(G(3), 64);
	msg(CMX_OP_CreateProgramWithSource, &cs, NULL, 0);
	msg(CMX_OP_CompileProgram, &good, NULL, 0);
	msgx(CMX_OP_CompileProgram, &bad, F_NOWAIT, NULL, 0, 0);
	msgx(CMX_OP_LinkProgram, &lp, F_NOWAIT, NULL, 0, 0);
	msgx(CMX_OP_CompileProgram, &good, F_NOWAIT, NULL, 0, 0);
	lp.program.id = G(17);
	msgx(CMX_OP_LinkProgram, &lp, F_NOWAIT, NULL, 0, 0);
	msgx(CMX_OP_CompileProgram, &bad, F_NOWAIT, NULL, 0, 0);
	msg(CMX_OP_CompileProgram, &good, NULL, 0);
	lp.program.id = G(18);
	msg(CMX_OP_LinkProgram, &lp, NULL, 0);
	kernel(G(11), G(18), "inc");
	arg_mem(G(11), 0, G(3));
	launch(G(11), 1, 0, 0);
	finish();
	save(dir, "build_race");
}

static void seed_printf(const char *dir)
{
	int v = 5;
	float f = 2.5f;
	uint64_t g[1] = {2};

	begin(0);
	context_queue();
	program(G(10), 1, "");
	kernel(G(11), G(10), "p");
	arg_val(G(11), 0, &v, sizeof(v));
	arg_val(G(11), 1, &f, sizeof(f));
	struct cmx_EnqueueKernelPrintf_in e = {.queue = REF(G(2)),
					       .kernel = REF(G(11)),
					       .global = {g, 1},
					       .event = REF(G(12)),
					       .tag = 9};
	msg(CMX_OP_EnqueueKernelPrintf, &e, NULL, 0);
	finish();
	save(dir, "printf");
}

static void seed_image(const char *dir)
{
	unsigned char px[4 * 4 * 2];
	uint64_t fmt[2] = {0x10B5 /* CL_RGBA */, 0x10D2 /* CL_UNORM_INT8 */};
	uint64_t desc[9] = {0x10F1 /* CL_MEM_OBJECT_IMAGE2D */, 4, 2, 0, 0, 0, 0, 0, 0};
	uint64_t o3[3] = {1, 0, 0}, r3[3] = {2, 2, 1}, z3[3] = {0, 0, 0};
	uint64_t sprops[6] = {0x1152 /* NORMALIZED_COORDS */,
			      0,
			      0x1153 /* ADDRESSING */,
			      0x1130 /* NONE */,
			      0x1154 /* FILTER */,
			      0x1140 /* NEAREST */};

	for (unsigned i = 0; i < sizeof(px); i++)
		px[i] = (unsigned char)(i * 7);
	begin(0);
	context_queue();
	buffer(G(3), 256);
	struct cmx_CreateImage_in ci = {.mem = REF(G(20)),
					.context = REF(G(1)),
					.flags = 1 | 0x20 /* RW, COPY_HOST_PTR */,
					.format = {fmt, 2},
					.desc = {desc, 9}};
	msg(CMX_OP_CreateImage, &ci, px, sizeof(px));
	struct cmx_GetSupportedImageFormats_in sf = {
	    .context = REF(G(1)), .flags = 1, .type = 0x10F1};
	msg(CMX_OP_GetSupportedImageFormats, &sf, NULL, 0);
	struct cmx_WriteImage_in wi = {
	    .queue = REF(G(2)), .mem = REF(G(20)), .origin = {o3, 3}, .region = {r3, 3}};
	msg(CMX_OP_WriteImage, &wi, px, 16);
	struct cmx_ReadImage_in ri = {
	    .queue = REF(G(2)), .mem = REF(G(20)), .origin = {z3, 3}, .region = {r3, 3}};
	rpc(CMX_OP_ReadImage, &ri, NULL, 0);
	struct cmx_CopyImageToBuffer_in ib = {.queue = REF(G(2)),
					      .src = REF(G(20)),
					      .dst = REF(G(3)),
					      .src_origin = {z3, 3},
					      .region = {r3, 3},
					      .dst_offset = 8};
	msg(CMX_OP_CopyImageToBuffer, &ib, NULL, 0);
	struct cmx_CopyBufferToImage_in bi = {.queue = REF(G(2)),
					      .src = REF(G(3)),
					      .dst = REF(G(20)),
					      .src_offset = 0,
					      .dst_origin = {o3, 3},
					      .region = {r3, 3}};
	msg(CMX_OP_CopyBufferToImage, &bi, NULL, 0);
	struct cmx_GetImageInfo_in ii = {.mem = REF(G(20)), .param = 0x1114 /* WIDTH */};
	msg(CMX_OP_GetImageInfo, &ii, NULL, 0);
	struct cmx_CreateSampler_in cs = {
	    .sampler = REF(G(21)), .context = REF(G(1)), .props = {sprops, 6}};
	msg(CMX_OP_CreateSampler, &cs, NULL, 0);
	program(G(10), 2, "");
	kernel(G(11), G(10), "im");
	arg_mem(G(11), 0, G(20));
	struct cmx_SetKernelArg_in sa = {
	    .kernel = REF(G(11)), .index = 1, .kind = CMX_ARG_SAMPLER, .sampler = REF(G(21))};
	msg(CMX_OP_SetKernelArg, &sa, NULL, 0);
	arg_mem(G(11), 2, G(3));
	launch(G(11), 1, 0, 0);
	finish();
	save(dir, "image");

	/* A pitch shorter than a row (CL_INVALID_IMAGE_DESCRIPTOR). */
	begin(0);
	context_queue();
	desc[5] = 8;
	msg(CMX_OP_CreateImage, &ci, px, 16);
	save(dir, "image_pitch");
}

/* IncludeFiles' payload: one IncludeFile record, of name and contents. */
static size_t include_blob(unsigned char *b, const char *name, const char *data)
{
	struct cmx_IncludeFile f = {.path = {name, strlen(name)}, .data = {data, strlen(data)}};
	struct cmx_IncludeFiles_bulk files = {.files = {&f, 1}};
	size_t len = cmx_codec_size(&cmx_desc_IncludeFiles_bulk, &files);

	if (len > 256)
		abort();
	cmx_codec_encode(&cmx_desc_IncludeFiles_bulk, &files, b);
	return len;
}

static void open_area(uint64_t flags)
{
	struct cmx_OpenArea_in oa = {.size = 1 << 20, .flags = flags};

	msg(CMX_OP_OpenArea, &oa, NULL, 0);
}

static void seed_include(const char *sdir, const char *adir)
{
	unsigned char blob[256];
	size_t bl = include_blob(blob, "a/h.h", "#define H 7\n");
	struct cmx_IncludeFiles_in inc = {.program = REF(G(10)), .dir = 0};
	unsigned char pick = 3;
	struct cmx_CreateProgramWithSource_in cp = {
	    .program = REF(G(10)), .context = REF(G(1)), .source = {&pick, 1}};
	const char *opt = "-I cmx-include:0";
	struct cmx_BuildProgram_in bp = {
	    .program = REF(G(10)), .devices = DEVS, .options = {opt, strlen(opt) + 1}};

	/* In the stream. */
	begin(0);
	context_queue();
	buffer(G(3), 64);
	msg(CMX_OP_CreateProgramWithSource, &cp, NULL, 0);
	msg(CMX_OP_IncludeFiles, &inc, blob, bl);
	msg(CMX_OP_BuildProgram, &bp, NULL, 0);
	kernel(G(11), G(10), "inc");
	arg_mem(G(11), 0, G(3));
	launch(G(11), 1, 0, 0);
	finish();
	save(sdir, "include");

	/* In the shared area, as the ICD sends it over unix. */
	begin(0);
	open_area(0);
	context_queue();
	msg(CMX_OP_CreateProgramWithSource, &cp, NULL, 0);
	msgx(CMX_OP_IncludeFiles, &inc, F_AREA, blob, bl, 3);
	msg(CMX_OP_BuildProgram, &bp, NULL, 0);
	save(sdir, "include_area");
	save(adir, "include_area");

	/* A second guest thread turns the name into a climb out of the tree
	 * between the daemon's looks (a 13-byte name either way). */
	bl = include_blob(blob, "xx/yy/zz/ww/f", "x");
	begin(0);
	open_area(0);
	context_queue();
	msg(CMX_OP_CreateProgramWithSource, &cp, NULL, 0);
	put_u(1, 1); /* flip */
	put_u(0, 1); /* from the next area payload */
	put_u(16, 2); /* the name, after the count and its length */
	put_u(12, 1);
	put("../../../../", 12);
	msgx(CMX_OP_IncludeFiles, &inc, F_AREA, blob, bl, 3);
	for (int i = 0; i < 4; i++) {
		put_u(2, 1); /* repeat */
		put_u(63, 1);
	}
	save(adir, "include_flip");
}

static void seed_area(const char *sdir, const char *adir)
{
	unsigned char data[512];
	struct cmx_CreateBufferArea_in ba = {
	    .mem = REF(G(3)), .context = REF(G(1)), .flags = 1, .size = 4096};
	struct cmx_MapBuffer_in mb = {
	    .queue = REF(G(2)), .mem = REF(G(3)), .flags = 1, .offset = 0, .size = 4096};
	struct cmx_UnmapBuffer_in ub = {.queue = REF(G(2)), .mem = REF(G(3)), .offset = 0};
	struct cmx_WriteBuffer_in wb = {
	    .queue = REF(G(2)), .mem = REF(G(4)), .offset = 0, .size = sizeof(data)};
	struct cmx_ReadBuffer_in rb = {.queue = REF(G(2)), .mem = REF(G(4)), .size = 256};
	uint64_t o3[3] = {0, 0, 0}, r3[3] = {16, 4, 1};
	struct cmx_WriteBufferRect_in wr = {.queue = REF(G(2)),
					    .mem = REF(G(4)),
					    .origin = {o3, 3},
					    .region = {r3, 3},
					    .row_pitch = 32};

	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i ^ 0x5a);
	begin(0);
	open_area(CMX_AREA_HEAP);
	context_queue();
	msgx(CMX_OP_CreateBufferArea, &ba, F_AREA | F_ROOM, NULL, 4096, 64);
	rpc(CMX_OP_MapBuffer, &mb, NULL, 0);
	msg(CMX_OP_UnmapBuffer, &ub, NULL, 0);
	buffer(G(4), 1024);
	msgx(CMX_OP_WriteBuffer, &wb, F_AREA, data, sizeof(data), 2);
	msgx(CMX_OP_ReadBuffer, &rb, F_SYNC | F_AREA | F_ROOM, NULL, 256, 10);
	msgx(CMX_OP_WriteBufferRect, &wr, F_AREA, data, 64, 20);
	finish();
	save(sdir, "area");
	save(adir, "area");

	/* The same write while its arguments' payload is rewritten. */
	begin(0);
	open_area(0);
	context_queue();
	buffer(G(4), 1024);
	put_u(1, 1);
	put_u(0, 1);
	put_u(0, 2);
	put_u(8, 1);
	put("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
	msgx(CMX_OP_WriteBuffer, &wb, F_AREA, data, sizeof(data), 2);
	put_u(2, 1);
	put_u(15, 1);
	finish();
	save(adir, "write_flip");
}

/* The shm transport: after OpenArea with rings, every call goes through
 * the command ring and every reply comes back on the reply ring. */
static void seed_rings(const char *sdir, const char *adir)
{
	unsigned char data[300];
	struct cmx_WriteBuffer_in wb = {.queue = REF(G(2)), .mem = REF(G(3)), .size = sizeof(data)};
	struct cmx_ReadBuffer_in rb = {.queue = REF(G(2)), .mem = REF(G(3)), .size = 300};
	int v = 9;

	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 3);
	begin(0);
	open_area(CMX_AREA_RINGS | CMX_AREA_HEAP);
	context_queue();
	buffer(G(3), 4096);
	msg(CMX_OP_WriteBuffer, &wb, data, sizeof(data));
	msgx(CMX_OP_WriteBuffer, &wb, F_AREA, data, sizeof(data), 4);
	rpc(CMX_OP_ReadBuffer, &rb, NULL, 0);
	msgx(CMX_OP_ReadBuffer, &rb, F_SYNC | F_AREA | F_ROOM, NULL, 300, 12);
	program(G(10), 0, "");
	kernel(G(11), G(10), "k");
	arg_mem(G(11), 0, G(3));
	arg_val(G(11), 1, &v, sizeof(v));
	launch(G(11), 2, 0, 0);
	finish();
	save(sdir, "rings");

	/* A second thread rewrites the command ring's bytes (where the next
	 * calls' headers land) while the daemon copies them out. */
	begin(0);
	open_area(CMX_AREA_RINGS);
	context_queue();
	buffer(G(3), 4096);
	put_u(1, 1);
	put_u(1, 1); /* the command ring */
	put_u(256 + 24 * 20, 2);
	put_u(32, 1);
	put("\xff\xff\xff\x7f\x03\x03\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"
	    "\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x10\x00\x00\x00\x00",
	    32);
	for (int i = 0; i < 8; i++)
		msg(CMX_OP_WriteBuffer, &wb, data, sizeof(data));
	put_u(2, 1);
	put_u(40, 1);
	rpc(CMX_OP_ReadBuffer, &rb, NULL, 0);
	save(adir, "rings_flip");
}

static void seed_events(const char *dir)
{
	struct cmx_CreateUserEvent_in ue = {.event = REF(G(30)), .context = REF(G(1))};
	struct cmx_EnqueueMarker_in mk = {
	    .queue = REF(G(2)), .wait = {(const uint64_t[]){G(30)}, 1, NULL}, .event = REF(G(31))};
	struct cmx_SetEventCallback_in cb = {.event = REF(G(31)), .type = 0, .tag = 3};
	struct cmx_SetUserEventStatus_in us = {.event = REF(G(30)), .status = 0};
	struct cmx_GetEventInfo_in ei = {.event = REF(G(31)), .param = 0x11D3 /* STATUS */};
	struct cmx_ReleaseEvent_in re = {.event = REF(G(31))};

	begin(0);
	context_queue();
	msg(CMX_OP_CreateUserEvent, &ue, NULL, 0);
	msg(CMX_OP_EnqueueMarker, &mk, NULL, 0);
	msg(CMX_OP_SetEventCallback, &cb, NULL, 0);
	msg(CMX_OP_SetUserEventStatus, &us, NULL, 0);
	finish();
	msg(CMX_OP_GetEventInfo, &ei, NULL, 0);
	msg(CMX_OP_ReleaseEvent, &re, NULL, 0);
	save(dir, "events");

	/* A user event never set: the session ends with commands behind it. */
	begin(0);
	context_queue();
	buffer(G(3), 64);
	msg(CMX_OP_CreateUserEvent, &ue, NULL, 0);
	struct cmx_WriteBuffer_in wb = {.queue = REF(G(2)),
					.mem = REF(G(3)),
					.size = 8,
					.wait = {(const uint64_t[]){G(30)}, 1, NULL},
					.event = REF(G(32))};
	msg(CMX_OP_WriteBuffer, &wb, "12345678", 8);
	msg(CMX_OP_SetEventCallback,
	    &(struct cmx_SetEventCallback_in){.event = REF(G(32)), .tag = 4}, NULL, 0);
	save(dir, "events_unset");

	/* The user event released unset, then the marker behind it waited
	 * for: nobody can ever set it. */
	begin(0);
	context_queue();
	msg(CMX_OP_CreateUserEvent, &ue, NULL, 0);
	msg(CMX_OP_EnqueueMarker, &mk, NULL, 0);
	msg(CMX_OP_ReleaseEvent, &(struct cmx_ReleaseEvent_in){.event = REF(G(30))}, NULL, 0);
	msgx(CMX_OP_WaitForEvents,
	     &(struct cmx_WaitForEvents_in){.events = {(const uint64_t[]){G(31)}, 1, NULL}},
	     F_NOWAIT, NULL, 0, 0);
	save(dir, "events_released");
}

static void seed_handshake(const char *dir)
{
	struct cmx_Hello_in h = {
	    .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION, .role = CMX_ROLE_CALL};
	struct cmx_Auth_in a = {.token = {"fuzz-token-0123456789", 21}};
	struct cmx_Auth_in bad = {.token = {"nope", 4}};
	struct cmx_Ping_in p = {0};

	/* The token, then Hello, by the input itself. */
	begin(3);
	msg(CMX_OP_Auth, &a, NULL, 0);
	msg(CMX_OP_Hello, &h, NULL, 0);
	msg(CMX_OP_Ping, &p, NULL, 0);
	save(dir, "auth");
	begin(3);
	msg(CMX_OP_Auth, &bad, NULL, 0);
	msg(CMX_OP_Hello, &h, NULL, 0);
	save(dir, "auth_bad");
	begin(3);
	msg(CMX_OP_Hello, &h, NULL, 0);
	save(dir, "auth_missing");
	/* No token asked: a call before Hello, a second Hello, a notification
	 * channel for a session that does not exist. */
	begin(1);
	msg(CMX_OP_Ping, &p, NULL, 0);
	save(dir, "before_hello");
	begin(1);
	msg(CMX_OP_Hello, &h, NULL, 0);
	msg(CMX_OP_Hello, &h, NULL, 0);
	msg(CMX_OP_GetStats, &(struct cmx_GetStats_in){0}, NULL, 0);
	save(dir, "hello_twice");
	begin(1);
	h.role = CMX_ROLE_NOTIFY;
	h.session = 1;
	h.token = 2;
	msg(CMX_OP_Hello, &h, NULL, 0);
	save(dir, "hello_notify");
}

static void seed_compress(const char *dir)
{
	unsigned char data[4096], packed[8192];
	uint64_t k;
	struct cmx_Compress_in c = {.algos = 1};
	struct cmx_WriteBuffer_in wb = {.queue = REF(G(2)), .mem = REF(G(3)), .size = sizeof(data)};

	for (unsigned i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i / 64);
	k = cmx_compress_encode(data, sizeof(data), packed);
	begin(0);
	msg(CMX_OP_Compress, &c, NULL, 0);
	context_queue();
	buffer(G(3), 4096);
	msgx(CMX_OP_WriteBuffer, &wb, F_SYNC | F_LZ4, packed, k, 0);
	struct cmx_ReadBuffer_in rb = {.queue = REF(G(2)), .mem = REF(G(3)), .size = 4096};
	rpc(CMX_OP_ReadBuffer, &rb, NULL, 0);
	save(dir, "compress");
}

/* A command buffer recorded, finalized and replayed; a wait list of a
 * point not recorded, a record after the finalize, a forged id. */
static void seed_cmdbuf(const char *dir)
{
	int v = 42;
	uint32_t pattern = 0x01020304u;
	uint64_t g[1] = {4}, p1[1] = {1}, bad[1] = {9};

	begin(0);
	context_queue();
	buffer(G(3), 64);
	buffer(G(4), 64);
	program(G(10), 0, "-cl-std=CL1.2");
	kernel(G(11), G(10), "k");
	arg_mem(G(11), 0, G(3));
	arg_val(G(11), 1, &v, sizeof(v));
	struct cmx_CreateCommandBuffer_in cc = {.cmdbuf = REF(G(20)), .queue = REF(G(2))};
	msg(CMX_OP_CreateCommandBuffer, &cc, NULL, 0);
	struct cmx_CommandFillBuffer_in cf = {.cmdbuf = REF(G(20)),
					      .mem = REF(G(3)),
					      .pattern = {&pattern, 4},
					      .size = 64,
					      .point = 1};
	msg(CMX_OP_CommandFillBuffer, &cf, NULL, 0);
	struct cmx_CommandKernel_in ck = {
	    .cmdbuf = REF(G(20)), .kernel = REF(G(11)), .global = {g, 1}, .points = {p1, 1},
	    .point = 2};
	msg(CMX_OP_CommandKernel, &ck, NULL, 0);
	struct cmx_CommandCopyBuffer_in cp = {
	    .cmdbuf = REF(G(20)), .src = REF(G(3)), .dst = REF(G(4)), .size = 64, .point = 3};
	msg(CMX_OP_CommandCopyBuffer, &cp, NULL, 0);
	uint64_t o3[3] = {8, 1, 0}, z3[3] = {0, 0, 0}, r3[3] = {8, 2, 1};
	struct cmx_CommandCopyBufferRect_in cr = {.cmdbuf = REF(G(20)),
						  .src = REF(G(3)),
						  .dst = REF(G(4)),
						  .src_origin = {o3, 3},
						  .dst_origin = {z3, 3},
						  .region = {r3, 3},
						  .src_row_pitch = 16,
						  .dst_row_pitch = 8,
						  .point = 4};
	msg(CMX_OP_CommandCopyBufferRect, &cr, NULL, 0);
	struct cmx_CommandBarrier_in cb = {.cmdbuf = REF(G(20)), .points = {bad, 1}, .point = 5};
	msg(CMX_OP_CommandBarrier, &cb, NULL, 0);
	struct cmx_FinalizeCommandBuffer_in fi = {.cmdbuf = REF(G(20))};
	msg(CMX_OP_FinalizeCommandBuffer, &fi, NULL, 0);
	struct cmx_GetCommandBufferInfo_in gi = {.cmdbuf = REF(G(20)),
						 .param = 0x1297 /* STATE */};
	msg(CMX_OP_GetCommandBufferInfo, &gi, NULL, 0);
	struct cmx_EnqueueCommandBuffer_in en = {
	    .queue = REF(G(2)), .cmdbuf = REF(G(20)), .event = REF(G(21))};
	msg(CMX_OP_EnqueueCommandBuffer, &en, NULL, 0);
	struct cmx_FinalizeCommandBuffer_in forged = {.cmdbuf = REF(G(3))};
	msg(CMX_OP_FinalizeCommandBuffer, &forged, NULL, 0);
	finish();
	struct cmx_ReleaseCommandBuffer_in rc = {.cmdbuf = REF(G(20))};
	msg(CMX_OP_ReleaseCommandBuffer, &rc, NULL, 0);
	save(dir, "cmdbuf");
}

/* A command buffer's image records: a copy, a fill and both image <->
 * buffer copies of a 4x2 image, then a box past the image and a buffer
 * named as the image. */
static void seed_cmdbuf_images(const char *dir)
{
	unsigned char px[4 * 4 * 2] = {0}, color[16] = {1, 2, 3, 4};
	uint64_t fmt[2] = {0x10B5 /* CL_RGBA */, 0x10D2 /* CL_UNORM_INT8 */};
	uint64_t desc[9] = {0x10F1 /* CL_MEM_OBJECT_IMAGE2D */, 4, 2, 0, 0, 0, 0, 0, 0};
	uint64_t z3[3] = {0, 0, 0}, o3[3] = {2, 0, 0}, r3[3] = {2, 2, 1}, far[3] = {3, 1, 0};
	uint64_t p1[1] = {1};

	begin(0);
	context_queue();
	buffer(G(3), 64);
	struct cmx_CreateImage_in ci = {.mem = REF(G(20)),
					.context = REF(G(1)),
					.flags = 1 | 0x20 /* RW, COPY_HOST_PTR */,
					.format = {fmt, 2},
					.desc = {desc, 9}};
	msg(CMX_OP_CreateImage, &ci, px, sizeof(px));
	struct cmx_CreateCommandBuffer_in cc = {.cmdbuf = REF(G(30)), .queue = REF(G(2))};
	msg(CMX_OP_CreateCommandBuffer, &cc, NULL, 0);
	struct cmx_CommandCopyImage_in cpi = {.cmdbuf = REF(G(30)),
					      .src = REF(G(20)),
					      .dst = REF(G(20)),
					      .src_origin = {z3, 3},
					      .dst_origin = {o3, 3},
					      .region = {r3, 3},
					      .point = 1};
	msg(CMX_OP_CommandCopyImage, &cpi, NULL, 0);
	struct cmx_CommandFillImage_in fim = {.cmdbuf = REF(G(30)),
					      .mem = REF(G(20)),
					      .color = {color, 16},
					      .origin = {z3, 3},
					      .region = {r3, 3},
					      .points = {p1, 1},
					      .point = 2};
	msg(CMX_OP_CommandFillImage, &fim, NULL, 0);
	struct cmx_CommandCopyImageToBuffer_in ib = {.cmdbuf = REF(G(30)),
						     .src = REF(G(20)),
						     .dst = REF(G(3)),
						     .src_origin = {z3, 3},
						     .region = {r3, 3},
						     .dst_offset = 8,
						     .point = 3};
	msg(CMX_OP_CommandCopyImageToBuffer, &ib, NULL, 0);
	struct cmx_CommandCopyBufferToImage_in bi = {.cmdbuf = REF(G(30)),
						     .src = REF(G(3)),
						     .dst = REF(G(20)),
						     .dst_origin = {o3, 3},
						     .region = {r3, 3},
						     .point = 4};
	msg(CMX_OP_CommandCopyBufferToImage, &bi, NULL, 0);
	struct cmx_FinalizeCommandBuffer_in fi = {.cmdbuf = REF(G(30))};
	msg(CMX_OP_FinalizeCommandBuffer, &fi, NULL, 0);
	struct cmx_EnqueueCommandBuffer_in en = {.queue = REF(G(2)), .cmdbuf = REF(G(30))};
	msg(CMX_OP_EnqueueCommandBuffer, &en, NULL, 0);
	finish();
	/* A second buffer: a box past the image, a buffer as the image. */
	cc.cmdbuf.id = G(31);
	msg(CMX_OP_CreateCommandBuffer, &cc, NULL, 0);
	cpi.cmdbuf.id = G(31);
	cpi.src_origin = (struct cmx_u64s){far, 3};
	msg(CMX_OP_CommandCopyImage, &cpi, NULL, 0);
	fim.cmdbuf.id = G(31);
	fim.mem.id = G(3);
	fim.points.n = 0;
	fim.point = 2;
	msg(CMX_OP_CommandFillImage, &fim, NULL, 0);
	fi.cmdbuf.id = G(31);
	msg(CMX_OP_FinalizeCommandBuffer, &fi, NULL, 0);
	save(dir, "cmdbuf_images");
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: fuzz_seeds SESSION_DIR AREA_DIR\n");
		return 2;
	}
	seed_buffers(argv[1]);
	seed_kernel(argv[1]);
	seed_printf(argv[1]);
	seed_compile_link(argv[1]);
	seed_parts(argv[1]);
	seed_build_race(argv[1]);
	seed_image(argv[1]);
	seed_include(argv[1], argv[2]);
	seed_area(argv[1], argv[2]);
	seed_rings(argv[1], argv[2]);
	seed_events(argv[1]);
	seed_handshake(argv[1]);
	seed_compress(argv[1]);
	seed_cmdbuf(argv[1]);
	seed_cmdbuf_images(argv[1]);
	return 0;
}
