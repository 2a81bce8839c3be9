// SPDX-License-Identifier: MIT
// A raw protocol client for the daemon tests: Hello, calls, replies.
#include "wire_client.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

int dial_at(const char *path)
{
	const char *spec = getenv("CLMUX_SERVER");
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd;

	if (!path) {
		ck_assert_msg(spec && !strncmp(spec, "unix:", 5), "CLMUX_SERVER unset");
		path = spec + 5;
	}
	strncpy(sun.sun_path, path, sizeof(sun.sun_path) - 1);
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	return fd;
}

void send_raw(int fd, const void *p, size_t n)
{
	ck_assert_int_eq(send(fd, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

void send_msg(struct client *c, const struct cmx_msgdesc *d, const void *in, int sync,
	      const void *bulk, uint64_t bulk_len)
{
	size_t size = cmx_codec_size(d, in);
	uint8_t *buf = malloc(CMX_HDR_SIZE + size);
	struct cmx_hdr h = {.size = (uint32_t)size,
			    .op = d->op,
			    .flags = sync ? CMX_HDR_SYNC : 0,
			    .seq = ++c->seq,
			    .bulk = bulk_len};

	memcpy(buf, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, in, buf + CMX_HDR_SIZE);
	send_raw(c->fd, buf, CMX_HDR_SIZE + size);
	if (bulk && bulk_len)
		send_raw(c->fd, bulk, bulk_len);
	free(buf);
}

int recv_reply(struct client *c, const struct cmx_msgdesc *d, void *out, uint8_t **keep)
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

void hello_at(struct client *c, const char *path)
{
	struct cmx_Hello_in in = {.magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION};
	struct cmx_Hello_out out;

	c->fd = dial_at(path);
	c->seq = 0;
	send_msg(c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_Hello_out, &out, NULL), 0);
	c->session = out.session;
	c->token = out.token;
}

void hello(struct client *c)
{
	hello_at(c, NULL);
}

int dial(void)
{
	return dial_at(NULL);
}

int closed_by_daemon(int fd)
{
	char b;
	struct timeval tv = {10, 0};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	for (;;) {
		ssize_t n = recv(fd, &b, 1, 0);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n < 0)
			return 0;
	}
}
