// SPDX-License-Identifier: MIT
// Bad input against a live clmuxd: garbage, truncated and oversized
// messages, forged and wrong-kind ids, a client dying mid-transfer. Each must
// end only that connection, and the daemon's object and byte counts must
// come back to where they were, while another client keeps working.
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../guest/tests/e2e.h"
#include "addr.h"
#include "proto.gen.h"

#include "rawclient.h"

#define CMX_TOKEN_MAX_TEST 256

START_TEST(garbage_and_bad_headers)
{
	struct client other;
	uint64_t o0, b0;
	static const uint8_t garbage[64] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9 };
	struct cmx_hdr bad[] = {
		{ .size = 8, .op = 0x7777, .flags = CMX_HDR_SYNC }, /* unknown opcode */
		{ .size = 12, .op = CMX_OP_Ping, .flags = CMX_HDR_SYNC }, /* unaligned */
		{ .size = CMX_MAX_ARGS + 8, .op = CMX_OP_Ping, .flags = CMX_HDR_SYNC }, /* oversized */
		{ .size = 0, .op = CMX_OP_Ping, .flags = CMX_HDR_SYNC, .bulk = 64 }, /* bulk not allowed */
		{ .size = 0, .op = CMX_OP_Ping }, /* sync call sent async */
		{ .size = 0, .op = CMX_OP_Flush, .flags = CMX_HDR_SYNC }, /* async call sent sync */
		{ .size = 0, .op = CMX_OP_EventDone }, /* a notification, from a guest */
		{ .size = 48, .op = CMX_OP_WriteBuffer, .bulk = CMX_MAX_BULK + 1 }, /* absurd payload */
	};

	daemon_counts(&o0, &b0);
	hello(&other);
	/* Garbage before any Hello. */
	int fd = dial();
	send_raw(fd, garbage, sizeof(garbage));
	ck_assert(closed_by_daemon(fd));
	close(fd);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct client c;
		hello(&c);
		send_raw(c.fd, &bad[i], CMX_HDR_SIZE);
		ck_assert_msg(closed_by_daemon(c.fd), "bad header %zu not refused", i);
		close(c.fd);
		ping_ok(&other);
	}
	/* A second Hello on an open session. */
	{
		struct client c;
		struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
					   .role = CMX_ROLE_CALL };
		hello(&c);
		send_msg(&c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
		ck_assert(closed_by_daemon(c.fd));
		close(c.fd);
	}
	/* Another protocol version: refused with a reply that names the
	 * daemon's, so that the guest can say so; then closed. */
	{
		struct client c = { .fd = dial() };
		struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION + 1,
					   .role = CMX_ROLE_CALL };
		struct cmx_Hello_out out;
		send_msg(&c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(&c, &cmx_desc_Hello_out, &out, NULL), CL_INVALID_VALUE);
		ck_assert_uint_eq(out.version, CMX_PROTO_VERSION);
		ck_assert(closed_by_daemon(c.fd));
		close(c.fd);
	}
	/* No role (0), and a role past the schema's. */
	for (uint64_t role = 0; role < 8; role += 7) {
		struct client c = { .fd = dial() };
		struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
					   .role = role };
		ck_assert(!cmx_role_valid(role));
		send_msg(&c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
		ck_assert(closed_by_daemon(c.fd));
		close(c.fd);
	}
	/* A notification channel naming a session with the wrong token. */
	{
		struct client c;
		struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
					   .role = CMX_ROLE_NOTIFY, .session = other.session,
					   .token = other.token ^ 1 };
		c.fd = dial();
		c.seq = 0;
		send_msg(&c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
		ck_assert(closed_by_daemon(c.fd));
		close(c.fd);
	}
	ping_ok(&other);
	close(other.fd);
	counts_return(o0, b0);
}
END_TEST

/* Arguments that do not decode: truncated arrays, counts past the end. */
START_TEST(malformed_arguments)
{
	uint64_t o0, b0;
	struct client c;
	uint64_t args[4] = { 5, 1, 1000, 0 }; /* CreateContext: props count 1000 */
	struct cmx_hdr h = { .size = sizeof(args), .op = CMX_OP_CreateContext };

	daemon_counts(&o0, &b0);
	hello(&c);
	send_raw(c.fd, &h, CMX_HDR_SIZE);
	send_raw(c.fd, args, sizeof(args));
	ck_assert(closed_by_daemon(c.fd));
	close(c.fd);
	counts_return(o0, b0);
}
END_TEST

/* Ids of another session, of another kind, or never created: the call's
 * CL_INVALID_* error, and the connection lives on. */
START_TEST(forged_ids)
{
	struct client a, b;
	uint64_t devs[1] = { 1 };
	struct cmx_CreateContext_in ctx = { .context = { 0x10100 }, .devices = { devs, 1 } };
	struct cmx_GetContextInfo_in q = { .context = { 0x10100 }, .param = CL_CONTEXT_NUM_DEVICES };
	struct cmx_GetContextInfo_out out;
	struct cmx_GetDeviceInfo_in dq = { .device = { 0x10100 }, .param = CL_DEVICE_NAME };
	struct cmx_GetDeviceInfo_out dout;
	struct cmx_GetMemInfo_in mq = { .mem = { 0xdeadbeef }, .param = CL_MEM_SIZE };
	struct cmx_GetMemInfo_out mout;
	uint64_t o0, b0;

	daemon_counts(&o0, &b0);
	hello(&a);
	hello(&b);
	send_msg(&a, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(&a, &cmx_desc_GetContextInfo_in, &q, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetContextInfo_out, &out, NULL), CL_SUCCESS);
	/* The same id means nothing in session b. */
	send_msg(&b, &cmx_desc_GetContextInfo_in, &q, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&b, &cmx_desc_GetContextInfo_out, &out, NULL), CL_INVALID_CONTEXT);
	/* A context id used as a device: wrong kind. */
	send_msg(&a, &cmx_desc_GetDeviceInfo_in, &dq, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetDeviceInfo_out, &dout, NULL), CL_INVALID_DEVICE);
	send_msg(&a, &cmx_desc_GetMemInfo_in, &mq, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetMemInfo_out, &mout, NULL), CL_INVALID_MEM_OBJECT);
	/* An id reused for a second object: refused, the first one intact. */
	send_msg(&a, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(&a, &cmx_desc_GetContextInfo_in, &q, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetContextInfo_out, &out, NULL), CL_SUCCESS);
	ping_ok(&b);
	close(a.fd);
	close(b.fd);
	counts_return(o0, b0);
}
END_TEST

/* GetCreateStatus of any u64: a live id, a poisoned one (its creation's
 * error, until released), another session's, 0, one never named. */
START_TEST(create_status)
{
	struct client a, b;
	uint64_t devs[1] = {1}, o0, b0;
	struct cmx_CreateContext_in ctx = {.context = {0x10200}, .devices = {devs, 1}};
	struct cmx_CreateBuffer_in bad = {.mem = {0x10201}, .context = {0x10999}, .size = 64};
	struct cmx_ReleaseMem_in rel = {.mem = {0x10201}};
	static const struct {
		int who;
		uint64_t id;
		int32_t want;
	} asks[] = {
	    {0, 0x10200, CL_SUCCESS},	    {0, 0x10201, CL_INVALID_CONTEXT},
	    {1, 0x10200, CL_INVALID_VALUE}, {0, 0, CL_INVALID_VALUE},
	    {0, ~0ull, CL_INVALID_VALUE},   {0, 1, CL_SUCCESS /* a root device */},
	};
	struct cmx_GetCreateStatus_out out;

	daemon_counts(&o0, &b0);
	hello(&a);
	hello(&b);
	send_msg(&a, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(&a, &cmx_desc_CreateBuffer_in, &bad, 0, NULL, 0);
	for (size_t i = 0; i < sizeof(asks) / sizeof(asks[0]); i++) {
		struct client *c = asks[i].who ? &b : &a;
		struct cmx_GetCreateStatus_in in = {.object = asks[i].id};

		send_msg(c, &cmx_desc_GetCreateStatus_in, &in, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(c, &cmx_desc_GetCreateStatus_out, &out, NULL),
				 asks[i].want);
	}
	send_msg(&a, &cmx_desc_ReleaseMem_in, &rel, 0, NULL, 0);
	{
		struct cmx_GetCreateStatus_in in = {.object = 0x10201};

		send_msg(&a, &cmx_desc_GetCreateStatus_in, &in, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(&a, &cmx_desc_GetCreateStatus_out, &out, NULL),
				 CL_INVALID_VALUE);
	}
	ping_ok(&b);
	close(a.fd);
	close(b.fd);
	counts_return(o0, b0);
}
END_TEST

/* A client that dies halfway through a 16 MiB buffer write, holding a
 * context, a queue and a buffer: all of it is released. */
START_TEST(killed_mid_transfer)
{
	uint64_t o0, b0, o1, b1;
	pid_t pid;
	int status;

	daemon_counts(&o0, &b0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct client c;
		struct cmx_WriteBuffer_in wr = { .queue = { 0x10011 }, .mem = { 0x10012 }, .size = 16 << 20 };
		struct cmx_Ping_in pin = { 0 };
		struct cmx_Ping_out pout;
		static uint8_t half[8 << 20];

		hello(&c);
		queue_and_buffer(&c, 0x10010, 16 << 20);
		send_msg(&c, &cmx_desc_Ping_in, &pin, 1, NULL, 0);
		if (recv_reply(&c, &cmx_desc_Ping_out, &pout, NULL))
			_exit(3);
		send_msg(&c, &cmx_desc_WriteBuffer_in, &wr, 0, NULL, 16 << 20);
		send_raw(c.fd, half, sizeof(half));
		/* Tell the parent the daemon holds our objects, then die. */
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	counts_return(o0, b0);
	daemon_counts(&o1, &b1);
	ck_assert_uint_eq(b1, b0);
}
END_TEST

/* Large transfers, which on a CPU device land in the mapped buffer or leave
 * from it (host/land.c): a payload that is not the size the arguments say,
 * or a range past the buffer's end, is refused and lands nowhere; a good
 * one reads back; a client that dies while its 16 MiB read is being sent
 * leaves nothing behind. */
START_TEST(lying_large_transfers)
{
	uint64_t o0, b0;
	pid_t pid;
	int status;

	daemon_counts(&o0, &b0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct client c;
		struct cmx_WriteBuffer_in wr = { .queue = { 0x10021 }, .mem = { 0x10022 } };
		struct cmx_WriteBuffer_out wout;
		struct cmx_ReadBuffer_in rd = { .queue = { 0x10021 }, .mem = { 0x10022 },
						    .offset = 1 << 20, .size = 2 << 20 };
		struct cmx_ReadBuffer_out rout;
		struct cmx_CreateBuffer_in big = { .mem = { 0x10023 }, .context = { 0x10020 }, .size = 16 << 20 };
		struct cmx_ReadBuffer_in rbig = { .queue = { 0x10021 }, .mem = { 0x10023 }, .size = 16 << 20 };
		uint8_t *data = malloc(2 << 20), *back = malloc(2 << 20);

		e2e_rand_bytes(data, 2 << 20, 5);
		hello(&c);
		queue_and_buffer(&c, 0x10020, 4 << 20);
		/* 2 MiB of payload for a 16 MiB write. */
		wr.size = 16 << 20;
		send_msg(&c, &cmx_desc_WriteBuffer_in, &wr, 1, data, 2 << 20);
		if (recv_reply(&c, &cmx_desc_WriteBuffer_out, &wout, NULL) != CL_INVALID_VALUE)
			_exit(3);
		/* Past the end of the 4 MiB buffer. */
		wr.offset = 3 << 20;
		wr.size = 2 << 20;
		send_msg(&c, &cmx_desc_WriteBuffer_in, &wr, 1, data, 2 << 20);
		if (recv_reply(&c, &cmx_desc_WriteBuffer_out, &wout, NULL) != CL_INVALID_VALUE)
			_exit(4);
		wr.offset = 1 << 20;
		send_msg(&c, &cmx_desc_WriteBuffer_in, &wr, 1, data, 2 << 20);
		if (recv_reply(&c, &cmx_desc_WriteBuffer_out, &wout, NULL) != CL_SUCCESS)
			_exit(5);
		send_msg(&c, &cmx_desc_ReadBuffer_in, &rd, 1, NULL, 0);
		if (recv_reply(&c, &cmx_desc_ReadBuffer_out, &rout, NULL) != CL_SUCCESS ||
		    recv(c.fd, back, 2 << 20, MSG_WAITALL) != 2 << 20 || memcmp(back, data, 2 << 20))
			_exit(6);
		/* A 16 MiB read the client never takes: it dies meanwhile. */
		send_msg(&c, &cmx_desc_CreateBuffer_in, &big, 0, NULL, 0);
		send_msg(&c, &cmx_desc_ReadBuffer_in, &rbig, 1, NULL, 0);
		if (recv(c.fd, back, 4096, MSG_WAITALL) != 4096)
			_exit(7);
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "client exit %d",
		      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	counts_return(o0, b0);
}
END_TEST

/* Image calls whose sizes lie: contents shorter than the descriptor's
 * pitches, regions whose byte count overflows, a payload that does not
 * match its region, a sampler list of odd length. Each gets its error, the
 * connection lives on, and the image it did make is uncharged at close. */
START_TEST(lying_images)
{
	struct client c;
	uint64_t devs[1] = { 1 }, qprops[1] = { 0 }, o0, b0;
	uint64_t fmt[2] = { CL_RGBA, CL_UNORM_INT8 }, desc[9] = { CL_MEM_OBJECT_IMAGE2D, 37, 23, 0, 0,
								   37 * 4, 0, 0, 0 };
	uint64_t zero[3] = { 0, 0, 0 }, huge[3] = { 1ull << 40, 1ull << 40, 1 }, r4[3] = { 4, 4, 1 };
	uint64_t odd[3] = { CL_SAMPLER_FILTER_MODE, CL_FILTER_LINEAR, CL_SAMPLER_ADDRESSING_MODE };
	struct cmx_CreateContext_in ctx = { .context = { 0x10200 }, .devices = { devs, 1 } };
	struct cmx_CreateQueue_in qu = { .queue = { 0x10201 }, .context = { 0x10200 }, .device = { 1 },
					 .props = { qprops, 1 } };
	struct cmx_CreateImage_in img = { .mem = { 0x10202 }, .context = { 0x10200 },
					  .flags = CL_MEM_READ_WRITE, .format = { fmt, 2 },
					  .desc = { desc, 9 } };
	struct cmx_CreateImage_out iout;
	struct cmx_ReadImage_in rd = { .queue = { 0x10201 }, .mem = { 0x10202 }, .origin = { zero, 3 },
					   .region = { huge, 3 } };
	struct cmx_ReadImage_out rout;
	struct cmx_WriteImage_in wr = { .queue = { 0x10201 }, .mem = { 0x10202 }, .origin = { zero, 3 },
					    .region = { r4, 3 } };
	struct cmx_WriteImage_out wout;
	struct cmx_CreateSampler_in smp = { .sampler = { 0x10203 }, .context = { 0x10200 },
					    .props = { odd, 3 } };
	static uint8_t pixels[37 * 23 * 4];

	daemon_counts(&o0, &b0);
	hello(&c);
	send_msg(&c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(&c, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
	send_msg(&c, &cmx_desc_CreateImage_in, &img, 1, pixels, 64);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_CreateImage_out, &iout, NULL), CL_INVALID_HOST_PTR);
	send_msg(&c, &cmx_desc_CreateImage_in, &img, 1, pixels, sizeof(pixels));
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_CreateImage_out, &iout, NULL), CL_SUCCESS);
	ck_assert_uint_ge(iout.size, sizeof(pixels));
	send_msg(&c, &cmx_desc_ReadImage_in, &rd, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_ReadImage_out, &rout, NULL), CL_INVALID_VALUE);
	send_msg(&c, &cmx_desc_WriteImage_in, &wr, 1, pixels, 16);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_WriteImage_out, &wout, NULL), CL_INVALID_VALUE);
	send_msg(&c, &cmx_desc_CreateSampler_in, &smp, 0, NULL, 0);
	ping_ok(&c);
	close(c.fd);
	counts_return(o0, b0);
}
END_TEST

/* Programs from a lying guest: include files whose names climb out of
 * their directory or are absolute (refused, nothing written outside), and
 * a link of a program whose compile failed (refused before the driver,
 * which may abort on it; the link's id still exists, so its release is no
 * error). */
START_TEST(lying_programs)
{
	struct client c;
	uint64_t devs[1] = { 1 }, prog_ids[1] = { 0x10301 }, o0, b0, many_devs[64];
	static const char src[] = "__kernel void b(__global int *x) { x[0] = nope; }";
	struct cmx_CreateContext_in ctx = { .context = { 0x10300 }, .devices = { devs, 1 } };
	struct cmx_CreateProgramWithSource_in ps = { .program = { 0x10301 }, .context = { 0x10300 },
						     .source = { src, sizeof(src) - 1 } };
	struct cmx_CompileProgram_in comp = { .program = { 0x10301 }, .devices = { devs, 1 } };
	struct cmx_CompileProgram_out cout;
	struct cmx_LinkProgram_in link = { .program = { 0x10302 }, .context = { 0x10300 },
					   .devices = { devs, 1 }, .inputs = { prog_ids, 1 } };
	struct cmx_LinkProgram_out lout;
	struct cmx_ReleaseProgram_in rel = { .program = { 0x10302 } };
	struct cmx_GetStats_in sin = { 0 };
	struct cmx_GetStats_out sout;
	static const char *const bad[] = { "../escaped.h", "/tmp/e2e-escaped.h", "a/../../b.h",
					   "a//b.h", "./a.h", "a/" };
	uint8_t *keep;

	for (size_t i = 0; i < 64; i++)
		many_devs[i] = 1;
	daemon_counts(&o0, &b0);
	hello(&c);
	send_msg(&c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(&c, &cmx_desc_CreateProgramWithSource_in, &ps, 0, NULL, 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct cmx_IncludeFiles_in inc = { .program = { 0x10301 }, .dir = 0 };
		struct cmx_IncludeFile f = { .path = { bad[i], strlen(bad[i]) },
					     .data = { "#error\n", 7 } };
		struct cmx_IncludeFiles_bulk files = { .files = { &f, 1 } };
		uint64_t b[64];
		size_t n = cmx_codec_size(&cmx_desc_IncludeFiles_bulk, &files);

		ck_assert_uint_le(n, sizeof(b));
		cmx_codec_encode(&cmx_desc_IncludeFiles_bulk, &files, (uint8_t *)b);
		send_msg(&c, &cmx_desc_IncludeFiles_in, &inc, 0, b, n);
	}
	{
		/* A payload that claims 2^40 files in 16 bytes: refused before
		 * anything is allocated for them. */
		struct cmx_IncludeFiles_in inc = { .program = { 0x10301 }, .dir = 0 };
		uint64_t lie[2] = { 1ull << 40, 0 };

		send_msg(&c, &cmx_desc_IncludeFiles_in, &inc, 0, lie, sizeof(lie));
	}
	send_msg(&c, &cmx_desc_CompileProgram_in, &comp, 1, NULL, 0);
	ck_assert_int_ne(recv_reply(&c, &cmx_desc_CompileProgram_out, &cout, NULL), CL_SUCCESS);
	send_msg(&c, &cmx_desc_LinkProgram_in, &link, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_LinkProgram_out, &lout, NULL), CL_INVALID_OPERATION);
	/* The schema's 64 devices, the one device repeated: more than the
	 * daemon's list of devices held (it overflowed). */
	link.program.id = 0x10303;
	link.devices = (struct cmx_refs){ .v = many_devs, .n = 64 };
	send_msg(&c, &cmx_desc_LinkProgram_in, &link, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_LinkProgram_out, &lout, NULL), CL_INVALID_OPERATION);
	rel.program.id = 0x10303;
	send_msg(&c, &cmx_desc_ReleaseProgram_in, &rel, 0, NULL, 0);
	rel.program.id = 0x10302;
	send_msg(&c, &cmx_desc_ReleaseProgram_in, &rel, 0, NULL, 0);
	send_msg(&c, &cmx_desc_GetStats_in, &sin, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_GetStats_out, &sout, &keep), 0);
	/* Every lying IncludeFiles failed; the release did not. */
	ck_assert_uint_eq(sout.counters.v[5], sizeof(bad) / sizeof(*bad) + 1);
	free(keep);
	ck_assert_int_ne(access("/tmp/e2e-escaped.h", F_OK), 0);
	ck_assert_int_ne(system("ls /tmp/clmuxd.*/escaped.h /tmp/clmuxd.*/s*/escaped.h "
				"/tmp/clmuxd.*/s*/p*/escaped.h /tmp/clmuxd.*/*/b.h >/dev/null 2>&1"),
			 0);
	close(c.fd);
	counts_return(o0, b0);
}
END_TEST

/* Sub-devices: an unterminated list, ids the guest does not own or that
 * run into its objects, a root device "released": refused, nothing kept. */
START_TEST(lying_subdevices)
{
	struct client c;
	uint64_t devs[1] = { 1 }, o0, b0;
	uint64_t open_list[2] = { CL_DEVICE_PARTITION_EQUALLY, 1 };
	uint64_t eq1[3] = { CL_DEVICE_PARTITION_EQUALLY, 1, 0 };
	struct cmx_CreateContext_in ctx = { .context = { 0x10601 }, .devices = { devs, 1 } };
	struct cmx_CreateSubDevices_in sd = { .device = { 1 }, .props = { open_list, 2 },
					      .devices = { 0x10600 }, .room = 64 };
	struct cmx_CreateSubDevices_out sout;
	struct cmx_ReleaseDevice_in rel = { .device = { 1 } };
	struct cmx_GetDeviceInfo_in dq = { .device = { 1 }, .param = CL_DEVICE_NAME };
	struct cmx_GetDeviceInfo_out dout;
	uint8_t *keep;
	cl_uint cu = 0;

	daemon_counts(&o0, &b0);
	hello(&c);
	send_msg(&c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(&c, &cmx_desc_CreateSubDevices_in, &sd, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_CreateSubDevices_out, &sout, NULL),
			 CL_INVALID_VALUE);
	/* The second id of the range is the context's (with two compute
	 * units or more, "equally 1" makes two). */
	sd.props = (struct cmx_u64s){ eq1, 3 };
	dq.param = CL_DEVICE_MAX_COMPUTE_UNITS;
	send_msg(&c, &cmx_desc_GetDeviceInfo_in, &dq, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_GetDeviceInfo_out, &dout, &keep), CL_SUCCESS);
	memcpy(&cu, dout.value.ptr, sizeof(cu));
	free(keep);
	dq.param = CL_DEVICE_NAME;
	if (cu >= 2) {
		send_msg(&c, &cmx_desc_CreateSubDevices_in, &sd, 1, NULL, 0);
		ck_assert_int_eq(recv_reply(&c, &cmx_desc_CreateSubDevices_out, &sout, NULL),
				 CL_INVALID_VALUE);
	}
	/* Room but no id. */
	sd.devices.id = 0;
	send_msg(&c, &cmx_desc_CreateSubDevices_in, &sd, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_CreateSubDevices_out, &sout, NULL),
			 CL_INVALID_VALUE);
	/* A root device outlives its release; a sub-device does not. */
	send_msg(&c, &cmx_desc_ReleaseDevice_in, &rel, 0, NULL, 0);
	send_msg(&c, &cmx_desc_GetDeviceInfo_in, &dq, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_GetDeviceInfo_out, &dout, &keep), CL_SUCCESS);
	free(keep);
	/* A device that cannot be partitioned (a GPU) refuses as natively. */
	dq.param = CL_DEVICE_PARTITION_MAX_SUB_DEVICES;
	send_msg(&c, &cmx_desc_GetDeviceInfo_in, &dq, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_GetDeviceInfo_out, &dout, &keep), CL_SUCCESS);
	memcpy(&cu, dout.value.ptr, sizeof(cu));
	free(keep);
	dq.param = CL_DEVICE_NAME;
	sd.devices.id = 0x10700;
	send_msg(&c, &cmx_desc_CreateSubDevices_in, &sd, 1, NULL, 0);
	if (cu < 2) {
		ck_assert_int_ne(recv_reply(&c, &cmx_desc_CreateSubDevices_out, &sout, NULL),
				 CL_SUCCESS);
		ping_ok(&c);
		close(c.fd);
		counts_return(o0, b0);
		return;
	}
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_CreateSubDevices_out, &sout, NULL), CL_SUCCESS);
	rel.device.id = 0x10700;
	send_msg(&c, &cmx_desc_ReleaseDevice_in, &rel, 0, NULL, 0);
	dq.device.id = 0x10700;
	send_msg(&c, &cmx_desc_GetDeviceInfo_in, &dq, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_GetDeviceInfo_out, &dout, NULL),
			 CL_INVALID_DEVICE);
	ping_ok(&c);
	close(c.fd);
	counts_return(o0, b0);
}
END_TEST

/* Printing kernels run one at a time daemon-wide (host/kprintf.c): one
 * waiting on a user event that is never set, then its client gone, and
 * lying launches, must hold back neither that session's next call nor
 * another client's printing kernel. */
static void printing_setup(struct client *c, uint64_t base)
{
	static const char src[] = "__kernel void p(int x) { printf(\"x %d\\n\", x); }";
	uint64_t devs[1] = { 1 };
	struct cmx_CreateContext_in ctx = { .context = { base }, .devices = { devs, 1 } };
	struct cmx_CreateQueue_in q = { .queue = { base + 1 }, .context = { base }, .device = { 1 } };
	struct cmx_CreateProgramWithSource_in ps = { .program = { base + 2 }, .context = { base },
						     .source = { src, sizeof(src) - 1 } };
	struct cmx_BuildProgram_in b = { .program = { base + 2 }, .devices = { devs, 1 } };
	struct cmx_BuildProgram_out bout;
	struct cmx_CreateKernel_in k = { .kernel = { base + 3 }, .program = { base + 2 },
					 .name = { "p", 2 } };
	int64_t x = 5;
	struct cmx_SetKernelArg_in arg = { .kernel = { base + 3 }, .kind = 0, .size = 4,
					   .value = { &x, 4 } };
	uint8_t *keep;

	send_msg(c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateQueue_in, &q, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateProgramWithSource_in, &ps, 0, NULL, 0);
	send_msg(c, &cmx_desc_BuildProgram_in, &b, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_BuildProgram_out, &bout, &keep), CL_SUCCESS);
	cmx_codec_release(&cmx_desc_BuildProgram_out, &bout);
	free(keep);
	send_msg(c, &cmx_desc_CreateKernel_in, &k, 0, NULL, 0);
	send_msg(c, &cmx_desc_SetKernelArg_in, &arg, 0, NULL, 0);
}

START_TEST(printing_abandoned)
{
	struct client a, b;
	uint64_t o0, b0, one[1] = { 1 }, four[4] = { 1, 1, 1, 1 }, wait[1] = { 0x10405 };
	struct cmx_CreateUserEvent_in ue = { .event = { 0x10405 }, .context = { 0x10400 } };
	struct cmx_EnqueueKernelPrintf_in held = { .queue = { 0x10401 }, .kernel = { 0x10403 },
						   .global = { one, 1 }, .wait = { wait, 1 },
						   .tag = 0x1234 };
	struct cmx_EnqueueKernelPrintf_in lie = held;
	struct cmx_EnqueueKernelPrintf_in run = { .queue = { 0x10501 }, .kernel = { 0x10503 },
						  .global = { one, 1 }, .tag = 0x5678 };
	struct cmx_Finish_in fin = { .queue = { 0x10501 } };

	daemon_counts(&o0, &b0);
	hello(&a);
	hello(&b);
	printing_setup(&a, 0x10400);
	send_msg(&a, &cmx_desc_CreateUserEvent_in, &ue, 0, NULL, 0);
	send_msg(&a, &cmx_desc_EnqueueKernelPrintf_in, &held, 0, NULL, 0);
	/* A forged kernel, a forged wait list: refused, the session lives. */
	lie.kernel.id = 0xdead;
	send_msg(&a, &cmx_desc_EnqueueKernelPrintf_in, &lie, 0, NULL, 0);
	lie.kernel.id = 0x10403;
	wait[0] = 0xbad;
	send_msg(&a, &cmx_desc_EnqueueKernelPrintf_in, &lie, 0, NULL, 0);
	ping_ok(&a);
	/* Another client's printing kernel runs while a's waits. */
	printing_setup(&b, 0x10500);
	send_msg(&b, &cmx_desc_EnqueueKernelPrintf_in, &run, 0, NULL, 0);
	send_msg(&b, &cmx_desc_Finish_in, &fin, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&b, NULL, NULL, NULL), CL_SUCCESS);
	/* Four dimensions (past the schema's max) end a's session, its
	 * kernel held; b's next one still runs. */
	lie.global = (struct cmx_u64s){ four, 4 };
	lie.wait.n = 0;
	send_msg(&a, &cmx_desc_EnqueueKernelPrintf_in, &lie, 0, NULL, 0);
	expect_closed(a.fd);
	send_msg(&b, &cmx_desc_EnqueueKernelPrintf_in, &run, 0, NULL, 0);
	send_msg(&b, &cmx_desc_Finish_in, &fin, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&b, NULL, NULL, NULL), CL_SUCCESS);
	close(b.fd);
	counts_return(o0, b0);
}
END_TEST

/* With tokens (CMX_E2E_TRANSPORT=tcp): what comes before Auth, and wrong or
 * missing tokens, is refused on that connection alone. */
START_TEST(token_refused)
{
	const char *token = getenv("CLMUX_TOKEN");
	struct cmx_Hello_in hi = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
				   .role = CMX_ROLE_CALL };
	struct cmx_hdr big = { .size = 1u << 20, .op = CMX_OP_Auth, .flags = CMX_HDR_SYNC };
	struct cmx_hdr paid = { .size = 8, .op = CMX_OP_Auth, .flags = CMX_HDR_SYNC, .bulk = 8 };
	static const uint8_t garbage[32] = "GET / HTTP/1.0\r\n\r\n";
	struct client other, c = { 0 };
	char wrong[CMX_TOKEN_MAX_TEST + 1];
	uint64_t o0, b0;

	if (!token || !*token)
		return;
	daemon_counts(&o0, &b0);
	hello(&other);
	/* A wrong token: refused with a status, then the connection ends. */
	snprintf(wrong, sizeof(wrong), "%s", token);
	wrong[0] = wrong[0] == 'x' ? 'y' : 'x';
	c.fd = dial_raw();
	ck_assert_int_eq(auth(c.fd, wrong), CL_INVALID_VALUE);
	expect_closed(c.fd);
	/* No token at all. */
	c.fd = dial_raw();
	ck_assert_int_eq(auth(c.fd, ""), CL_INVALID_VALUE);
	expect_closed(c.fd);
	ping_ok(&other);
	/* Hello without Auth; malformed first bytes; an Auth larger than a
	 * token could be, or with a payload: closed, nothing allocated. */
	c.fd = dial_raw();
	c.seq = 0;
	send_msg(&c, &cmx_desc_Hello_in, &hi, 1, NULL, 0);
	expect_closed(c.fd);
	c.fd = dial_raw();
	send_raw(c.fd, garbage, sizeof(garbage));
	expect_closed(c.fd);
	c.fd = dial_raw();
	send_raw(c.fd, &big, CMX_HDR_SIZE);
	expect_closed(c.fd);
	c.fd = dial_raw();
	send_raw(c.fd, &paid, CMX_HDR_SIZE);
	expect_closed(c.fd);
	/* Authenticated, then Auth again: a protocol error. */
	c.fd = dial();
	c.seq = 1;
	send_msg(&c, &cmx_desc_Auth_in, &(struct cmx_Auth_in){ .token = { token, strlen(token) } },
		 1, NULL, 0);
	expect_closed(c.fd);
	ping_ok(&other);
	close(other.fd);
	counts_return(o0, b0);
}
END_TEST

/* A stranger that connects and says nothing is closed after the time
 * allowed for Hello (5 s), not held. */
START_TEST(token_idle)
{
	struct timeval tv = { 30, 0 };
	char b;
	int fd;

	if (!getenv("CLMUX_TOKEN") || !*getenv("CLMUX_TOKEN"))
		return;
	fd = dial_raw();
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(recv(fd, &b, 1, 0), 0);
	close(fd);
}
END_TEST

/* A flood of wrong tokens from one address: after a burst the address is
 * refused unchecked (even with the right token) while an open session goes
 * on. Runs last: the loopback address stays refused for a few seconds. */
START_TEST(token_flood)
{
	const char *token = getenv("CLMUX_TOKEN");
	struct client other;
	int checked = 0, limited = 0, fd;
	struct timespec t0, t1;

	if (!token || !*token)
		return;
	hello(&other);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 40 && !limited; i++) {
		int st;
		fd = dial_raw();
		st = auth(fd, "0000000000000000-wrong");
		ck_assert_msg(st == CL_INVALID_VALUE || st == CL_OUT_OF_RESOURCES,
			      "attempt %d: status %d", i, st);
		checked += st == CL_INVALID_VALUE;
		limited += st == CL_OUT_OF_RESOURCES;
		expect_closed(fd);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ck_assert_msg(limited, "40 wrong tokens, none refused unchecked");
	/* At most the burst (5), plus one per second the bucket drained while
	 * the loop ran: a bound that holds however slow the machine is. */
	ck_assert_int_le(checked, 5 + (t1.tv_sec - t0.tv_sec) + 1);
	fd = dial_raw();
	ck_assert_int_eq(auth(fd, token), CL_OUT_OF_RESOURCES);
	close(fd);
	ping_ok(&other);
	close(other.fd);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("badinput");
	TCase *tc = tcase_create("badinput");

	tcase_add_test(tc, garbage_and_bad_headers);
	tcase_add_test(tc, malformed_arguments);
	tcase_add_test(tc, forged_ids);
	tcase_add_test(tc, create_status);
	tcase_add_test(tc, killed_mid_transfer);
	tcase_add_test(tc, lying_large_transfers);
	tcase_add_test(tc, lying_images);
	tcase_add_test(tc, lying_programs);
	tcase_add_test(tc, printing_abandoned);
	tcase_add_test(tc, lying_subdevices);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	tc = tcase_create("tokens");
	tcase_add_test(tc, token_refused);
	tcase_add_test(tc, token_idle);
	tcase_add_test(tc, token_flood);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return e2e_daemon_run(s);
}
