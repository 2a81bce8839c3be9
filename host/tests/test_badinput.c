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

#define CMX_TOKEN_MAX_TEST 256

struct client {
	int fd;
	uint32_t seq;
	uint64_t session, token;
};

/* Connects to $CLMUX_SERVER, any transport, without a token. */
static int dial_raw(void)
{
	const char *spec = getenv("CLMUX_SERVER");
	struct cmx_addr a;
	char why[160];
	int fd;

	ck_assert_msg(spec && !cmx_addr_parse(spec, &a, why, sizeof(why)), "CLMUX_SERVER: %s",
		      spec ? why : "unset");
	fd = cmx_addr_connect(&a);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int auth(int fd, const char *token);

/* Connects and, where the harness set a token (tcp), authenticates. */
static int dial(void)
{
	const char *token = getenv("CLMUX_TOKEN");
	int fd = dial_raw();

	if (token && *token)
		ck_assert_int_eq(auth(fd, token), 0);
	return fd;
}

static void send_raw(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static void send_msg(struct client *c, const struct cmx_msgdesc *d, const void *in, int sync,
		     const void *bulk, uint64_t bulk_len)
{
	size_t size = cmx_codec_size(d, in);
	uint8_t *buf = malloc(CMX_HDR_SIZE + size);
	struct cmx_hdr h = { .size = (uint32_t)size, .op = d->op, .flags = sync ? CMX_HDR_SYNC : 0,
			     .seq = ++c->seq, .bulk = bulk_len };

	memcpy(buf, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, in, buf + CMX_HDR_SIZE);
	send_raw(c->fd, buf, CMX_HDR_SIZE + size);
	if (bulk && bulk_len)
		send_raw(c->fd, bulk, bulk_len);
	free(buf);
}

/* Reads one reply; returns its status, decoding outputs into out. Returns
 * 1 when the daemon closed the connection instead. */
static int recv_reply(struct client *c, const struct cmx_msgdesc *d, void *out, uint8_t **keep)
{
	struct cmx_hdr h;
	uint8_t *args;
	int64_t status;

	if (recv(c->fd, &h, CMX_HDR_SIZE, MSG_WAITALL) != CMX_HDR_SIZE)
		return 1;
	ck_assert_uint_eq(h.op, CMX_OP_REPLY);
	ck_assert_uint_eq(h.seq, c->seq);
	args = aligned_alloc(8, h.size + 8);
	ck_assert_int_eq(recv(c->fd, args, h.size, MSG_WAITALL), (ssize_t)h.size);
	memcpy(&status, args, 8);
	if (d)
		ck_assert_int_eq(cmx_codec_decode(d, args + 8, h.size - 8, out), 0);
	if (keep)
		*keep = args;
	else
		free(args);
	return (int)status;
}

/* Sends Auth with token on a fresh connection; returns the reply's status,
 * or 1 when the daemon closed the connection instead. */
static int auth(int fd, const char *token)
{
	struct client c = { .fd = fd };
	struct cmx_Auth_in in = { .token = { token, strlen(token) } };

	send_msg(&c, &cmx_desc_Auth_in, &in, 1, NULL, 0);
	return recv_reply(&c, NULL, NULL, NULL);
}

static void hello(struct client *c)
{
	struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION };
	struct cmx_Hello_out out;

	c->fd = dial();
	c->seq = 0;
	send_msg(c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_Hello_out, &out, NULL), 0);
	c->session = out.session;
	c->token = out.token;
}

/* True when the daemon has ended this connection. */
static int closed_by_daemon(int fd)
{
	char b;
	struct timeval tv = { 10, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		ssize_t n = recv(fd, &b, 1, 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n < 0)
			return 0;
	}
}

/* Daemon-wide (objects, bytes), seen from a fresh session, once the
 * daemon has caught up with closed connections. */
static void daemon_counts(uint64_t *objects, uint64_t *bytes)
{
	struct client c;
	struct cmx_GetStats_in in = { 0 };
	struct cmx_GetStats_out out;
	uint8_t *keep;

	hello(&c);
	send_msg(&c, &cmx_desc_GetStats_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_GetStats_out, &out, &keep), 0);
	ck_assert_uint_ge(out.counters.n, 8);
	/* Not counting this session's own device object. */
	*objects = out.counters.v[6] - out.counters.v[3];
	*bytes = out.counters.v[7];
	free(keep);
	close(c.fd);
}

static void ping_ok(struct client *c)
{
	struct cmx_Ping_in in = { 0 };
	struct cmx_Ping_out out;

	send_msg(c, &cmx_desc_Ping_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_Ping_out, &out, NULL), 0);
}

/* Waits until the daemon's counts are back to base (closes are async). */
static void counts_return(uint64_t obj0, uint64_t bytes0)
{
	uint64_t o = 0, b = 0;

	for (int i = 0; i < 200; i++) {
		daemon_counts(&o, &b);
		if (o == obj0 && b == bytes0)
			return;
		usleep(20000);
	}
	ck_abort_msg("daemon kept objects %llu (was %llu), bytes %llu (was %llu)",
		     (unsigned long long)o, (unsigned long long)obj0, (unsigned long long)b,
		     (unsigned long long)bytes0);
}

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
		struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION };
		hello(&c);
		send_msg(&c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
		ck_assert(closed_by_daemon(c.fd));
		close(c.fd);
	}
	/* A notification channel naming a session with the wrong token. */
	{
		struct client c;
		struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
					   .role = 1, .session = other.session, .token = other.token ^ 1 };
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
		uint64_t devs[1] = { 1 }, qprops[1] = { 0 };
		struct cmx_CreateContext_in ctx = { .context = { 0x10010 }, .devices = { devs, 1 } };
		struct cmx_CreateQueue_in qu = { .queue = { 0x10011 }, .context = { 0x10010 }, .device = { 1 },
						 .props = { qprops, 1 } };
		struct cmx_CreateBuffer_in buf = { .mem = { 0x10012 }, .context = { 0x10010 }, .size = 16 << 20 };
		struct cmx_WriteBuffer_in wr = { .queue = { 0x10011 }, .mem = { 0x10012 }, .size = 16 << 20 };
		struct cmx_Ping_in pin = { 0 };
		struct cmx_Ping_out pout;
		static uint8_t half[8 << 20];

		hello(&c);
		send_msg(&c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
		send_msg(&c, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
		send_msg(&c, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
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

static void expect_closed(int fd)
{
	ck_assert(closed_by_daemon(fd));
	close(fd);
}

/* With tokens (CMX_E2E_TRANSPORT=tcp): what comes before Auth, and wrong or
 * missing tokens, is refused on that connection alone. */
START_TEST(token_refused)
{
	const char *token = getenv("CLMUX_TOKEN");
	struct cmx_Hello_in hi = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION };
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
 * allowed for Auth (10 s), not held. */
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
	SRunner *sr;
	int failed;

	tcase_add_test(tc, garbage_and_bad_headers);
	tcase_add_test(tc, malformed_arguments);
	tcase_add_test(tc, forged_ids);
	tcase_add_test(tc, killed_mid_transfer);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	tc = tcase_create("tokens");
	tcase_add_test(tc, token_refused);
	tcase_add_test(tc, token_idle);
	tcase_add_test(tc, token_flood);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	if (e2e_daemon_start())
		return 1;
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (e2e_daemon_stop())
		failed++;
	return failed ? 1 : 0;
}
