// SPDX-License-Identifier: MIT
// A raw protocol client for tests against a live clmuxd: hand-made messages
// on any transport, no ICD in between (host/tests/test_*.c).
#ifndef CMX_TESTS_RAWCLIENT_H
#define CMX_TESTS_RAWCLIENT_H

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "addr.h"
#include "proto.gen.h"

struct client {
	int fd;
	uint32_t seq;
	uint64_t session, token;
};

/* Connects to $CLMUX_SERVER, any transport, without a token. */
static inline int dial_raw(void)
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

static inline int auth(int fd, const char *token);

/* Connects and, where the harness set a token (tcp), authenticates. */
static inline int dial(void)
{
	const char *token = getenv("CLMUX_TOKEN");
	int fd = dial_raw();

	if (token && *token)
		ck_assert_int_eq(auth(fd, token), 0);
	return fd;
}

static inline void send_raw(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

static inline void send_msg(struct client *c, const struct cmx_msgdesc *d, const void *in, int sync,
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
static inline int recv_reply(struct client *c, const struct cmx_msgdesc *d, void *out, uint8_t **keep)
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
static inline int auth(int fd, const char *token)
{
	struct client c = { .fd = fd };
	struct cmx_Auth_in in = { .token = { token, strlen(token) } };

	send_msg(&c, &cmx_desc_Auth_in, &in, 1, NULL, 0);
	return recv_reply(&c, NULL, NULL, NULL);
}

/* Connects to the Unix socket at path (no token). */
static inline int dial_at(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	ck_assert_int_ge(fd, 0);
	ck_assert_uint_lt(strlen(path), sizeof(sun.sun_path));
	memcpy(sun.sun_path, path, strlen(path) + 1);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

/* Says Hello on the socket at path, or at $CLMUX_SERVER when path is NULL. */
static inline void hello_at(struct client *c, const char *path)
{
	struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
				   .role = CMX_ROLE_CALL };
	struct cmx_Hello_out out;

	c->fd = path ? dial_at(path) : dial();
	c->seq = 0;
	send_msg(c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_Hello_out, &out, NULL), 0);
	c->session = out.session;
	c->token = out.token;
}

static inline void hello(struct client *c)
{
	hello_at(c, NULL);
}

/* True when the daemon has ended this connection. */
static inline int closed_by_daemon(int fd)
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
static inline void daemon_counts(uint64_t *objects, uint64_t *bytes)
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

static inline void ping_ok(struct client *c)
{
	struct cmx_Ping_in in = { 0 };
	struct cmx_Ping_out out;

	send_msg(c, &cmx_desc_Ping_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_Ping_out, &out, NULL), 0);
}

/* Waits until the daemon's counts are back to base (closes are async). */
static inline void counts_return(uint64_t obj0, uint64_t bytes0)
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

/* The daemon ends the connection fd; closed here. */
static inline void expect_closed(int fd)
{
	ck_assert(closed_by_daemon(fd));
	close(fd);
}

/* A context (id), its queue (id + 1) and a buffer of size bytes (id + 2). */
static inline void queue_and_buffer(struct client *c, uint64_t id, uint64_t size)
{
	uint64_t devs[1] = { 1 }, qprops[1] = { 0 };
	struct cmx_CreateContext_in ctx = { .context = { id }, .devices = { devs, 1 } };
	struct cmx_CreateQueue_in qu = { .queue = { id + 1 }, .context = { id }, .device = { 1 },
					 .props = { qprops, 1 } };
	struct cmx_CreateBuffer_in buf = { .mem = { id + 2 }, .context = { id }, .size = size };

	send_msg(c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
}

#endif
