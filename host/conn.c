// SPDX-License-Identifier: MIT
// Client connection: receives framed messages (payloads straight into their
// staging buffers), dispatches them, and writes replies with gathered I/O.
#define _GNU_SOURCE
#include "conn.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "call.h"
#include "frame.h"
#include "log.h"
#include "proto.gen.h"
#include "server.h"
#include "session.h"
#include "staging.h"

#define RX_INITIAL (256u << 10)
/* Output a peer may leave unread before it is taken for dead: a guest that
 * stops reading must not make the daemon hold its replies without bound. */
#define TX_LIMIT (4ull << 30)

/* A queued piece of output: owned bytes, or a borrowed payload. */
struct seg {
	struct seg *next;
	void *ptr;
	size_t len, off;
	void (*free_fn)(void *);
	void *free_arg;
	uint8_t data[]; /* owned bytes, when ptr == data */
};

static void conn_put(struct cmx_conn *c)
{
	if (--c->refs)
		return;
	while (c->tx_head) {
		struct seg *s = c->tx_head;
		c->tx_head = s->next;
		if (s->free_fn)
			s->free_fn(s->free_arg);
		free(s);
	}
	cmx_staging_put(c->bulk_buf);
	free(c->bulk_args);
	free(c->rx);
	close(c->fd);
	free(c);
}

void cmx_conn_kill(struct cmx_conn *c, const char *why)
{
	struct cmx_session *s = c->sess;

	if (c->dead)
		return;
	c->dead = 1;
	if (why)
		cmx_info("session %llu: connection closed: %s",
			 s ? (unsigned long long)s->id : 0ull, why);
	/* Wakes the pending recv and send; their completions drop the refs. */
	shutdown(c->fd, SHUT_RDWR);
	c->sess = NULL;
	if (s) {
		if (c->role == CMX_ROLE_NOTIFY) {
			if (s->nconn == c)
				s->nconn = NULL;
			cmx_session_unref(s);
		} else {
			cmx_session_close(s);
		}
	}
	conn_put(c);
}

static void rx_arm(struct cmx_conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->dead)
		return;
	sqe = cmx_loop_sqe(c->srv->loop, &c->rx_io);
	if (c->in_bulk)
		io_uring_prep_recv(sqe, c->fd, c->bulk_buf + c->bulk_got,
				   c->bulk_hdr.bulk - c->bulk_got, 0);
	else
		io_uring_prep_recv(sqe, c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, 0);
	c->refs++;
}

/* Validates a header before anything is allocated for it. */
static int check_header(struct cmx_conn *c, const struct cmx_hdr *h)
{
	int e = cmx_frame_check_call(h);

	if (e)
		return e;
	/* Hello first and only first; nothing arrives on a notification channel. */
	if (c->role == CMX_ROLE_NEW ? h->op != CMX_OP_Hello : h->op == CMX_OP_Hello)
		return -EPROTO;
	if (c->role == CMX_ROLE_NOTIFY)
		return -EPROTO;
	return 0;
}

static int deliver(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args, void *bulk)
{
	if (c->role == CMX_ROLE_NEW)
		return cmx_call_hello(c, h, args);
	c->sess->messages++;
	return cmx_call_dispatch(c->sess, h, args, bulk);
}

/* Parses every complete message in rx. Returns 0, or -errno to end the
 * connection. */
static int rx_parse(struct cmx_conn *c)
{
	while (!c->dead) {
		size_t avail = c->rx_len - c->rx_pos;
		struct cmx_hdr h;
		int e;

		if (avail < CMX_HDR_SIZE)
			break;
		memcpy(&h, c->rx + c->rx_pos, CMX_HDR_SIZE);
		e = check_header(c, &h);
		if (e)
			return e;
		if (avail < CMX_HDR_SIZE + h.size) {
			/* Make room for the whole message, at the start of rx. */
			if (CMX_HDR_SIZE + h.size > c->rx_cap) {
				uint8_t *n = malloc(CMX_HDR_SIZE + h.size);
				if (!n)
					return -ENOMEM;
				memcpy(n, c->rx + c->rx_pos, avail);
				free(c->rx);
				c->rx = n;
				c->rx_cap = CMX_HDR_SIZE + h.size;
				c->rx_len = avail;
				c->rx_pos = 0;
			}
			break;
		}
		const uint8_t *args = c->rx + c->rx_pos + CMX_HDR_SIZE;
		c->rx_pos += CMX_HDR_SIZE + h.size;
		if (!h.bulk) {
			e = deliver(c, &h, args, NULL);
			if (e)
				return e;
			continue;
		}
		/* A payload: staged in its own buffer, which the handler keeps. */
		uint64_t have = c->rx_len - c->rx_pos;
		uint8_t *buf = cmx_staging_get(h.bulk);
		if (!buf)
			return -ENOMEM;
		if (have > h.bulk)
			have = h.bulk;
		memcpy(buf, c->rx + c->rx_pos, have);
		c->rx_pos += have;
		if (have == h.bulk) {
			e = deliver(c, &h, args, buf);
			if (e)
				return e;
			continue;
		}
		c->bulk_args = malloc(h.size ? h.size : 8);
		if (!c->bulk_args) {
			cmx_staging_put(buf);
			return -ENOMEM;
		}
		memcpy(c->bulk_args, args, h.size);
		c->bulk_hdr = h;
		c->bulk_buf = buf;
		c->bulk_got = have;
		c->in_bulk = 1;
		break;
	}
	/* Keep the unparsed tail at the start of rx. */
	if (c->rx_pos) {
		memmove(c->rx, c->rx + c->rx_pos, c->rx_len - c->rx_pos);
		c->rx_len -= c->rx_pos;
		c->rx_pos = 0;
	}
	return 0;
}

static void rate_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, rate_io));

	rx_arm(c);
	conn_put(c);
}

/* Over its tenant's rate: the next recv starts after ns. */
static void rate_wait(struct cmx_conn *c, uint64_t ns)
{
	c->rate_ts.tv_sec = (long long)(ns / 1000000000ull);
	c->rate_ts.tv_nsec = (long long)(ns % 1000000000ull);
	io_uring_prep_timeout(cmx_loop_sqe(c->srv->loop, &c->rate_io), &c->rate_ts, 0, 0);
	c->refs++;
}

static void rx_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, rx_io));
	uint64_t wait_ns = 0;
	int e = 0;

	if (c->dead)
		goto out;
	if (res <= 0) {
		cmx_conn_kill(c, res == 0 ? "peer closed" : strerror(-res));
		goto out;
	}
	if (c->sess) {
		c->sess->recvs++;
		wait_ns = cmx_tenant_rx(c->sess->tenant, (uint64_t)res, cmx_now_ns());
	}
	if (c->in_bulk) {
		c->bulk_got += (uint64_t)res;
		if (c->bulk_got == c->bulk_hdr.bulk) {
			uint8_t *args = c->bulk_args, *buf = c->bulk_buf;
			c->in_bulk = 0;
			c->bulk_args = c->bulk_buf = NULL;
			e = deliver(c, &c->bulk_hdr, args, buf);
			free(args);
		}
	} else {
		c->rx_len += (size_t)res;
	}
	if (!e && !c->in_bulk)
		e = rx_parse(c);
	if (e) {
		cmx_warn("session %llu: bad message: %s", c->sess ? (unsigned long long)c->sess->id : 0ull,
			 strerror(-e));
		cmx_conn_kill(c, NULL);
		goto out;
	}
	if (wait_ns)
		rate_wait(c, wait_ns);
	else
		rx_arm(c);
out:
	conn_put(c);
}

static void tx_kick(struct cmx_conn *c);

static void tx_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, tx_io));
	size_t n = res > 0 ? (size_t)res : 0;

	c->tx_busy = 0;
	if (res < 0 && !c->dead)
		cmx_conn_kill(c, strerror(-res));
	while (n && c->tx_head) {
		struct seg *s = c->tx_head;
		size_t left = s->len - s->off;
		if (n < left) {
			s->off += n;
			break;
		}
		n -= left;
		c->tx_bytes_queued -= s->len;
		c->tx_head = s->next;
		if (!c->tx_head)
			c->tx_tail = &c->tx_head;
		if (s->free_fn)
			s->free_fn(s->free_arg);
		free(s);
	}
	if (!c->dead)
		tx_kick(c);
	conn_put(c);
}

/* Starts a gathered write of everything queued, one at a time per connection. */
static void tx_kick(struct cmx_conn *c)
{
	struct io_uring_sqe *sqe;
	int n = 0;

	if (c->tx_busy || !c->tx_head || c->dead)
		return;
	for (struct seg *s = c->tx_head; s && n < CMX_CONN_IOV; s = s->next, n++) {
		c->iov[n].iov_base = (char *)s->ptr + s->off;
		c->iov[n].iov_len = s->len - s->off;
	}
	memset(&c->mh, 0, sizeof(c->mh));
	c->mh.msg_iov = c->iov;
	c->mh.msg_iovlen = (size_t)n;
	sqe = cmx_loop_sqe(c->srv->loop, &c->tx_io);
	io_uring_prep_sendmsg(sqe, c->fd, &c->mh, MSG_NOSIGNAL);
	c->tx_busy = 1;
	c->refs++;
}

void cmx_conn_send(struct cmx_conn *c, const struct cmx_hdr *h, const void *args, void *bulk,
		   void (*free_fn)(void *))
{
	struct seg *s;

	if (c->dead) {
		if (free_fn)
			free_fn(bulk);
		return;
	}
	s = malloc(sizeof(*s) + CMX_HDR_SIZE + h->size);
	if (!s) {
		if (free_fn)
			free_fn(bulk);
		cmx_conn_kill(c, "out of memory");
		return;
	}
	s->next = NULL;
	s->ptr = s->data;
	s->off = 0;
	s->len = CMX_HDR_SIZE + h->size;
	s->free_fn = NULL;
	memcpy(s->data, h, CMX_HDR_SIZE);
	memcpy(s->data + CMX_HDR_SIZE, args, h->size);
	*c->tx_tail = s;
	c->tx_tail = &s->next;
	c->tx_bytes_queued += s->len;
	if (h->bulk) {
		struct seg *b = calloc(1, sizeof(*b));
		if (!b) {
			if (free_fn)
				free_fn(bulk);
			cmx_conn_kill(c, "out of memory");
			return;
		}
		b->ptr = bulk;
		b->len = h->bulk;
		b->free_fn = free_fn;
		b->free_arg = bulk;
		*c->tx_tail = b;
		c->tx_tail = &b->next;
		c->tx_bytes_queued += b->len;
	} else if (free_fn) {
		free_fn(bulk);
	}
	if (c->tx_bytes_queued > TX_LIMIT) {
		cmx_conn_kill(c, "peer stopped reading");
		return;
	}
	tx_kick(c);
}

int cmx_conn_create(struct cmx_server *srv, int fd, const char *tenant)
{
	struct cmx_conn *c = calloc(1, sizeof(*c));
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!c || !(c->rx = malloc(RX_INITIAL))) {
		free(c);
		close(fd);
		return -ENOMEM;
	}
	cmx_addr_tune(fd);
	c->srv = srv;
	c->fd = fd;
	c->refs = 1;
	c->ident.listener_tenant = tenant;
	if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) && len == sizeof(cred)) {
		c->ident.has_cred = 1;
		c->ident.uid = cred.uid;
		c->ident.gid = cred.gid;
	}
	c->rx_cap = RX_INITIAL;
	c->rx_io.cb = rx_done;
	c->rate_io.cb = rate_done;
	c->tx_io.cb = tx_done;
	c->tx_tail = &c->tx_head;
	rx_arm(c);
	return 0;
}
