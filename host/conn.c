// SPDX-License-Identifier: MIT
// Client connection: receives framed messages (payloads straight into their
// staging buffers), dispatches them, and writes replies with gathered I/O.
#define _GNU_SOURCE
#include "conn.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "area.h"
#include "auth.h"
#include "frame.h"
#include "inflate.h"
#include "land.h"
#include "lane.h"
#include "listener.h"
#include "log.h"
#include "pending.h"
#include "proto.gen.h"
#include "ring.h"
#include "server.h"
#include "session.h"
#include "shm.h"
#include "staging.h"

#define RX_INITIAL (256u << 10)
/* The largest message a connection may send before its Hello is accepted:
 * an Auth with a 256-byte token (schema/session.schema) is the larger of the
 * two it may send (Hello's arguments are six u64s). Until then the receive
 * buffer holds one such message, and the peer has HELLO_S seconds, Auth
 * and TLS handshake included: idle or slow strangers cannot pin the
 * daemon's memory or descriptors (host/pending.c counts them). */
#define PREHELLO_MSG_MAX CMX_AUTH_MSG_MAX
#define RX_PREHELLO	 (CMX_HDR_SIZE + PREHELLO_MSG_MAX)
#define HELLO_S		 5
/* Most bytes of a payload one recv may take. A stream recv copies for as
 * long as the sender keeps the socket fed, and it runs inside the loop's
 * submit: unbounded, one 1 GiB write held every other client's calls for
 * hundreds of milliseconds (tools/hol-bench.c). */
#define RX_BULK_STEP (1u << 20)
/* The same bound for one gathered send: a stream send copies for as long
 * as the reader keeps draining the socket. */
#define TX_STEP (1u << 20)
/* Output one connection may leave unread before its session's calls wait:
 * past it, the call channel takes nothing more until the backlog is back
 * under it (back-pressure instead of growth). Everything queued is charged
 * to the tenant meanwhile (struct cmx_tenant's `output`). */
#define TX_CAP (64ull << 20)
/* A connection over TX_CAP that has read none of its output for the
 * unread-s key's seconds (60) is taken for dead, and its session ends. */
/* Why a connection takes no input for now (struct cmx_conn's `stall`). */
#define STALL_RATE   0x1u /* its tenant's rate: until rate_io fires */
#define STALL_OUTPUT 0x2u /* its session's unread output: until it drains */
#define STALL_DRAIN  0x4u /* the daemon checkpointed it and is ending: for good */
#define STALL_MOVE   0x8u /* its session moves to another daemon (host/migrate.c) */
/* A lane's receive buffer: headers and little else, so that the loop copies
 * next to nothing of a piece; the payload is received by a worker thread
 * straight into its region (host/lane.c). */
#define LANE_RX 4096u
/* Most bytes of one recv or send of a lane's worker thread. */
#define LANE_STEP (256u << 20)

/* A queued piece of output: owned bytes, or a borrowed payload. */
struct seg {
	struct seg *next;
	void *ptr;
	size_t len, off;
	void (*free_fn)(void *);
	void *free_arg;
	int fd[2]; /* passed with the segment's first byte (SCM_RIGHTS), or -1 */
	int charged;	/* len is charged to c->charged's output */
	uint8_t data[]; /* owned bytes, when ptr == data */
};

static void conn_resume(struct cmx_conn *c);
static void rate_charge(struct cmx_conn *c, uint64_t n);
static int rx_finish(struct cmx_conn *c, int e);
static void output_drained(struct cmx_session *s);
static void unread_arm(struct cmx_conn *c);

static int unread_s(const struct cmx_conn *c)
{
	return (int)c->srv->tune.unread_s;
}

/* A segment joins the queue: counted, and charged to the tenant of the
 * connection's session from the moment it has one. */
static void seg_queue(struct cmx_conn *c, struct seg *s)
{
	*c->tx_tail = s;
	c->tx_tail = &s->next;
	c->tx_bytes_queued += s->len;
	if (!c->charged && c->sess)
		c->charged = c->sess->tenant;
	if (c->charged) {
		s->charged = 1;
		c->charged->output += s->len;
	}
}

/* A segment leaves the queue (written, or the connection ended). */
static void seg_unqueue(struct cmx_conn *c, struct seg *s)
{
	c->tx_bytes_queued -= s->len;
	if (s->charged)
		c->charged->output -= s->len;
}

static void seg_close_fds(struct seg *s)
{
	for (int i = 0; i < 2; i++)
		if (s->fd[i] >= 0)
			close(s->fd[i]);
	s->fd[0] = s->fd[1] = -1;
}

static void conn_put(struct cmx_conn *c)
{
	if (--c->refs)
		return;
	while (c->tx_head) {
		struct seg *s = c->tx_head;
		c->tx_head = s->next;
		seg_unqueue(c, s);
		if (s->free_fn)
			s->free_fn(s->free_arg);
		seg_close_fds(s);
		free(s);
	}
	if (c->bulk_land)
		cmx_land_abort(c->bulk_land); /* ended mid-payload */
	else if (c->lane_xfer)
		cmx_xfer_put(c->lane_xfer); /* a piece cut short */
	else
		cmx_staging_put(c->bulk_buf);
	if (c->land_last)
		clReleaseEvent(c->land_last);
	cmx_pending_leave(&c->pending);
	free(c->bulk_args);
	free(c->rx);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

static void timeout_cancel(struct cmx_conn *c, struct cmx_io *io)
{
	io_uring_prep_timeout_remove(cmx_loop_sqe(c->srv->loop, NULL), (uint64_t)(uintptr_t)io, 0);
}

/* The handshake timer is done with: accepted, or the connection ends. */
static void handshake_disarm(struct cmx_conn *c)
{
	if (!c->hs_armed)
		return;
	c->hs_armed = 0;
	io_uring_prep_timeout_remove(cmx_loop_sqe(c->srv->loop, NULL), (uint64_t)(uintptr_t)&c->hs_io,
				     0);
}

void cmx_conn_kill(struct cmx_conn *c, const char *why)
{
	struct cmx_session *s = c->sess;

	if (c->dead)
		return;
	c->dead = 1;
	handshake_disarm(c);
	cmx_pending_leave(&c->pending);
	/* Its timers would hold it, and its queued output, until they fire. */
	if (c->unread_armed)
		timeout_cancel(c, &c->unread_io);
	if (c->stall & STALL_RATE)
		timeout_cancel(c, &c->rate_io);
	if (why)
		cmx_info("session %llu: connection closed (%s): %s",
			 s ? (unsigned long long)s->id : 0ull, c->peer.name, why);
	/* Wakes the pending recv and send; their completions drop the refs. */
	if (c->mover)
		c->mover->close(c->mover_ctx);
	else
		shutdown(c->fd, SHUT_RDWR);
	c->sess = NULL;
	if (s) {
		if (c->role == CMX_ROLE_NOTIFY) {
			if (s->nconn == c)
				s->nconn = NULL;
			cmx_session_unref(s);
		} else if (c->role == CMX_ROLE_LANE) {
			/* A lane lost may have lost data: the session ends, as
			 * its call channel's end ends it (nothing to do when
			 * that is what closes the lanes). */
			struct cmx_conn *call = s->closed ? NULL : s->conn;
			cmx_lane_detach(s, c);
			if (call)
				cmx_conn_kill(call, "a bulk lane closed");
		} else {
			c->srv->conn_ops->ended(s);
		}
	}
	conn_put(c);
}

static void rx_arm(struct cmx_conn *c)
{
	struct io_uring_sqe *sqe;

	if (c->dead || c->mover || c->rx_armed)
		return;
	c->rx_armed = 1;
	sqe = cmx_loop_sqe(c->srv->loop, &c->rx_io);
	if (c->rx_ring || c->tx_ring || c->tx_ring_next) {
		/* shm: the socket only tells that the guest lives. */
		io_uring_prep_recv(sqe, c->fd, c->probe, sizeof(c->probe), 0);
	} else if (c->in_bulk && c->lane_xfer) {
		/* A worker thread of its own receives the whole piece, beside
		 * the other lanes' (the loop would be one copying core). */
		uint64_t left = c->bulk_hdr.bulk - c->bulk_got;
		io_uring_prep_recv(sqe, c->fd, c->bulk_buf + c->bulk_got,
				   left < LANE_STEP ? (size_t)left : LANE_STEP,
				   MSG_WAITALL);
		sqe->flags |= IOSQE_ASYNC;
	} else if (c->in_bulk) {
		uint64_t left = c->bulk_hdr.bulk - c->bulk_got;
		io_uring_prep_recv(sqe, c->fd, c->bulk_buf + c->bulk_got,
				   left < RX_BULK_STEP ? (size_t)left : RX_BULK_STEP, 0);
	} else if (c->role == CMX_ROLE_LANE) {
		size_t room = c->rx_cap - c->rx_len;
		io_uring_prep_recv(sqe, c->fd, c->rx + c->rx_len, room < LANE_RX ? room : LANE_RX, 0);
	} else
		io_uring_prep_recv(sqe, c->fd, c->rx + c->rx_len, c->rx_cap - c->rx_len, 0);
	c->refs++;
}

/* Validates a header before anything is allocated for it. */
static int check_header(struct cmx_conn *c, const struct cmx_hdr *h)
{
	int e;

	/* A lane carries pieces and nothing else. */
	if (c->role == CMX_ROLE_LANE)
		return h->op == CMX_OP_LanePiece && h->size == 16 && h->bulk && !h->flags &&
				       h->bulk <= CMX_MAX_BULK
			       ? 0
			       : -EPROTO;
	e = cmx_frame_check_call(h);
	if (e)
		return e;
	/* Where a token is asked, Auth comes first, small and without payload:
	 * nothing an unauthenticated peer sends makes the daemon allocate. */
	if (c->auth && !c->authed)
		return h->op == CMX_OP_Auth && h->size <= CMX_AUTH_MSG_MAX && !h->bulk ? 0 : -EACCES;
	/* Without a session, nothing larger than an Auth: a 16 MiB "Hello"
	 * ends here, before its bytes have anywhere to go. */
	if (c->role == CMX_ROLE_NEW && (h->size > PREHELLO_MSG_MAX || h->bulk))
		return -EMSGSIZE;
	if (h->op == CMX_OP_Auth)
		return c->role == CMX_ROLE_NEW && !c->authed ? 0 : -EPROTO;
	/* Hello first and only first; nothing arrives on a notification channel. */
	if (c->role == CMX_ROLE_NEW ? h->op != CMX_OP_Hello : h->op == CMX_OP_Hello)
		return -EPROTO;
	if (c->role == CMX_ROLE_NOTIFY)
		return -EPROTO;
	return 0;
}

/* Hello accepted: the connection is no longer a stranger's. A call channel
 * gets the receive buffer of a session; args lie in rx and are not used
 * after this. */
static int hello_done(struct cmx_conn *c)
{
	size_t cap = c->role == CMX_ROLE_CALL ? RX_INITIAL : c->role == CMX_ROLE_LANE ? LANE_RX : 0;
	uint8_t *rx;

	handshake_disarm(c);
	cmx_pending_leave(&c->pending);
	if (c->rx_cap >= cap)
		return 0;
	rx = realloc(c->rx, cap);
	if (!rx)
		return -ENOMEM;
	c->rx = rx;
	c->rx_cap = cap;
	return 0;
}

/* The front end: the connection goes to its tenant's worker with its Hello
 * and whatever followed it (host/front.c), and is released here without
 * being shut down. -EXDEV tells rx_got() that it is gone. */
static int front_hello(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args)
{
	const uint8_t *from = args - CMX_HDR_SIZE;
	int e;

	if (h->bulk || c->mover || from < c->rx || from > c->rx + c->rx_len)
		return -EBADMSG;
	e = c->srv->conn_ops->handoff(c, from, c->rx_len - (size_t)(from - c->rx));
	if (e)
		return e;
	c->dead = 1;
	handshake_disarm(c);
	cmx_pending_leave(&c->pending);
	conn_put(c); /* the owner's reference; the fd closes with the last */
	return -EXDEV;
}

static int deliver(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args, void *bulk)
{
	struct cmx_hdr raw;

	if (h->flags & CMX_HDR_LZ4) {
		/* Handlers see the raw payload (host/inflate.c). */
		int e;
		raw = *h;
		e = cmx_inflate(c, &raw, &bulk);
		if (e)
			return e;
		h = &raw;
	}
	if (h->op == CMX_OP_Auth)
		return c->srv->conn_ops->auth(c, h, args);
	if (c->role == CMX_ROLE_NEW) {
		int e;
		if (c->srv->front)
			return front_hello(c, h, args);
		e = c->srv->conn_ops->hello(c, h, args);
		return e || c->role == CMX_ROLE_NEW ? e : hello_done(c);
	}
	c->last_sync = (h->flags & CMX_HDR_SYNC) != 0;
	c->sess->messages++;
	return c->srv->conn_ops->dispatch(c->sess, h, args, bulk);
}

/* The session's peer leaves more than TX_CAP of its output unread, on its
 * call or its notification channel. */
static int session_backlog(const struct cmx_session *s)
{
	return (s->conn && s->conn->tx_bytes_queued > TX_CAP) ||
	       (s->nconn && s->nconn->tx_bytes_queued > TX_CAP);
}

/* Whether c takes no input for now: its tenant's rate, or (a call channel)
 * its session's unread output. Only output the guest can drain holds a
 * channel back, never data still being produced for it: a read waiting on
 * a user event the guest sets with a later call must not wait for that
 * call. conn_resume() lets it go on. */
static int conn_held(struct cmx_conn *c)
{
	if (!c->stall && c->role == CMX_ROLE_CALL && c->sess && session_backlog(c->sess)) {
		c->stall |= STALL_OUTPUT;
		c->sess->tenant->backlogged++;
		cmx_dbg("session %llu: %llu + %llu bytes of output unread: its calls wait",
			(unsigned long long)c->sess->id, (unsigned long long)c->tx_bytes_queued,
			(unsigned long long)(c->sess->nconn ? c->sess->nconn->tx_bytes_queued : 0));
	}
	return c->stall != 0;
}

static void resume_posted(void *arg)
{
	struct cmx_conn *c = arg;

	c->resume_posted = 0;
	c->stall &= ~STALL_OUTPUT;
	conn_resume(c);
	conn_put(c);
}

/* Output of s was written: a call channel held back for it goes on once
 * the backlog is under the cap, from the loop's next turn (this runs
 * inside sends, which the resumed calls would enter again). */
static void output_drained(struct cmx_session *s)
{
	struct cmx_conn *call = s->closed ? NULL : s->conn;

	if (!call || !(call->stall & STALL_OUTPUT) || call->resume_posted || session_backlog(s))
		return;
	call->resume_posted = 1;
	call->refs++;
	cmx_loop_post(call->srv->loop, resume_posted, call);
}

static void unread_check(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, unread_io));

	c->unread_armed = 0;
	if (res == -ETIME && !c->dead && c->tx_bytes_queued > TX_CAP) {
		if (c->tx_sent != c->unread_mark) {
			unread_arm(c); /* it reads, slowly: timed again */
		} else {
			struct cmx_session *s = c->sess;
			cmx_warn("session %llu: %s read none of its %llu bytes of output in %d s: "
				 "closed",
				 s ? (unsigned long long)s->id : 0ull, c->peer.name,
				 (unsigned long long)c->tx_bytes_queued, unread_s(c));
			/* The session ends with either of its channels. */
			if (s && c->role == CMX_ROLE_NOTIFY && s->conn)
				cmx_conn_kill(s->conn, NULL);
			cmx_conn_kill(c, NULL);
		}
	}
	conn_put(c);
}

/* c holds more than TX_CAP of output: if it reads none of it for
 * unread_s() seconds, its session ends. */
static void unread_arm(struct cmx_conn *c)
{
	if (c->unread_armed || c->dead)
		return;
	c->unread_ts = (struct __kernel_timespec){ .tv_sec = unread_s(c) };
	c->unread_mark = c->tx_sent;
	c->unread_io.cb = unread_check;
	io_uring_prep_timeout(cmx_loop_sqe(c->srv->loop, &c->unread_io), &c->unread_ts, 0, 0);
	c->unread_armed = 1;
	c->refs++;
}

/* A payload that landed in native memory reaches its handler as the
 * connection's `landed` (host/land.c) instead of as bulk; one the handler
 * did not take (the call failed before) is unmapped here. */
static int deliver_bulk(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args,
			uint8_t *buf, struct cmx_land *land)
{
	int e;

	if (!land)
		return deliver(c, h, args, buf);
	c->landed = land;
	e = deliver(c, h, args, NULL);
	cmx_land_abort(c->landed);
	c->landed = NULL;
	return e;
}

/* Parses every complete message in rx. Returns 0, or -errno to end the
 * connection. */
static int rx_parse(struct cmx_conn *c)
{
	while (!c->dead) {
		size_t avail = c->rx_len - c->rx_pos;
		struct cmx_hdr h;
		int e;

		if (avail < CMX_HDR_SIZE || conn_held(c))
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
		if (h.flags & CMX_HDR_AREA) {
			/* The payload (or the room for a read's data) is a block
			 * of the shared area; a guest that points outside it is
			 * malformed. */
			uint8_t *blk = c->sess && c->sess->area
					   ? cmx_area_take(c->sess->area, h.area_off, h.bulk)
					   : NULL;
			if (!blk)
				return -EFAULT;
			e = deliver(c, &h, args, blk);
			if (e)
				return e;
			/* A payload that took the area is received all the same:
			 * the tenant's rate counts it as a socket's bytes. */
			if (h.bulk && (cmx_op_info(h.op)->flags & CMX_OPF_BULK_IN))
				rate_charge(c, h.bulk);
			continue;
		}
		if (!h.bulk) {
			e = deliver(c, &h, args, NULL);
			if (e)
				return e;
			continue;
		}
		/* A payload: staged in its own buffer, which the handler keeps;
		 * a large write on a CPU device lands in the mapped buffer; a
		 * lane's piece in its transfer's region. */
		uint64_t have = c->rx_len - c->rx_pos;
		struct cmx_land *land = NULL;
		uint8_t *buf;
		if (c->role == CMX_ROLE_LANE) {
			struct cmx_LanePiece_in p;
			if (((uintptr_t)args & 7) ||
			    cmx_codec_decode(&cmx_desc_LanePiece_in, args, h.size, &p))
				return -EBADMSG;
			buf = cmx_lane_piece_begin(c->sess, p.transfer, p.offset, h.bulk,
						   &c->lane_xfer);
			if (!buf)
				return -EBADMSG;
		} else {
			land = cmx_land_open(c, &h, args);
			buf = land ? cmx_land_ptr(land) : cmx_staging_get(&c->srv->staging, h.bulk);
			if (!buf)
				return -ENOMEM;
		}
		if (have > h.bulk)
			have = h.bulk;
		memcpy(buf, c->rx + c->rx_pos, have);
		c->rx_pos += have;
		if (have == h.bulk && c->lane_xfer) {
			struct cmx_xfer *x = c->lane_xfer;
			c->lane_xfer = NULL;
			cmx_lane_piece_end(x, h.bulk);
			continue;
		}
		if (have == h.bulk) {
			e = deliver_bulk(c, &h, args, buf, land);
			if (e)
				return e;
			continue;
		}
		c->bulk_args = malloc(h.size ? h.size : 8);
		if (!c->bulk_args) {
			if (land)
				cmx_land_abort(land);
			else if (!c->lane_xfer)
				cmx_staging_put(buf);
			return -ENOMEM; /* a lane's transfer: dropped with c */
		}
		memcpy(c->bulk_args, args, h.size);
		c->bulk_hdr = h;
		c->bulk_buf = buf;
		c->bulk_land = land;
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

static void rate_hold(struct cmx_conn *c, uint64_t ns);

/* A rate hold ran out: the connection goes on, unless its tenant is still
 * in debt (bytes charged since, on this connection's session's lanes or on
 * another connection of the tenant): then it waits for that too. */
static void rate_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, rate_io));
	uint64_t ns = 0;

	c->stall &= ~STALL_RATE;
	if (!c->dead && c->sess)
		ns = cmx_tenant_rx_wait(c->sess->tenant, cmx_now_ns());
	if (ns)
		rate_hold(c, ns);
	else
		conn_resume(c);
	conn_put(c);
}

/* c takes no more input for ns nanoseconds (its tenant's rate). */
static void rate_hold(struct cmx_conn *c, uint64_t ns)
{
	if (c->dead || (c->stall & STALL_RATE))
		return;
	c->stall |= STALL_RATE;
	c->rate_ts.tv_sec = (long long)(ns / 1000000000ull);
	c->rate_ts.tv_nsec = (long long)(ns % 1000000000ull);
	io_uring_prep_timeout(cmx_loop_sqe(c->srv->loop, &c->rate_io), &c->rate_ts, 0, 0);
	c->refs++;
}

/* n bytes came from the connection's tenant, by any path (socket, area,
 * ring, mover): over its rate, the connection takes no more input until
 * the rate allows. A bulk lane's piece arrives in one receive, and its
 * transfer ends on the call channel (WriteLanesEnd): over the rate, the
 * session's calls wait as well, or a transfer split over lanes would end
 * as fast as the lanes could carry it. */
static void rate_charge(struct cmx_conn *c, uint64_t n)
{
	uint64_t ns;

	if (!c->sess || c->dead)
		return;
	ns = cmx_tenant_rx(c->sess->tenant, n, cmx_now_ns());
	if (!ns)
		return;
	rate_hold(c, ns);
	if (c->role == CMX_ROLE_LANE && !c->sess->closed && c->sess->conn)
		rate_hold(c->sess->conn, ns);
}

/* n bytes arrived where rx_arm() (or a mover, or the ring) put them: acts
 * on every complete message. 0, or -errno when the connection ended. */
static int rx_got(struct cmx_conn *c, size_t n)
{
	int e = 0;

	if (c->sess)
		c->sess->recvs++;
	if (c->in_bulk) {
		c->bulk_got += n;
		if (c->bulk_got == c->bulk_hdr.bulk && c->lane_xfer) {
			struct cmx_xfer *x = c->lane_xfer;
			c->in_bulk = 0;
			c->lane_xfer = NULL;
			free(c->bulk_args);
			c->bulk_args = NULL;
			c->bulk_buf = NULL;
			cmx_lane_piece_end(x, c->bulk_hdr.bulk);
		} else if (c->bulk_got == c->bulk_hdr.bulk) {
			uint8_t *args = c->bulk_args, *buf = c->bulk_buf;
			struct cmx_land *land = c->bulk_land;
			c->in_bulk = 0;
			c->bulk_args = c->bulk_buf = NULL;
			c->bulk_land = NULL;
			e = deliver_bulk(c, &c->bulk_hdr, args, buf, land);
			free(args);
		}
	} else {
		c->rx_len += n;
	}
	if (!e && !c->in_bulk)
		e = rx_parse(c);
	if (e == -EXDEV)
		return e; /* handed to a worker */
	return rx_finish(c, e);
}

/* Ends the connection for what rx_parse() or a handler returned: 0, or
 * -errno when it ended. */
static int rx_finish(struct cmx_conn *c, int e)
{
	if (e == -ECONNABORTED) {
		/* A refusal is queued: end once it is written, read no more. */
		c->closing = 1;
		if (!c->tx_head)
			cmx_conn_kill(c, NULL);
		return e;
	}
	if (e == -EACCES) {
		cmx_warn("%s: refused: a token is required and the first message is not Auth",
			 c->peer.name);
		cmx_conn_kill(c, NULL);
		return e;
	}
	if (e) {
		cmx_warn("session %llu: bad message from %s: %s",
			 c->sess ? (unsigned long long)c->sess->id : 0ull, c->peer.name, strerror(-e));
		cmx_conn_kill(c, NULL);
	}
	return e;
}

/* c may take input again (its rate allows, its session's output has
 * drained): what it holds already is acted on, then its source is read
 * again (the socket's recv; the shm doorbell, an ivshmem slot's next turn;
 * the mover, which offers what it kept back). */
static void conn_resume(struct cmx_conn *c)
{
	if (c->dead || conn_held(c))
		return;
	c->refs++;
	if (!c->in_bulk && rx_finish(c, rx_parse(c)))
		goto out;
	if (c->dead || c->stall)
		goto out;
	if (c->rx_ring) {
		if (c->rx_ring_resume)
			c->rx_ring_resume(c);
	} else if (c->mover) {
		if (c->mover->resume)
			c->mover->resume(c->mover_ctx);
	} else {
		rx_arm(c);
	}
out:
	conn_put(c);
}

static void rx_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, rx_io));

	c->rx_armed = 0;
	if (c->dead)
		goto out;
	if (res <= 0) {
		cmx_conn_kill(c, res == 0 ? "peer closed" : strerror(-res));
		goto out;
	}
	if (c->rx_ring || c->tx_ring || c->tx_ring_next) {
		cmx_conn_kill(c, "data on the socket of a shm session");
		goto out;
	}
	if (rx_got(c, (size_t)res))
		goto out;
	rate_charge(c, (uint64_t)res);
	/* Held: conn_resume() arms the next recv. */
	if (!c->stall)
		rx_arm(c);
out:
	conn_put(c);
}

size_t cmx_conn_input(struct cmx_conn *c, const void *buf, size_t len)
{
	size_t taken = 0;

	c->refs++; /* a handler may end the connection meanwhile */
	while (len && !c->dead && !c->stall) {
		/* Into the same place a socket's recv would have filled. */
		uint8_t *dst = c->in_bulk ? c->bulk_buf + c->bulk_got : c->rx + c->rx_len;
		size_t room = c->in_bulk ? (size_t)(c->bulk_hdr.bulk - c->bulk_got) : c->rx_cap - c->rx_len;
		size_t n = len < room ? len : room;

		if (!n)
			break;
		memcpy(dst, buf, n);
		buf = (const uint8_t *)buf + n;
		len -= n;
		taken += n;
		if (rx_got(c, n))
			break;
		rate_charge(c, n);
	}
	conn_put(c);
	return taken;
}

long cmx_conn_ring_input(struct cmx_conn *c)
{
	long total = 0, n;

	if (c->dead || !c->rx_ring)
		return 0;
	c->refs++; /* a handler may end the connection under us */
	while (!c->dead && !c->stall && (n = cmx_ring_readable(c->rx_ring)) != 0) {
		size_t room, got;
		uint8_t *dst;

		if (n < 0) {
			cmx_conn_kill(c, "impossible command ring head");
			break;
		}
		if (c->in_bulk) {
			dst = c->bulk_buf + c->bulk_got;
			room = c->bulk_hdr.bulk - c->bulk_got;
		} else {
			dst = c->rx + c->rx_len;
			room = c->rx_cap - c->rx_len;
		}
		got = cmx_ring_read(c->rx_ring, dst, room);
		/* Our copy is taken: the guest may reuse the bytes. */
		if (cmx_ring_consume(c->rx_ring))
			cmx_ring_futex_wake(&c->rx_ring->ctl->tail);
		total += (long)got;
		if (rx_got(c, got))
			break;
		rate_charge(c, got);
	}
	conn_put(c);
	return total;
}

int cmx_conn_held(const struct cmx_conn *c)
{
	return c->stall != 0;
}

void cmx_conn_drain(struct cmx_conn *c)
{
	c->stall |= STALL_DRAIN;
}

int cmx_conn_sending(const struct cmx_conn *c)
{
	return !c->dead && c->tx_head != NULL;
}

void cmx_conn_hold(struct cmx_conn *c, int hold)
{
	if (c->dead)
		return;
	if (hold) {
		c->stall |= STALL_MOVE;
		return;
	}
	if (!(c->stall & STALL_MOVE))
		return;
	c->stall &= ~STALL_MOVE;
	conn_resume(c);
}

void cmx_conn_rate_charge(struct cmx_conn *c, uint64_t n)
{
	rate_charge(c, n);
}

static void tx_kick(struct cmx_conn *c);

/* Drops the head segment, written in full. */
static void seg_pop(struct cmx_conn *c)
{
	struct seg *s = c->tx_head;

	seg_unqueue(c, s);
	c->tx_head = s->next;
	if (!c->tx_head)
		c->tx_tail = &c->tx_head;
	if (s->free_fn)
		s->free_fn(s->free_arg);
	free(s);
	if (c->sess && c->tx_bytes_queued <= TX_CAP)
		output_drained(c->sess);
}

/* n bytes of the queue went out: frees what is done. */
static void tx_consumed(struct cmx_conn *c, size_t n)
{
	c->tx_sent += n;
	if (n && c->tx_head)
		seg_close_fds(c->tx_head); /* sent with its first byte */
	while (n && c->tx_head) {
		struct seg *s = c->tx_head;
		size_t left = s->len - s->off;
		if (n < left) {
			s->off += n;
			break;
		}
		n -= left;
		seg_pop(c);
	}
	if (!c->dead && c->closing && !c->tx_head)
		cmx_conn_kill(c, NULL);
}

static void tx_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, tx_io));

	c->tx_busy = 0;
	if (res < 0 && !c->dead)
		cmx_conn_kill(c, strerror(-res));
	tx_consumed(c, res > 0 ? (size_t)res : 0);
	if (!c->dead)
		tx_kick(c); /* also makes a pending switch to the ring */
	conn_put(c);
}

/* A moved connection's writes: synchronous, as far as the mover takes. */
static void tx_move(struct cmx_conn *c)
{
	while (c->tx_head && !c->dead) {
		int n = 0;
		long w;

		for (struct seg *s = c->tx_head; s && n < CMX_CONN_IOV; s = s->next, n++) {
			c->iov[n].iov_base = (char *)s->ptr + s->off;
			c->iov[n].iov_len = s->len - s->off;
		}
		w = c->mover->write(c->mover_ctx, c->iov, n);
		if (w < 0)
			cmx_conn_kill(c, strerror((int)-w));
		if (w <= 0)
			return;
		tx_consumed(c, (size_t)w);
	}
}

void cmx_conn_tx_ready(struct cmx_conn *c)
{
	tx_kick(c);
}

/* shm: copies queued output into the ring, publishing per segment (so a
 * spinning guest sees each message as soon as it is there), until the
 * ring is full; the guest's doorbell brings us back then. */
static void tx_ring(struct cmx_conn *c)
{
	struct cmx_ring *r = c->tx_ring;
	int bell = 0;

	while (c->tx_head && !c->dead) {
		struct seg *s = c->tx_head;
		long w = cmx_ring_write(r, (char *)s->ptr + s->off, s->len - s->off);

		if (w < 0) {
			cmx_conn_kill(c, "impossible ring tail");
			return;
		}
		s->off += (size_t)w;
		c->tx_sent += (uint64_t)w;
		bell |= cmx_ring_publish(r);
		if (s->off < s->len) {
			/* Full: sleep unless room appeared meanwhile. */
			if (cmx_ring_sleep_producer(r, 1))
				break;
			continue;
		}
		seg_pop(c);
	}
	if (bell)
		cmx_ring_futex_wake(&r->ctl->head);
}

void cmx_conn_kick(struct cmx_conn *c)
{
	tx_kick(c);
}

/* Starts a gathered write of everything queued, one at a time per connection
 * (or, shm, copies it into the ring; or hands it to a mover). */
static void tx_kick(struct cmx_conn *c)
{
	struct io_uring_sqe *sqe;
	size_t total = 0;
	int n = 0;

	/* The socket's last set-up reply has gone: output moves to the ring. */
	if (c->tx_ring_next && !c->tx_busy && !c->tx_head) {
		c->tx_ring = c->tx_ring_next;
		c->tx_ring_next = NULL;
	}
	if (c->tx_ring && !c->tx_busy) {
		tx_ring(c);
		return;
	}
	if (c->tx_busy || !c->tx_head || c->dead)
		return;
	if (c->mover) {
		tx_move(c);
		return;
	}
	memset(&c->mh, 0, sizeof(c->mh));
	/* A lane's sends go to a worker thread each (host/exec_lane.c), whole. */
	size_t step = c->role == CMX_ROLE_LANE ? LANE_STEP : TX_STEP;
	for (struct seg *s = c->tx_head; s && n < CMX_CONN_IOV && total < step;
	     s = s->next, n++) {
		/* A passed fd rides on its segment's first byte: that segment
		 * starts a sendmsg of its own. */
		int nfd = (s->fd[0] >= 0) + (s->fd[1] >= 0);
		if (nfd && n)
			break;
		if (nfd) {
			struct cmsghdr *cm = (struct cmsghdr *)c->cmsg;
			c->mh.msg_control = c->cmsg;
			c->mh.msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int));
			cm->cmsg_level = SOL_SOCKET;
			cm->cmsg_type = SCM_RIGHTS;
			cm->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
			memcpy(CMSG_DATA(cm), s->fd[0] >= 0 ? &s->fd[0] : &s->fd[1],
			       (size_t)nfd * sizeof(int));
		}
		c->iov[n].iov_base = (char *)s->ptr + s->off;
		c->iov[n].iov_len = s->len - s->off;
		if (c->iov[n].iov_len > step - total)
			c->iov[n].iov_len = step - total;
		total += c->iov[n].iov_len;
	}
	c->mh.msg_iov = c->iov;
	c->mh.msg_iovlen = (size_t)n;
	sqe = cmx_loop_sqe(c->srv->loop, &c->tx_io);
	io_uring_prep_sendmsg(sqe, c->fd, &c->mh, MSG_NOSIGNAL);
	if (c->role == CMX_ROLE_LANE)
		sqe->flags |= IOSQE_ASYNC;
	c->tx_busy = 1;
	c->refs++;
}

void cmx_conn_send(struct cmx_conn *c, const struct cmx_hdr *h, const void *args, void *bulk,
		   void (*free_fn)(void *))
{
	cmx_conn_send_fd(c, h, args, bulk, free_fn, NULL);
}

static void send_seg(struct cmx_conn *c, const struct cmx_hdr *h, const void *args, void *bulk,
		     void (*free_fn)(void *), void *free_arg, const int *fds);

void cmx_conn_send_fd(struct cmx_conn *c, const struct cmx_hdr *h, const void *args, void *bulk,
		      void (*free_fn)(void *), const int *fds)
{
	struct cmx_hdr packed;

	/* A large payload of a session that asked for it goes compressed
	 * when that makes it smaller (host/inflate.c). */
	if (!c->dead && cmx_deflate(c, h, &packed, &bulk, &free_fn))
		h = &packed;
	send_seg(c, h, args, bulk, free_fn, bulk, fds);
}

void cmx_conn_send_ref(struct cmx_conn *c, const struct cmx_hdr *h, const void *args, void *bulk,
		       void (*free_fn)(void *), void *free_arg)
{
	send_seg(c, h, args, bulk, free_fn, free_arg, NULL);
}

static void send_seg(struct cmx_conn *c, const struct cmx_hdr *h, const void *args, void *bulk,
		     void (*free_fn)(void *), void *free_arg, const int *fds)
{
	int fd[2] = { fds ? fds[0] : -1, fds ? fds[1] : -1 };
	struct seg *s;

	if (c->dead) {
		if (free_fn)
			free_fn(free_arg);
		for (int i = 0; i < 2; i++)
			if (fd[i] >= 0)
				close(fd[i]);
		return;
	}
	s = malloc(sizeof(*s) + CMX_HDR_SIZE + h->size);
	if (!s) {
		if (free_fn)
			free_fn(free_arg);
		for (int i = 0; i < 2; i++)
			if (fd[i] >= 0)
				close(fd[i]);
		cmx_conn_kill(c, "out of memory");
		return;
	}
	s->next = NULL;
	s->ptr = s->data;
	s->off = 0;
	s->len = CMX_HDR_SIZE + h->size;
	s->free_fn = NULL;
	s->fd[0] = fd[0];
	s->fd[1] = fd[1];
	s->charged = 0;
	memcpy(s->data, h, CMX_HDR_SIZE);
	memcpy(s->data + CMX_HDR_SIZE, args, h->size);
	seg_queue(c, s);
	if (h->bulk && !(h->flags & CMX_HDR_AREA)) {
		struct seg *b = calloc(1, sizeof(*b));
		if (!b) {
			if (free_fn)
				free_fn(free_arg);
			cmx_conn_kill(c, "out of memory");
			return;
		}
		b->ptr = bulk;
		b->fd[0] = b->fd[1] = -1;
		b->len = h->bulk;
		b->free_fn = free_fn;
		b->free_arg = free_arg;
		seg_queue(c, b);
	} else if (free_fn) {
		free_fn(free_arg);
	}
	tx_kick(c);
	/* Still over the cap once the send has started: the session's calls
	 * wait (conn_held()), and a peer that reads nothing is timed. */
	if (!c->dead && c->tx_bytes_queued > TX_CAP)
		unread_arm(c);
}

static void handshake_expired(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_conn *c = (struct cmx_conn *)((char *)io - offsetof(struct cmx_conn, hs_io));

	/* A connection given a role from outside (ivshmem's notification
	 * channel) is no stranger's either. */
	if (res == -ETIME && c->hs_armed && !c->dead && c->role == CMX_ROLE_NEW) {
		c->hs_armed = 0;
		cmx_warn("%s: refused: no Hello within %d s", c->peer.name, HELLO_S);
		cmx_conn_kill(c, NULL);
	}
	conn_put(c);
}

static struct cmx_conn *conn_new(struct cmx_server *srv, int fd, size_t rx_cap)
{
	struct cmx_conn *c = calloc(1, sizeof(*c));

	if (!c || !(c->rx = malloc(rx_cap))) {
		free(c);
		return NULL;
	}
	c->srv = srv;
	c->fd = fd;
	c->refs = 1;
	c->rx_cap = rx_cap;
	c->rx_io.cb = rx_done;
	c->rate_io.cb = rate_done;
	c->tx_io.cb = tx_done;
	c->tx_tail = &c->tx_head;
	return c;
}

/* What host/tenant.c needs to know of the peer (the token's tenant is
 * added by an accepted Auth, host/call.c). */
static void ident_init(struct cmx_conn *c, const char *tenant)
{
	c->ident.listener_tenant = tenant;
	c->ident.has_cred = c->peer.has_cred;
	c->ident.uid = c->peer.uid;
	c->ident.gid = c->peer.gid;
	c->ident.has_cid = c->peer.cid != CMX_PEER_CID_NONE;
	c->ident.cid = c->peer.cid;
}

/* The time allowed for Hello starts. */
static void handshake_arm(struct cmx_conn *c)
{
	static struct __kernel_timespec hello_ts = {.tv_sec = HELLO_S};

	c->hs_io.cb = handshake_expired;
	io_uring_prep_timeout(cmx_loop_sqe(c->srv->loop, &c->hs_io), &hello_ts, 0, 0);
	c->hs_armed = 1;
	c->refs++;
}

/* A connection for a socket accepted on l (NULL: a unix peer, no token, no
 * tenant); with m, a mover carries its bytes and fd only names the peer.
 * 0; -EAGAIN: refused, its peer has too many connections before Hello
 * (logged); -ENOMEM. fd stays the caller's on error. */
static int conn_accept(struct cmx_server *srv, int fd, const struct cmx_listener *l,
		       const struct cmx_conn_mover *m, void *ctx, struct cmx_conn **out)
{
	/* Small until Hello: strangers get little. */
	struct cmx_conn *c = conn_new(srv, -1, RX_PREHELLO);

	if (!c)
		return -ENOMEM;
	c->mover = m;
	c->mover_ctx = ctx;
	if (l)
		cmx_peer_init(&c->peer, fd, l->kind, l->cid);
	else
		cmx_peer_init(&c->peer, fd, CMX_PEER_UNIX, CMX_PEER_CID_NONE);
	if (cmx_pending_enter(&srv->pending, &c->pending, &c->peer)) {
		conn_put(c);
		return -EAGAIN;
	}
	c->fd = m ? -1 : fd;
	cmx_addr_tune(fd);
	c->auth = l ? l->auth : NULL;
	ident_init(c, l && l->tenant[0] ? l->tenant : NULL);
	handshake_arm(c);
	rx_arm(c);
	*out = c;
	return 0;
}

int cmx_conn_accept(struct cmx_server *srv, int fd, const struct cmx_listener *l)
{
	struct cmx_conn *c;
	int e = conn_accept(srv, fd, l, NULL, NULL, &c);

	if (e)
		close(fd);
	return e == -EAGAIN ? 0 : e;
}

int cmx_conn_accept_moved(struct cmx_server *srv, int fd, const struct cmx_listener *l,
			  const struct cmx_conn_mover *m, void *ctx, struct cmx_conn **out)
{
	return conn_accept(srv, fd, l, m, ctx, out);
}

int cmx_conn_adopt(struct cmx_server *srv, int fd, const struct cmx_peer *peer, int authed,
		   const char *tenant, const void *bytes, size_t n)
{
	struct cmx_conn *c = conn_new(srv, fd, n > RX_INITIAL ? n : RX_INITIAL);

	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	cmx_addr_tune(fd);
	c->peer = *peer;
	c->peer.name[sizeof(c->peer.name) - 1] = '\0';
	c->peer.tenant[sizeof(c->peer.tenant) - 1] = '\0';
	c->authed = authed;
	ident_init(c, tenant);
	memcpy(c->rx, bytes, n);
	c->refs++; /* rx_got() may end the connection */
	if (!rx_got(c, n))
		rx_arm(c);
	conn_put(c);
	return 0;
}

struct cmx_conn *cmx_conn_create_moved(struct cmx_server *srv, const struct cmx_conn_mover *m,
				       void *ctx, uint32_t cid, const char *tenant)
{
	struct cmx_conn *c = conn_new(srv, -1, RX_PREHELLO);

	if (!c)
		return NULL;
	c->mover = m;
	c->mover_ctx = ctx;
	/* The VM's CID names it: the device is the transport. */
	cmx_peer_init(&c->peer, -1, CMX_PEER_VSOCK_UDS, cid);
	snprintf(c->peer.name, sizeof(c->peer.name), "vhost-user-vsock cid %u", cid);
	/* A VM may open streams without end: counted per CID. An ivshmem
	 * slot's two are the region's, as many as its slots. */
	if (cid != CMX_PEER_CID_NONE && cmx_pending_enter(&srv->pending, &c->pending, &c->peer)) {
		conn_put(c);
		return NULL;
	}
	ident_init(c, tenant);
	handshake_arm(c);
	return c;
}
