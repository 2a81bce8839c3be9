// SPDX-License-Identifier: MIT
// Guest session: batching of async calls, sync round trips, notifications.
#include "session.h"

#include <CL/cl.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "addr.h"
#include "compress.h"
#include "dial.h"
#include "area.h"
#include "copy.h"
#include "ivshmem.h"
#include "lane.h"
#include "env.h"
#include "log.h"
#include "proto.gen.h"
#include "ring.h"

#define BATCH_SIZE (256u << 10)	 /* async calls gathered before a write */
#define INLINE_BULK 4096u	 /* smaller payloads are copied into the batch */
#define RX_SIZE (64u << 10)
/* Calls kept for a resume (their arguments; payloads larger than
 * INLINE_BULK stay the caller's) before a reply confirms them: past it a
 * session no longer resumes. */
#define LOG_MAX (256ull << 20)
#define RECV_STEP (128u << 10)	    /* most bytes of one payload recv (AF_VSOCK) */
#define AREA_DEFAULT (256ull << 20) /* shared data area asked for; CLMUX_AREA_MB */
/* The heap for buffers, CLMUX_HEAP_MB: by default the rest of the largest
 * area, so that a 512 MiB buffer (clpeak's transfer buffer on a device
 * allowing 1 GiB allocations and more) fits with its header page. */
#define HEAP_DEFAULT (CMX_AREA_MAX - AREA_DEFAULT)
#define AREA_FLUSH (256u << 10)	    /* an async payload this large goes out at once */
#define SPIN_NS 50000		    /* shm: a waiter spins this long before it sleeps */
#define SOCK_SPIN_NS 50000	    /* a reply's reader looks this long before it sleeps */
#define AREA_PAGE 4096u	    /* the area's header page, before its rings */
#define SLEEP_MS 100		    /* shm: a sleeper looks at the socket this often */

struct cmx_session;

/* A buffered reader over one channel; only one thread reads at a time. */
struct rx {
	int fd;
	struct cmx_ring *ring; /* shm: the bytes come from this ring instead */
	struct cmx_session *s;
	uint8_t *buf;
	size_t pos, len;
	int spin; /* a socket read looks before it sleeps (the call channel) */
	/* shm: the session's generation this reader's ring belongs to, and
	 * the ring of a resume's new daemon, to take up (or NULL). */
	unsigned gen;
	struct cmx_ring *ring_next;
};

/* A message sent on the call channel, kept until the daemon has surely
 * applied it, for a session that may resume (resume_locked()). */
struct sent {
	struct sent *next;
	uint64_t n;	 /* its place among the session's messages after Hello */
	const void *ext; /* a payload sent from the caller's memory, or NULL */
	uint64_t ext_len;
	uint32_t seq;	 /* a sync call's, or 0 */
	uint8_t newid;	 /* it makes an object: never sent twice */
	uint8_t pending; /* a sync call whose caller waits for the reply */
	size_t len;
	uint8_t msg[]; /* header, arguments, payload copied with them */
};

/* A thread waiting for the reply to its sync call. */
struct waiter {
	uint32_t seq;
	struct sent *ent; /* its kept message, or NULL */
	int done; /* 1: replied; -errno: the session broke */
	void *dst;
	uint64_t dst_len;
	uint64_t area_off; /* the area block the reply's data lands in, or 0 */
	uint64_t area_got; /* bytes of it the reply carries */
	uint8_t *args; /* the reply's encoded arguments (malloc) */
	uint32_t size;
	struct waiter *next;
};

/*
 * How calls leave and replies and notifications come: chan_sock (the two
 * sockets), chan_shm (rings in shared memory, a doorbell and futexes) or
 * chan_ivshmem (rings in a PCI BAR, both sides polling). A session's is
 * chosen once, when its channels are set up.
 */
struct chan_ops {
	/* Writes all of iov towards the daemon: 0 or -errno. */
	int (*send)(struct cmx_session *s, struct iovec *iov, int n);
	/* recv() from one channel: what is there, or with `all` len bytes. */
	ssize_t (*recv)(struct rx *r, void *buf, size_t len, int all);
	/* A ring waiter whose spin is over sleeps (*nap: its last nap, 0 at
	 * first): 0 to look again, or -errno. NULL: no rings. */
	int (*sleep)(struct cmx_session *s, struct cmx_ring *r, int producer, uint64_t *nap);
	/* Wakes this process's sleepers on the rings (the session is over). */
	void (*wake)(struct cmx_session *s);
	/* Each message is published at once (the daemon may be spinning on
	 * the ring): there is no write to save by batching. */
	int eager;
	/* A producer facing a full ring spins too (nobody would wake it). */
	int producer_spins;
};

struct cmx_session {
	int fd, nfd;
	uint64_t id, token;
	/* The first guest id of this session: a call naming a smaller one
	 * names an object of an earlier session (stale()). */
	uint64_t floor;

	/* send_lock: the batch, the sequence counter and writes to fd. */
	pthread_mutex_t send_lock;
	uint8_t *batch;
	size_t batch_len;
	uint32_t seq;

	/* recv_lock: the waiter list and who reads fd (leader/follower: a caller
	 * whose reply is not in reads for everyone, the others sleep). */
	pthread_mutex_t recv_lock;
	pthread_cond_t recv_cond;
	struct waiter *waiters;
	int reading;
	struct rx rx;

	/* nrx_lock: the notification reader holds it while it reads a
	 * message; a resume that unmaps the ring it reads takes it, and
	 * says so in nrx_gone (notify_loop(), resume_area()). */
	pthread_mutex_t nrx_lock;
	int nrx_gone;

	atomic_int broken;
	struct cmx_session_stats stats; /* under send_lock, notifications atomic */

	const struct cmx_notify_ops *ops;
	void *ctx;
	pthread_t notify_thread;
	struct rx nrx;

	struct cmx_garea area; /* base NULL: none, payloads go in the stream */
	int lz4; /* Compress granted: large payloads in the stream may go compressed */

	/* shm and ivshmem: calls go into cmd, replies and notifications come
	 * from rep and ntf; shm's sockets stay open only to tell that the
	 * daemon lives. */
	const struct chan_ops *chan;
	uint64_t spin_ns; /* a ring waiter spins this long before it sleeps */
	struct cmx_ring cmd, rep, ntf;
	int bell; /* the daemon's doorbell (eventfd), -1 for ivshmem */
	/* ivshmem: the rings lie in a slot of a PCI BAR; there is no socket
	 * and no doorbell: both sides poll (ivs.map NULL: not ivshmem). */
	struct cmx_givs ivs;
	/* tcp: bulk lanes for large blocking transfers (guest/lane.c), or NULL. */
	struct cmx_lanes *lanes;

	/* Resuming (a daemon with CMX_FEATURE_RESUME, a socket or shm channel
	 * with no lanes or compression): the area's memfd and what OpenArea
	 * asked for (a resume maps the new daemon's in its place), where it
	 * dials, the messages
	 * counted as the daemon counts them and those kept (under send_lock),
	 * and the connection's generation, which a resume raises. */
	int area_fd;
	struct cmx_OpenArea_in area_ask;
	/* shm: the reply and notification rings of the last two resumes
	 * (a reader takes up the new one), and where each was mapped. */
	struct cmx_ring ring_alt[2][2];
	uint8_t *rings_map[2];
	unsigned ring_slot;
	char *spec;
	uint64_t features;
	int resumable;
	uint64_t sent;
	uint64_t confirmed; /* messages a reply showed applied */
	uint64_t log_bytes;
	struct sent *log, **log_tail;
	atomic_uint gen;
	int rx_next; /* the call channel's new socket, for the reader, or -1 */
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void ring_bell(struct cmx_session *s)
{
	uint64_t one = 1;

	if (s->bell >= 0 && write(s->bell, &one, sizeof(one)) < 0)
		cmx_dbg("doorbell: %s", strerror(errno));
}

/* After a sleep that nothing ended: whether the daemon still holds its end
 * of the socket (it sends nothing on it after the upgrade, so any event
 * means it closed). */
static int peer_alive(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, 0) == 0;
}

/* Waits until a ring has something for us: spins a little (the answer is
 * often microseconds away), then sleeps on the ring word. wake() and
 * sleep() are the consumer's or the producer's side. 0 or -errno. */
static int ring_wait(struct cmx_session *s, struct cmx_ring *r, int producer, const struct rx *rx)
{
	uint64_t until = now_ns() + s->spin_ns, nap = 0;

	for (unsigned i = 0;; i++) {
		long ready = producer ? cmx_ring_room(r, 1) : cmx_ring_readable(r);
		int e;

		if (ready < 0)
			return (int)ready;
		if (ready > 0)
			return 0;
		if (atomic_load(&s->broken))
			return -ECONNRESET;
		/* A resume gave the reader a new ring: this one is the old
		 * daemon's. */
		if (rx && atomic_load(&s->gen) != rx->gen)
			return -ESTALE;
		/* A full command ring is a whole ring of calls ahead of the
		 * daemon: room comes back only after it has run many of them,
		 * so the producer sleeps at once (the daemon's consume wakes
		 * it) instead of spinning on the core they run on. */
		if (!nap && !(producer && !s->chan->producer_spins) &&
		    ((i & 63) || now_ns() < until)) {
			sched_yield(); /* lets a runnable thread of this core (the driver's) go first */
			continue;
		}
		e = s->chan->sleep(s, r, producer, &nap);
		if (e)
			return e;
		until = now_ns() + SPIN_NS;
	}
}

/* shm: sleeps on the ring word until the daemon's doorbell side wakes it. */
static int futex_sleep(struct cmx_session *s, struct cmx_ring *r, int producer, uint64_t *nap)
{
	(void)nap;
	if (producer ? cmx_ring_sleep_producer(r, 1) : cmx_ring_sleep_consumer(r)) {
		/* The word we sleep on is the peer's index that would end the
		 * wait; futex checks it against what we saw. */
		int e = cmx_ring_futex_wait(producer ? &r->ctl->tail : &r->ctl->head, r->peer,
					    SLEEP_MS);
		if (producer)
			cmx_ring_wake_producer(r);
		else
			cmx_ring_wake_consumer(r);
		if (e == -ETIMEDOUT && !peer_alive(s->fd))
			return -ECONNRESET;
	}
	return 0;
}

/* ivshmem: nobody rings a doorbell: naps, longer each time. */
static int ivs_sleep(struct cmx_session *s, struct cmx_ring *r, int producer, uint64_t *nap)
{
	(void)r;
	(void)producer;
	return cmx_givs_nap(&s->ivs, nap);
}

/* Writes the whole of iov into the command ring, publishing each piece. */
static int ring_send(struct cmx_session *s, struct iovec *iov, int n)
{
	for (int i = 0; i < n; i++) {
		const uint8_t *p = iov[i].iov_base;
		size_t left = iov[i].iov_len;

		while (left) {
			long w = cmx_ring_write(&s->cmd, p, left);
			int e;

			if (w < 0)
				return (int)w;
			p += w;
			left -= (size_t)w;
			if (!left)
				continue;
			/* Full: what is in is published (and the daemon woken)
			 * before waiting, or it could never make room. */
			if (cmx_ring_publish(&s->cmd))
				ring_bell(s);
			if ((e = ring_wait(s, &s->cmd, 1, NULL)))
				return e;
		}
	}
	if (cmx_ring_publish(&s->cmd))
		ring_bell(s);
	return 0;
}

/* recv() from a channel's socket. */
static ssize_t sock_recv(struct rx *r, void *buf, size_t len, int all)
{
	/* The call channel's reply is often microseconds away: look for it a
	 * little (yielding the core) before sleeping on the socket, whose
	 * wake-up costs more than the wait. */
	uint64_t until = r->spin ? now_ns() + SOCK_SPIN_NS : 0;
	ssize_t n;

	while (!all && until) {
		n = cmx_dial_recv(r->fd, buf, len, MSG_DONTWAIT);
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return n;
		if (now_ns() >= until)
			break;
		sched_yield();
	}
	return cmx_dial_recv(r->fd, buf, len, all ? MSG_WAITALL : 0);
}

/* recv() from a channel's ring (shm, ivshmem). */
static ssize_t ring_recv(struct rx *r, void *buf, size_t len, int all)
{
	size_t got = 0;

	do {
		int e = ring_wait(r->s, r->ring, 0, r);

		if (e) {
			errno = -e;
			return -1;
		}
		got += cmx_ring_read(r->ring, buf ? (char *)buf + got : NULL, len - got);
		if (cmx_ring_consume(r->ring))
			ring_bell(r->s);
	} while (all && got < len);
	return (ssize_t)got;
}

static ssize_t chan_recv(struct rx *r, void *buf, size_t len, int all)
{
	return r->s->chan->recv(r, buf, len, all);
}

static int write_all(int fd, struct iovec *iov, int n, uint64_t *writes)
{
	return cmx_dial_send_all(fd, iov, n, writes);
}

static int sock_send(struct cmx_session *s, struct iovec *iov, int n)
{
	return write_all(s->fd, iov, n, &s->stats.writes);
}

static void sock_wake(struct cmx_session *s)
{
	(void)s;
}

static void ring_wake(struct cmx_session *s);

static const struct chan_ops chan_sock = {
	.send = sock_send, .recv = sock_recv, .wake = sock_wake,
};
static const struct chan_ops chan_shm = {
	.send = ring_send, .recv = ring_recv, .sleep = futex_sleep, .wake = ring_wake,
	.eager = 1,
};
static const struct chan_ops chan_ivshmem = {
	.send = ring_send, .recv = ring_recv, .sleep = ivs_sleep, .wake = ring_wake,
	.eager = 1, .producer_spins = 1,
};

/* Makes at least n bytes readable at r->buf + r->pos (n <= RX_SIZE). */
static int rx_need(struct rx *r, size_t n)
{
	if (r->len - r->pos >= n)
		return 0;
	memmove(r->buf, r->buf + r->pos, r->len - r->pos);
	r->len -= r->pos;
	r->pos = 0;
	while (r->len < n) {
		ssize_t got = chan_recv(r, r->buf + r->len, RX_SIZE - r->len, 0);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -ECONNRESET;
		r->len += (size_t)got;
	}
	return 0;
}

/* Copies len bytes out of the stream into dst (NULL: discard them); large
 * payloads are received straight into dst. */
static int rx_take(struct rx *r, void *dst, uint64_t len)
{
	uint8_t scratch[4096];

	while (len) {
		size_t have = r->len - r->pos;
		if (have) {
			size_t n = have < len ? have : (size_t)len;
			if (dst)
				memcpy(dst, r->buf + r->pos, n);
			r->pos += n;
			len -= n;
			dst = dst ? (char *)dst + n : NULL;
			continue;
		}
		if (len < RX_SIZE) {
			int e = rx_need(r, 1);
			if (e)
				return e;
			continue;
		}
		/* AF_VSOCK refuses (ENOMEM) a MSG_WAITALL read of its receive
		 * buffer's size (256 KiB) or more: large payloads come in steps. */
		ssize_t got = chan_recv(r, dst ? dst : scratch,
					dst ? (size_t)(len < RECV_STEP ? len : RECV_STEP) : sizeof(scratch), 1);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -ECONNRESET;
		len -= (uint64_t)got;
		dst = dst ? (char *)dst + got : NULL;
	}
	return 0;
}

/* Reads one header and its arguments into a fresh buffer. */
static int rx_message(struct rx *r, struct cmx_hdr *h, uint8_t **args)
{
	int e = rx_need(r, CMX_HDR_SIZE);

	if (e)
		return e;
	memcpy(h, r->buf + r->pos, CMX_HDR_SIZE);
	r->pos += CMX_HDR_SIZE;
	if (h->size > CMX_MAX_ARGS || (h->size & 7) || h->bulk > CMX_MAX_BULK)
		return -EBADMSG;
	*args = malloc(h->size ? h->size : 8);
	if (!*args)
		return -ENOMEM;
	e = rx_take(r, *args, h->size);
	if (e) {
		free(*args);
		*args = NULL;
	}
	return e;
}


static void session_break(struct cmx_session *s, int err)
{
	if (atomic_exchange(&s->broken, 1))
		return;
	cmx_err("connection to clmuxd lost (%s); calls on its objects now fail, new contexts "
		"connect again", strerror(-err));
	shutdown(s->fd, SHUT_RDWR);
	shutdown(s->nfd, SHUT_RDWR);
	cmx_lanes_shutdown(s->lanes);
	s->chan->wake(s);
}

void cmx_session_fail(struct cmx_session *s, int err)
{
	session_break(s, err);
}

struct cmx_lanes *cmx_session_lanes(struct cmx_session *s)
{
	return atomic_load(&s->broken) ? NULL : s->lanes;
}

int cmx_session_broken(struct cmx_session *s)
{
	return atomic_load(&s->broken);
}

void cmx_session_set_floor(struct cmx_session *s, uint64_t floor)
{
	s->floor = floor;
}

/* Whether a call names an object of an earlier session: that object died
 * with the daemon (or worker) that held it, and its id may mean nothing,
 * or something else, to this one. Such a call is refused here. */
static int stale(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in)
{
	return s->floor > CMX_FIRST_GUEST_ID &&
	       cmx_codec_min_id(d, in, CMX_FIRST_GUEST_ID) < s->floor;
}

static void put_header(uint8_t *p, const struct cmx_msgdesc *d, uint32_t size, uint16_t flags,
		       uint32_t seq, uint64_t bulk, uint64_t area_off)
{
	struct cmx_hdr h = { .size = size, .op = d->op, .flags = flags, .seq = seq, .bulk = bulk,
			     .area_off = (uint32_t)area_off };
	memcpy(p, &h, CMX_HDR_SIZE);
}

static int resume_locked(struct cmx_session *s, int err);
static int resume_after(struct cmx_session *s, int err, unsigned gen);

/* Counts a message sent on the call channel, as the daemon does, and keeps
 * it when the session may resume: its entry, or NULL. */
static struct sent *log_add(struct cmx_session *s, const struct cmx_msgdesc *d, const uint8_t *msg,
			    size_t len, const void *ext, uint64_t ext_len)
{
	struct sent *e;
	struct cmx_hdr h;

	s->sent++;
	if (!s->resumable)
		return NULL;
	e = s->log_bytes + len > LOG_MAX ? NULL : malloc(sizeof(*e) + len);
	if (!e) {
		/* Not kept, so it could not go again: the session no longer
		 * resumes, and keeps nothing more. */
		cmx_warn("session %llu: %llu bytes of calls sent without a reply in between: "
			 "it will not resume if its daemon restarts",
			 (unsigned long long)s->id, (unsigned long long)(s->log_bytes + len));
		s->resumable = 0;
		while (s->log && !s->log->pending) {
			struct sent *m = s->log;
			s->log = m->next;
			free(m);
		}
		return NULL;
	}
	s->log_bytes += len;
	memcpy(&h, msg, CMX_HDR_SIZE);
	memcpy(e->msg, msg, len);
	e->len = len;
	e->ext = ext;
	e->ext_len = ext ? ext_len : 0;
	e->n = s->sent;
	e->seq = (h.flags & CMX_HDR_SYNC) ? h.seq : 0;
	e->pending = e->seq != 0;
	e->newid = 0;
	for (unsigned i = 0; i < d->nfields; i++)
		e->newid |= d->fields[i].type == CMX_T_NEWID;
	e->next = NULL;
	*s->log_tail = e;
	s->log_tail = &e->next;
	return e;
}

/* Forgets the kept messages up to the n-th that no caller waits on. */
static void log_trim(struct cmx_session *s, uint64_t n)
{
	struct sent **pp = &s->log;

	while (*pp && (*pp)->n <= n) {
		struct sent *e = *pp;
		if (e->pending) {
			pp = &e->next;
			continue;
		}
		*pp = e->next;
		s->log_bytes -= e->len;
		free(e);
	}
	if (!*pp)
		s->log_tail = pp;
	if (n > s->confirmed)
		s->confirmed = n;
}

static int flush_locked(struct cmx_session *s, const void *bulk, uint64_t bulk_len)
{
	struct iovec iov[2] = { { s->batch, s->batch_len }, { (void *)bulk, bulk_len } };
	int n = bulk_len ? 2 : 1, e;

	if (!s->batch_len && !bulk_len)
		return 0;
	if (atomic_load(&s->broken))
		return -ECONNRESET;
	e = s->chan->send(s, iov, n);
	s->stats.bytes += s->batch_len + bulk_len;
	s->batch_len = 0;
	/* What was in it is kept, and sent again by a resume. */
	if (e)
		e = resume_locked(s, e);
	if (e)
		session_break(s, e);
	return e;
}

/* Appends one message to the batch under send_lock; a large payload is
 * written straight from the caller's memory right after the batch. With
 * area_len, the message names a block of the shared area at area_off
 * instead (a payload already copied there, or room for a read's data). */
static int append_locked(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
			 uint16_t flags, uint32_t seq, const void *bulk, uint64_t bulk_len,
			 uint64_t area_off, uint64_t area_len, struct sent **ent)
{
	size_t size = cmx_codec_size(d, in), start;
	size_t need;
	struct sent *kept;
	int e;

	if (area_len) {
		flags |= CMX_HDR_AREA;
		bulk = NULL;
		bulk_len = area_len;
	}
	need = CMX_HDR_SIZE + size + (bulk_len <= INLINE_BULK && bulk ? bulk_len : 0);
	if (size > CMX_MAX_ARGS || bulk_len > CMX_MAX_BULK)
		return -E2BIG;
	if (s->batch_len + need > BATCH_SIZE && (e = flush_locked(s, NULL, 0)))
		return e;
	if (need > BATCH_SIZE) {
		/* One message larger than the batch (a big program source). */
		uint8_t *m = malloc(CMX_HDR_SIZE + size);
		struct iovec iov[2] = { { m, CMX_HDR_SIZE + size }, { (void *)bulk, bulk_len } };
		if (!m)
			return -ENOMEM;
		put_header(m, d, (uint32_t)size, flags, seq, bulk_len, area_off);
		cmx_codec_encode(d, in, m + CMX_HDR_SIZE);
		kept = log_add(s, d, m, CMX_HDR_SIZE + size, bulk, bulk_len);
		if (ent)
			*ent = kept;
		e = s->chan->send(s, iov, bulk ? 2 : 1);
		s->stats.bytes += CMX_HDR_SIZE + size + bulk_len;
		free(m);
		if (e)
			e = resume_locked(s, e);
		if (e)
			session_break(s, e);
		s->stats.messages++;
		return e;
	}
	start = s->batch_len;
	put_header(s->batch + s->batch_len, d, (uint32_t)size, flags, seq, bulk_len, area_off);
	cmx_codec_encode(d, in, s->batch + s->batch_len + CMX_HDR_SIZE);
	s->batch_len += CMX_HDR_SIZE + size;
	s->stats.messages++;
	if (area_len) {
		kept = log_add(s, d, s->batch + start, s->batch_len - start, NULL, 0);
		if (ent)
			*ent = kept;
		return area_len >= AREA_FLUSH ? flush_locked(s, NULL, 0) : 0;
	}
	if (bulk_len <= INLINE_BULK) {
		if (bulk_len)
			memcpy(s->batch + s->batch_len, bulk, bulk_len);
		s->batch_len += bulk_len;
		kept = log_add(s, d, s->batch + start, s->batch_len - start, NULL, 0);
		if (ent)
			*ent = kept;
		return 0;
	}
	kept = log_add(s, d, s->batch + start, s->batch_len - start, bulk, bulk_len);
	if (ent)
		*ent = kept;
	return flush_locked(s, bulk, bulk_len);
}

/* Copies a payload that would leave the batch into a block of the area:
 * its offset, or 0 (no area, or full: the payload goes in the stream). */
static uint64_t area_put(struct cmx_session *s, const void *bulk, uint64_t len)
{
	uint64_t off;

	if (len <= INLINE_BULK || !(off = cmx_garea_alloc(&s->area, len, 0)))
		return 0;
	cmx_copy(s->area.base + off, bulk, len);
	return off;
}

/* With compression granted, a large payload that goes in the stream is
 * sent compressed when that makes it smaller: *bulk and *len then name the
 * encoded bytes (returned, to be freed once sent) and *flags says so. */
static void *squeeze(struct cmx_session *s, const void **bulk, uint64_t *len, uint16_t *flags)
{
	uint64_t n;
	void *buf;

	if (!s->lz4 || *len < CMX_COMPRESS_MIN || !(buf = malloc(cmx_compress_bound(*len))))
		return NULL;
	n = cmx_compress_encode(*bulk, *len, buf);
	if (!n) {
		free(buf);
		return NULL;
	}
	*bulk = buf;
	*len = n;
	*flags |= CMX_HDR_LZ4;
	return buf;
}

int cmx_session_send(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
		     const void *bulk, uint64_t bulk_len)
{
	uint16_t flags = 0;
	void *packed = NULL;
	uint64_t off;
	int e;

	if (atomic_load(&s->broken))
		return -ECONNRESET;
	if (stale(s, d, in))
		return -ESTALE;
	/* The copy into the area happens outside the lock: other threads'
	 * calls are not held up by it. */
	off = area_put(s, bulk, bulk_len);
	/* So is the compression (outside the lock). */
	if (!off)
		packed = squeeze(s, &bulk, &bulk_len, &flags);
	pthread_mutex_lock(&s->send_lock);
	e = append_locked(s, d, in, flags, 0, bulk, bulk_len, off, off ? bulk_len : 0, NULL);
	if (!e && s->chan->eager)
		e = flush_locked(s, NULL, 0);
	pthread_mutex_unlock(&s->send_lock);
	free(packed);
	return e;
}

int cmx_session_send_block(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
			   uint64_t off, uint64_t len)
{
	int e;

	if (atomic_load(&s->broken))
		return -ECONNRESET;
	if (stale(s, d, in))
		return -ESTALE;
	pthread_mutex_lock(&s->send_lock);
	e = append_locked(s, d, in, 0, 0, NULL, 0, off, off ? len : 0, NULL);
	if (!e && s->chan->eager)
		e = flush_locked(s, NULL, 0);
	pthread_mutex_unlock(&s->send_lock);
	return e;
}

int cmx_session_send_recv(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
			  uint64_t len, uint64_t *area_off)
{
	uint64_t off = len > INLINE_BULK ? cmx_garea_alloc(&s->area, len, 1) : 0;
	int e;

	/* Stored before the call can go out: the data may land at once. */
	*area_off = off;
	e = cmx_session_send_block(s, d, in, off, len);
	if (e && off) {
		*area_off = 0;
		cmx_garea_free(&s->area, off);
	}
	return e;
}

int cmx_session_fenced(struct cmx_session *s, uint64_t id)
{
	return cmx_garea_fenced(&s->area, id);
}

int cmx_session_fence_state(struct cmx_session *s, uint64_t id)
{
	return cmx_garea_fence_state(&s->area, id);
}

int cmx_session_has_fences(struct cmx_session *s)
{
	return s->area.base && s->area.hdr.fence_n;
}

uint64_t cmx_session_fence_spin_ns(struct cmx_session *s)
{
	uint32_t us = s->area.base ? s->area.hdr.fence_spin_us : 0;

	/* An older daemon's header says nothing: 50 us, as it lingers. A
	 * daemon's word is bounded: a waiter asks after 100 ms at most. */
	return us ? (us < 100000 ? us : 100000) * 1000ull : 50000;
}

int cmx_session_has_area(struct cmx_session *s)
{
	return s->area.base != NULL;
}

struct cmx_garea *cmx_session_heap(struct cmx_session *s)
{
	return s->area.heap_end ? &s->area : NULL;
}

void cmx_session_area_free(struct cmx_session *s, uint64_t off)
{
	if (off)
		cmx_garea_free(&s->area, off);
}

int cmx_session_flush(struct cmx_session *s)
{
	int e;

	pthread_mutex_lock(&s->send_lock);
	e = flush_locked(s, NULL, 0);
	pthread_mutex_unlock(&s->send_lock);
	return e;
}

/* A compressed payload of `wire` bytes (CMX_HDR_LZ4): read into *enc
 * (malloc), its raw length, at most max, in *raw. 0 or -errno. */
static int rx_packed(struct cmx_session *s, struct rx *r, uint64_t wire, uint64_t max, void **enc,
		     uint64_t *raw)
{
	int e;

	*enc = NULL;
	if (!s->lz4 || wire > max)
		return -EBADMSG; /* never granted, or it grew */
	*enc = malloc(wire);
	if (!*enc)
		return -ENOMEM;
	e = rx_take(r, *enc, wire);
	if (!e)
		e = cmx_compress_raw_len(*enc, wire, max, raw);
	if (e) {
		free(*enc);
		*enc = NULL;
	}
	return e;
}

/* The leader reads one reply and hands it to its waiter. Called without
 * recv_lock; the waiter cannot leave before `done` is set. */
static int read_reply(struct cmx_session *s)
{
	struct cmx_hdr h;
	struct waiter *w;
	uint8_t *args;
	int e = rx_message(&s->rx, &h, &args);

	if (e)
		return e;
	if (h.op != CMX_OP_REPLY || h.size < 8) {
		free(args);
		return -EBADMSG;
	}
	pthread_mutex_lock(&s->recv_lock);
	for (w = s->waiters; w && w->seq != h.seq; w = w->next)
		;
	pthread_mutex_unlock(&s->recv_lock);
	if (!w || h.bulk > w->dst_len ||
	    ((h.flags & CMX_HDR_AREA) && (!w->area_off || h.area_off != w->area_off))) {
		free(args);
		return -EBADMSG;
	}
	/* Data in the area: the waiter copies it out itself. */
	if (h.flags & CMX_HDR_AREA)
		w->area_got = h.bulk;
	if (h.flags & CMX_HDR_LZ4) {
		void *enc;
		uint64_t raw;
		e = rx_packed(s, &s->rx, h.bulk, w->dst_len, &enc, &raw);
		if (!e)
			e = cmx_compress_decode(enc, h.bulk, w->dst, raw);
		free(enc);
	} else {
		e = rx_take(&s->rx, w->dst, h.flags & CMX_HDR_AREA ? 0 : h.bulk);
	}
	if (e) {
		free(args);
		return e;
	}
	pthread_mutex_lock(&s->recv_lock);
	w->args = args;
	w->size = h.size;
	w->done = 1;
	pthread_mutex_unlock(&s->recv_lock);
	return 0;
}

static int wait_reply(struct cmx_session *s, struct waiter *me)
{
	struct waiter **pp;
	int e = 0;

	pthread_mutex_lock(&s->recv_lock);
	while (!me->done && !atomic_load(&s->broken)) {
		unsigned gen;
		if (s->reading) {
			pthread_cond_wait(&s->recv_cond, &s->recv_lock);
			continue;
		}
		s->reading = 1;
		/* A resume's new socket or ring: the reader takes it up. */
		if (s->rx_next >= 0) {
			cmx_dial_close(s->rx.fd);
			s->rx.fd = s->rx_next;
			s->rx_next = -1;
			s->rx.pos = s->rx.len = 0;
		}
		if (s->rx.ring_next) {
			s->rx.ring = s->rx.ring_next;
			s->rx.ring_next = NULL;
			s->rx.pos = s->rx.len = 0;
		}
		gen = s->rx.gen = atomic_load(&s->gen);
		pthread_mutex_unlock(&s->recv_lock);
		e = read_reply(s);
		if (e)
			e = resume_after(s, e, gen);
		if (e)
			session_break(s, e);
		pthread_mutex_lock(&s->recv_lock);
		s->reading = 0;
		pthread_cond_broadcast(&s->recv_cond);
	}
	for (pp = &s->waiters; *pp != me; pp = &(*pp)->next)
		;
	*pp = me->next;
	pthread_mutex_unlock(&s->recv_lock);
	return me->done == 1 ? 0 : -ECONNRESET;
}

int cmx_session_call(struct cmx_session *s, const struct cmx_msgdesc *din, const void *in,
		     const void *bulk, uint64_t bulk_len, const struct cmx_msgdesc *dout, void *out,
		     struct cmx_reply *r, void *dst, uint64_t dst_len)
{
	struct waiter me = { .dst = dst, .dst_len = dst_len };
	uint16_t flags = 0;
	void *packed = NULL;
	uint64_t off = 0;
	int64_t status;
	int e;

	r->buf = NULL;
	r->status = 0;
	r->dout = NULL;
	r->out = NULL;
	if (atomic_load(&s->broken))
		return -ECONNRESET;
	if (stale(s, din, in))
		return -ESTALE;
	off = area_put(s, bulk, bulk_len);
	if (!off)
		packed = squeeze(s, &bulk, &bulk_len, &flags);
	if (!off && dst_len > INLINE_BULK)
		me.area_off = cmx_garea_alloc(&s->area, dst_len, 1);
	pthread_mutex_lock(&s->send_lock);
	me.seq = ++s->seq;
	/* Listed before it is sent, so the reply always finds its waiter. */
	pthread_mutex_lock(&s->recv_lock);
	me.next = s->waiters;
	s->waiters = &me;
	pthread_mutex_unlock(&s->recv_lock);
	s->stats.round_trips++;
	e = append_locked(s, din, in, CMX_HDR_SYNC | flags, me.seq, bulk, bulk_len,
			  off ? off : me.area_off, off ? bulk_len : me.area_off ? dst_len : 0,
			  &me.ent);
	if (!e)
		e = flush_locked(s, NULL, 0);
	pthread_mutex_unlock(&s->send_lock);
	free(packed);
	if (e)
		session_break(s, e);
	e = wait_reply(s, &me);
	if (me.ent) {
		/* Answered: it and what was sent before it were applied. */
		pthread_mutex_lock(&s->send_lock);
		me.ent->pending = 0;
		if (!e)
			log_trim(s, me.ent->n);
		pthread_mutex_unlock(&s->send_lock);
	}
	if (me.area_off) {
		if (!e && me.area_got)
			cmx_copy(dst, s->area.base + me.area_off, me.area_got);
		cmx_garea_free(&s->area, me.area_off);
	}
	if (e) {
		free(me.args);
		return e;
	}
	memcpy(&status, me.args, 8);
	r->status = (int32_t)status;
	r->buf = me.args;
	if (cmx_codec_decode(dout, me.args + 8, me.size - 8, out)) {
		session_break(s, -EBADMSG);
		cmx_reply_fini(r);
		return -EBADMSG;
	}
	if (dout->flags & CMX_D_OWNS) {
		r->dout = dout;
		r->out = out;
	}
	return 0;
}

void cmx_reply_fini(struct cmx_reply *r)
{
	if (r->dout)
		cmx_codec_release(r->dout, r->out);
	r->dout = NULL;
	free(r->buf);
	r->buf = NULL;
}

/* Whether a reader holds bytes not yet taken: in its buffer, or in its
 * ring. */
static int rx_unread(struct rx *r)
{
	return r->pos < r->len || (r->ring && cmx_ring_readable(r->ring) > 0);
}

static void notify_loop(struct cmx_session *s)
{
	/* A read on the old daemon's ring failed: nothing more comes on it. */
	int old_ended = 0;

	for (;;) {
		const struct cmx_opinfo *oi;
		struct cmx_hdr h;
		uint8_t *args;
		uint64_t in[64]; /* the largest notification struct fits */
		void *dst = NULL;
		unsigned gen = atomic_load(&s->gen);
		int e;

		if (gen != s->nrx.gen) {
			/* Another thread resumed the session (while this one
			 * ran a callback, say). What the old daemon sent is read
			 * first, for a resume sends none of it again (a
			 * non-blocking read's ReadDone would be lost; its data,
			 * in the area, was carried over by resume_area()): the
			 * old socket until its end, or the old ring while it
			 * holds bytes. Then the generation is this reader's, and
			 * over shm the new ring too (taken under the lock that
			 * the resume holds). */
			pthread_mutex_lock(&s->send_lock);
			if (!old_ended && (s->nrx.ring_next ? rx_unread(&s->nrx)
							    : s->nrx.fd != s->nfd)) {
				gen = s->nrx.gen;
			} else {
				if (s->nrx.ring_next) {
					s->nrx.ring = s->nrx.ring_next;
					s->nrx.ring_next = NULL;
					s->nrx.pos = s->nrx.len = 0;
				}
				gen = s->nrx.gen = atomic_load(&s->gen);
				old_ended = 0;
				s->nrx_gone = 0;
			}
			pthread_mutex_unlock(&s->send_lock);
		}
		pthread_mutex_lock(&s->nrx_lock);
		/* A later resume unmapped the old ring being drained. */
		e = s->nrx_gone ? -ESTALE : rx_message(&s->nrx, &h, &args);
		pthread_mutex_unlock(&s->nrx_lock);
		if (e)
			old_ended = 1;

		if (e && !atomic_load(&s->broken) && s->resumable && !resume_after(s, e, gen)) {
			/* Resumed: the notifications come on its new socket. */
			pthread_mutex_lock(&s->send_lock);
			if (s->nrx.fd != s->nfd) {
				cmx_dial_close(s->nrx.fd);
				s->nrx.fd = s->nfd;
				s->nrx.pos = s->nrx.len = 0;
			}
			pthread_mutex_unlock(&s->send_lock);
			continue;
		}
		if (e) {
			if (!atomic_load(&s->broken))
				session_break(s, e);
			return;
		}
		oi = cmx_op_info(h.op);
		if (!oi || !(oi->flags & CMX_OPF_NOTIFY) || (oi->flags & CMX_OPF_LANE) ||
		    oi->in->size > sizeof(in) ||
		    cmx_codec_decode(oi->in, args, h.size, in)) {
			free(args);
			session_break(s, -EBADMSG);
			return;
		}
		if (h.flags & CMX_HDR_LZ4) {
			/* Compressed: decoded where the raw data goes. */
			void *enc;
			uint64_t raw;
			e = rx_packed(s, &s->nrx, h.bulk, CMX_MAX_BULK, &enc, &raw);
			if (!e && (dst = s->ops->bulk_dst(s->ctx, h.op, in, raw)))
				e = cmx_compress_decode(enc, h.bulk, dst, raw);
			free(enc);
			if (e) {
				free(args);
				session_break(s, e);
				return;
			}
			h.bulk = 0;
		} else if (h.bulk) {
			dst = s->ops->bulk_dst(s->ctx, h.op, in, h.bulk);
		}
		if (h.flags & CMX_HDR_AREA) {
			/* The data is in the area; its block stays the read's
			 * until the read's record frees it. */
			if (!cmx_garea_valid(&s->area, h.area_off, h.bulk)) {
				free(args);
				session_break(s, -EBADMSG);
				return;
			}
			if (dst)
				cmx_copy(dst, s->area.base + h.area_off, h.bulk);
			h.bulk = 0;
		}
		e = rx_take(&s->nrx, dst, h.bulk);
		if (e) {
			free(args);
			session_break(s, e);
			return;
		}
		__atomic_fetch_add(&s->stats.notifications, 1, __ATOMIC_RELAXED);
		s->ops->done(s->ctx, h.op, in);
		free(args);
	}
}

/* The notification thread. When the session ends nothing more will land
 * or fire: what still waits for it is settled here, on this thread, where
 * callbacks run. */
static void *notify_main(void *arg)
{
	struct cmx_session *s = arg;

	notify_loop(s);
	if (s->ops->lost)
		s->ops->lost(s->ctx, s);
	return NULL;
}

#define SETUP_FDS 2 /* file descriptors a set-up reply may pass */

/* Reads exactly n bytes; file descriptors passed with them (SCM_RIGHTS)
 * fill the free (-1) slots of rfd[SETUP_FDS] in order when rfd is given;
 * others are closed. */
static int recv_exact(int fd, void *p, size_t n, int *rfd)
{
	while (n) {
		union {
			struct cmsghdr h;
			char b[CMSG_SPACE(SETUP_FDS * sizeof(int))];
		} cm;
		struct iovec iov = { p, n };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
				     .msg_controllen = sizeof(cm.b) };
		ssize_t got = cmx_dial_recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return got < 0 ? -errno : -ECONNRESET;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
			size_t nf = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			for (size_t i = 0; i < nf; i++) {
				int f, k = 0;
				memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(f));
				while (rfd && k < SETUP_FDS && rfd[k] >= 0)
					k++;
				if (rfd && k < SETUP_FDS)
					rfd[k] = f;
				else
					close(f);
			}
		}
		p = (char *)p + got;
		n -= (size_t)got;
	}
	return 0;
}

/* A set-up call (Hello, OpenArea) on a quiet connection: nothing else is in
 * flight, so the reply is the next message. 0, -EPERM for a refusal, or
 * -errno. */
static int setup_call(struct cmx_session *s, int fd, const struct cmx_msgdesc *din,
		      const void *in, uint32_t seq, const struct cmx_msgdesc *dout, void *out,
		      int *rfd)
{
	size_t size = cmx_codec_size(din, in);
	uint8_t msg[CMX_HDR_SIZE + 64], *args = NULL;
	struct iovec iov = { msg, CMX_HDR_SIZE + size };
	struct cmx_hdr h;
	int64_t status;
	int e;

	if (size > sizeof(msg) - CMX_HDR_SIZE)
		return -E2BIG;
	put_header(msg, din, (uint32_t)size, CMX_HDR_SYNC, seq, 0, 0);
	cmx_codec_encode(din, in, msg + CMX_HDR_SIZE);
	/* The daemon counts what follows Hello on the call channel. */
	if (din != &cmx_desc_Hello_in && fd == s->fd)
		s->sent++;
	e = write_all(fd, &iov, 1, &s->stats.writes);
	if (!e)
		e = recv_exact(fd, &h, CMX_HDR_SIZE, rfd);
	if (!e && (h.op != CMX_OP_REPLY || h.size < 8 || h.size > 4096 || (h.size & 7) || h.bulk))
		e = -EPROTO;
	if (!e && !(args = malloc(h.size)))
		e = -ENOMEM;
	if (!e)
		e = recv_exact(fd, args, h.size, rfd);
	if (!e && cmx_codec_decode(dout, args + 8, h.size - 8, out))
		e = -EPROTO;
	if (!e) {
		memcpy(&status, args, 8);
		/* CL_DEVICE_NOT_AVAILABLE: a resumed session still being
		 * restored, to ask again. */
		if (status == CL_DEVICE_NOT_AVAILABLE && din == &cmx_desc_Hello_in)
			e = -EAGAIN;
		else if (status)
			e = -EPERM;
	}
	free(args);
	return e;
}

/* A daemon that speaks another protocol version refuses Hello with its
 * own version in the reply (Hello's layout never changes). */
static int version_check(const struct cmx_Hello_out *out)
{
	if (out->version == CMX_PROTO_VERSION)
		return 0;
	cmx_err("clmuxd speaks protocol version %llu and this ICD version %u: install the guest "
		"ICD that ships with the daemon", (unsigned long long)out->version,
		CMX_PROTO_VERSION);
	return -EPROTONOSUPPORT;
}

static int hello(struct cmx_session *s, int fd, enum cmx_role role)
{
	struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
				   .role = role, .session = s->id, .token = s->token };
	struct cmx_Hello_out out = { 0 };
	int e = setup_call(s, fd, &cmx_desc_Hello_in, &in, 0, &cmx_desc_Hello_out, &out, NULL);

	if (e == -EPERM && out.version)
		e = version_check(&out) ?: -EPERM;
	if (!e && role == CMX_ROLE_CALL) {
		s->id = out.session;
		s->token = out.token;
		s->features = out.features;
	}
	return e;
}

/* Binds the three rings of the mapped area. 0 or -EPROTO. */
static int bind_rings(struct cmx_session *s)
{
	struct cmx_ring *r[CMX_RING_COUNT] = { &s->cmd, &s->rep, &s->ntf };
	int e = 0;

	for (int i = 0; i < CMX_RING_COUNT && !e; i++) {
		void *mem;
		uint64_t len;
		e = cmx_garea_ring(&s->area, i, &mem, &len);
		if (!e)
			e = cmx_ring_init(r[i], mem, len, 0) ? -EPROTO : 0;
	}
	return e ? -EPROTO : 0;
}

/* Asks for the shared data area (and, for shm, the rings and the daemon's
 * doorbell). Without rings, when the daemon refuses the area or it cannot
 * be mapped, payloads stay in the stream and only a broken connection is
 * an error; shm needs all of it. */
static int open_area(struct cmx_session *s, int rings)
{
	const struct cmx_env *env = cmx_env();
	struct cmx_OpenArea_in in = { .size = AREA_DEFAULT, .flags = rings ? CMX_AREA_RINGS : 0 };
	struct cmx_OpenArea_out out;
	uint64_t ring_len, heap = HEAP_DEFAULT;
	int fd[SETUP_FDS] = { -1, -1 }, e;

	if (env->heap_mb != CMX_ENV_AUTO)
		heap = (uint64_t)env->heap_mb << 20;
	if (env->area_mb != CMX_ENV_AUTO)
		in.size = (uint64_t)env->area_mb << 20;
	if (!in.size && !rings)
		return 0;
	/* The heap (buffers created with CL_MEM_ALLOC_HOST_PTR) is the part
	 * of the data region after the payload blocks' part. */
	ring_len = in.size;
	if (in.size && in.size < CMX_AREA_MAX && heap) {
		if (heap > CMX_AREA_MAX - in.size)
			heap = CMX_AREA_MAX - in.size; /* what the daemon grants at most */
		in.size += heap;
		in.flags |= CMX_AREA_HEAP;
	}
	e = setup_call(s, s->fd, &cmx_desc_OpenArea_in, &in, ++s->seq, &cmx_desc_OpenArea_out,
		       &out, fd);
	if (e == -EPERM && (in.flags & CMX_AREA_HEAP)) {
		/* A daemon from before the heap refuses the flag: ask again
		 * for what it knows. */
		in.flags &= ~(uint64_t)CMX_AREA_HEAP;
		in.size = ring_len;
		e = setup_call(s, s->fd, &cmx_desc_OpenArea_in, &in, ++s->seq,
			       &cmx_desc_OpenArea_out, &out, fd);
	}
	if (e && e != -EPERM && e != -EPROTO)
		goto out;
	if (!e && fd[0] >= 0 && (!rings || (fd[1] >= 0 && (out.flags & CMX_AREA_RINGS))))
		e = cmx_garea_map(&s->area, fd[0], out.size);
	else if (!e)
		e = -EPROTO;
	if (!e && (out.flags & in.flags & CMX_AREA_HEAP))
		cmx_garea_split(&s->area, ring_len);
	/* Kept for a resume: its bytes go over to the next daemon's. */
	if (!e && (s->features & CMX_FEATURE_RESUME)) {
		s->area_fd = fcntl(fd[0], F_DUPFD_CLOEXEC, 0);
		s->area_ask = in;
	}
	if (!e && rings) {
		e = bind_rings(s);
		if (!e) {
			s->bell = fd[1];
			fd[1] = -1;
		}
	}
	if (e && rings)
		cmx_err("shm: the daemon gave no usable rings (%s)", strerror(-e));
	else if (e)
		cmx_dbg("no shared data area (%s): payloads go in the stream", strerror(-e));
	if (e && !rings)
		e = 0;
out:
	for (int i = 0; i < SETUP_FDS; i++)
		if (fd[i] >= 0)
			close(fd[i]);
	return e;
}

/* Asks for compressed payloads ($CLMUX_COMPRESS, client.conf's compress);
 * a daemon that grants none leaves them raw (one that predates Compress
 * ends the connection: an unknown call). */
static int compress_ask(struct cmx_session *s)
{
	struct cmx_Compress_in in = { .algos = cmx_dial_compress() };
	struct cmx_Compress_out out = { 0 };
	int e;

	if (!in.algos)
		return 0;
	e = setup_call(s, s->fd, &cmx_desc_Compress_in, &in, ++s->seq, &cmx_desc_Compress_out,
		       &out, NULL);
	if (e && e != -EPERM)
		return e;
	s->lz4 = !e && (out.algo & CMX_COMPRESS_LZ4);
	cmx_dbg("compressed payloads: %s", s->lz4 ? "lz4" : "none");
	return 0;
}

/* Wakes this process's own sleepers on the rings (the session is over). */
static void ring_wake(struct cmx_session *s)
{
	cmx_ring_futex_wake(&s->rx.ring->ctl->head);
	cmx_ring_futex_wake(&s->nrx.ring->ctl->head);
	cmx_ring_futex_wake(&s->cmd.ctl->tail);
}

/* ivshmem: a slot of the region, its area and rings, and Hello through the
 * command ring (the notification channel is the slot's notify ring). */
static int ivs_connect(struct cmx_session *s, const char *spec)
{
	struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
				   .role = CMX_ROLE_CALL };
	struct cmx_Hello_out out = { 0 };
	struct cmx_reply r;
	int e = cmx_givs_open(spec, &s->ivs);

	if (e)
		return e;
	e = cmx_garea_bind(&s->area, s->ivs.area, s->ivs.area_len);
	if (!e)
		e = bind_rings(s);
	if (e) {
		cmx_err("ivshmem: the daemon's slot has no usable area (%s)", strerror(-e));
		return e;
	}
	s->rx.ring = &s->rep;
	s->nrx.ring = &s->ntf;
	s->chan = &chan_ivshmem;
	s->spin_ns = s->ivs.spin_ns;
	/* Hello is seq 0, as on a socket: the next call is 1. */
	s->seq = UINT32_MAX;
	e = cmx_session_call(s, &cmx_desc_Hello_in, &in, NULL, 0, &cmx_desc_Hello_out, &out, &r,
			     NULL, 0);
	if (!e && r.status)
		e = (out.version ? version_check(&out) : 0) ?: -EPERM;
	if (!e) {
		s->id = out.session;
		s->token = out.token;
	}
	cmx_reply_fini(&r);
	return e;
}

/* tcp: the bulk lanes, each dialled and authenticated as the notification
 * channel is. Without them (none wanted, a daemon that refuses role lane)
 * every transfer takes the call channel. */
static void lanes_open(struct cmx_session *s, const struct cmx_addr *a)
{
	unsigned n = cmx_lanes_wanted(), k;
	int fds[CMX_LANES_MAX], e = 0;

	for (k = 0; k < n && !e; k++) {
		fds[k] = cmx_dial(a);
		e = fds[k] < 0 ? fds[k] : hello(s, fds[k], CMX_ROLE_LANE);
		if (e && fds[k] >= 0)
			cmx_dial_close(fds[k]);
	}
	if (e) {
		cmx_dbg("no bulk lanes (%s): transfers take the call channel", strerror(-e));
		while (--k)
			cmx_dial_close(fds[k - 1]);
		return;
	}
	if (n && cmx_lanes_create(fds, n, &s->lanes))
		s->lanes = NULL;
	cmx_dbg("bulk lanes: %u", s->lanes ? n : 0);
}

/* How long a connection that the daemon ends before it answers the Hello
 * is tried again, and the first pause: a daemon refuses connections past
 * its cap of those not past their Hello yet (host/pending.h), as when many
 * applications start at once, or connect while it is still starting, and
 * serves them a moment later. */
#define HELLO_RETRY_MS 5000
#define HELLO_PAUSE_MS 10

/* A connection to a past its Hello in role: its descriptor, or -errno. */
static int dial_hello(struct cmx_session *s, const struct cmx_addr *a, enum cmx_role role)
{
	unsigned pause = HELLO_PAUSE_MS, waited = 0;

	for (;;) {
		int fd = cmx_dial(a), e;

		if (fd < 0)
			return fd;
		e = hello(s, fd, role);
		if (!e)
			return fd;
		cmx_dial_close(fd);
		if ((e != -ECONNRESET && e != -EPIPE) || waited >= HELLO_RETRY_MS)
			return e;
		if (!waited)
			cmx_warn("clmuxd ended a connection before its Hello (busy, or starting): "
				 "trying again for %d s",
				 HELLO_RETRY_MS / 1000);
		usleep(pause * 1000);
		waited += pause;
		pause = pause * 2 > 500 ? 500 : pause * 2;
	}
}

/* A Unix, vsock or TCP daemon: both channels, Hello on each, and for Unix
 * the shared area (shm: with the rings, which then carry everything). */
static int sock_connect(struct cmx_session *s, const char *spec)
{
	struct cmx_addr a;
	char why[160], unix_spec[512];
	int e, shm = !strncmp(spec, "shm:", 4);

	/* shm:PATH is the daemon's unix:PATH socket, upgraded to rings. */
	if (shm) {
		snprintf(unix_spec, sizeof(unix_spec), "unix:%s", spec + 4);
		spec = unix_spec;
	}
	e = cmx_addr_parse(spec, &a, why, sizeof(why));
	if (e) {
		cmx_err("%s", why);
		return e;
	}
	s->fd = s->rx.fd = dial_hello(s, &a, CMX_ROLE_CALL);
	if (s->fd < 0)
		return s->fd;
	/* The area is a memfd passed over the socket: Unix sockets only. */
	if (!e && a.type == CMX_ADDR_UNIX)
		e = open_area(s, shm);
	if (!e)
		e = compress_ask(s);
	if (e)
		return e;
	s->nfd = s->nrx.fd = dial_hello(s, &a, CMX_ROLE_NOTIFY);
	if (s->nfd < 0)
		return s->nfd;
	if (shm) {
		/* From here on the daemon answers on the rings. */
		s->rx.ring = &s->rep;
		s->nrx.ring = &s->ntf;
		s->chan = &chan_shm;
	}
	if (!e && a.type == CMX_ADDR_TCP && !a.tls)
		lanes_open(s, &a);
	/* What a resume could not bring back: lanes and compressed payloads
	 * (not kept as sent). */
	s->resumable = !e && (s->features & CMX_FEATURE_RESUME) &&
		       (!s->area.base || s->area_fd >= 0) && !s->lanes && !s->lz4 &&
		       (s->spec = strdup(spec)) != NULL;
	return e;
}

/* How long a dropped session tries to resume, and its first pause. */
#define RESUME_S 60
#define RESUME_PAUSE_MS 20

/* GetStats on a resumed call channel: the messages the daemon applied
 * before it (its first counter counts this one too). */
static int resume_count(struct cmx_session *s, int fd, uint64_t *applied)
{
	struct cmx_GetStats_out out = { 0 };
	uint8_t msg[CMX_HDR_SIZE], *args = NULL;
	struct iovec iov = { msg, CMX_HDR_SIZE };
	struct cmx_hdr h;
	uint32_t seq = ++s->seq;
	int64_t status = -1;
	int e;

	/* GetStats has no arguments. */
	put_header(msg, &cmx_desc_GetStats_in, 0, CMX_HDR_SYNC, seq, 0, 0);
	e = write_all(fd, &iov, 1, &s->stats.writes);
	if (!e)
		e = recv_exact(fd, &h, CMX_HDR_SIZE, NULL);
	if (!e && (h.op != CMX_OP_REPLY || h.seq != seq || h.size < 8 || h.size > 4096 ||
		   (h.size & 7) || h.bulk))
		e = -EPROTO;
	if (!e && !(args = malloc(h.size)))
		e = -ENOMEM;
	if (!e)
		e = recv_exact(fd, args, h.size, NULL);
	if (!e && cmx_codec_decode(&cmx_desc_GetStats_out, args + 8, h.size - 8, &out))
		e = -EPROTO;
	if (!e)
		memcpy(&status, args, 8);
	if (!e && (status || out.counters.n < 1 || !out.counters.v[0]))
		e = -EPROTO;
	if (!e)
		*applied = out.counters.v[0] - 1;
	free(args);
	return e;
}

/* The area the restored session holds (its buffers living there made
 * again at the same offsets), mapped where the old one was, with what the
 * old one held; its memfd is kept for the next resume. */
static int resume_area(struct cmx_session *s, int fd)
{
	struct cmx_OpenArea_out out;
	int rfd[SETUP_FDS] = { -1, -1 }, e;
	int rings = s->chan == &chan_shm;
	uint8_t *at = NULL;

	e = setup_call(s, fd, &cmx_desc_OpenArea_in, &s->area_ask, ++s->seq, &cmx_desc_OpenArea_out,
		       &out, rfd);
	if (!e && (rfd[0] < 0 || out.size != s->area.size || (rings && rfd[1] < 0)))
		e = -EPROTO;
	if (!e)
		e = cmx_garea_move(&s->area, s->area_fd, rfd[0], &at);
	if (!e && rings != (at != NULL))
		e = -EPROTO;
	if (!e) {
		close(s->area_fd);
		s->area_fd = rfd[0];
		rfd[0] = -1;
	}
	if (!e && rings) {
		/* Calls go into the new command ring from here (under
		 * send_lock, as every send); the readers take up theirs. */
		const struct cmx_area_hdr *h = &s->area.hdr;
		unsigned k = s->ring_slot ^= 1;
		struct cmx_ring *v = s->ring_alt[k];
		/* The notification reader may still be draining the rings of
		 * two resumes ago, the ones unmapped here (notify_loop()). */
		int drained = s->nrx.ring == &v[1];
		if (drained) {
			pthread_mutex_lock(&s->nrx_lock);
			s->nrx_gone = 1;
		}
		if (s->rings_map[k])
			munmap(s->rings_map[k] + AREA_PAGE, h->data_off - AREA_PAGE);
		s->rings_map[k] = at;
		if (cmx_ring_init(&s->cmd, at + h->ring_off[CMX_RING_CMD],
				  h->ring_len[CMX_RING_CMD], 0) ||
		    cmx_ring_init(&v[0], at + h->ring_off[CMX_RING_REPLY],
				  h->ring_len[CMX_RING_REPLY], 0) ||
		    cmx_ring_init(&v[1], at + h->ring_off[CMX_RING_NOTIFY],
				  h->ring_len[CMX_RING_NOTIFY], 0))
			e = -EPROTO;
		if (drained)
			pthread_mutex_unlock(&s->nrx_lock);
		if (!e) {
			close(s->bell);
			s->bell = rfd[1];
			rfd[1] = -1;
			s->nrx.ring_next = &v[1];
			pthread_mutex_lock(&s->recv_lock);
			s->rx.ring_next = &v[0];
			pthread_mutex_unlock(&s->recv_lock);
		}
	}
	for (int i = 0; i < SETUP_FDS; i++)
		if (rfd[i] >= 0)
			close(rfd[i]);
	if (e)
		cmx_err("session %llu: its shared area was not restored (%s)",
			(unsigned long long)s->id, strerror(-e));
	return e;
}

/* One try: the daemon's call and notification channels of this session
 * again, with what it applied. 0, or -errno (-EPERM: refused). */
static int resume_dial(struct cmx_session *s, const struct cmx_addr *a, int *fd, int *nfd,
		       uint64_t *applied)
{
	int e;

	*fd = *nfd = -1;
	*fd = cmx_dial(a);
	if (*fd < 0)
		return *fd;
	e = hello(s, *fd, CMX_ROLE_CALL);
	if (!e)
		e = resume_count(s, *fd, applied);
	if (!e && (*nfd = cmx_dial(a)) < 0)
		e = *nfd;
	if (!e)
		e = hello(s, *nfd, CMX_ROLE_NOTIFY);
	if (!e && s->area.base)
		e = resume_area(s, *fd);
	if (e) {
		cmx_dial_close(*fd);
		if (*nfd >= 0)
			cmx_dial_close(*nfd);
		*fd = *nfd = -1;
	}
	return e;
}

/* A waiter whose call the daemon applied but did not answer, and that
 * makes an object so cannot go again: it fails. */
static void waiter_fail(struct cmx_session *s, uint32_t seq)
{
	pthread_mutex_lock(&s->recv_lock);
	for (struct waiter *w = s->waiters; w; w = w->next)
		if (w->seq == seq && !w->done)
			w->done = -ECONNRESET;
	pthread_cond_broadcast(&s->recv_cond);
	pthread_mutex_unlock(&s->recv_lock);
}

/*
 * The call channel failed with err: with a daemon that keeps checkpoints,
 * the session resumes on a new connection (the same daemon restarted, or
 * its successor with the same --state-dir): Hello with the session's id
 * and token, tried with growing pauses for RESUME_S; then every kept
 * message the daemon had not applied goes again, in order, and a sync
 * call it applied without answering goes again unless it makes an
 * object. Under send_lock; 0 when resumed, else err.
 */
static int resume_locked(struct cmx_session *s, int err)
{
	uint64_t applied = 0, pause = RESUME_PAUSE_MS, waited = 0;
	struct cmx_addr a;
	char why[160];
	int fd = -1, nfd = -1, e = -1, old_fd = s->fd, shm = s->chan == &chan_shm;

	if (!s->resumable || atomic_load(&s->broken) || !s->spec ||
	    cmx_addr_parse(s->spec, &a, why, sizeof(why)))
		return err;
	cmx_warn("connection to clmuxd lost (%s): resuming session %llu", strerror(-err),
		 (unsigned long long)s->id);
	/* Its readers wake and wait for this to end. */
	shutdown(s->fd, SHUT_RDWR);
	shutdown(s->nfd, SHUT_RDWR);
	while (waited < RESUME_S * 1000ull && !atomic_load(&s->broken)) {
		e = resume_dial(s, &a, &fd, &nfd, &applied);
		/* A daemon that answers it has no such session (none
		 * restored, or another token) is not asked again. */
		if (!e || e == -EPROTONOSUPPORT || e == -EPERM)
			break;
		usleep((useconds_t)pause * 1000);
		waited += pause;
		pause = pause * 2 > 1000 ? 1000 : pause * 2;
	}
	if (e) {
		cmx_err("session %llu not resumed: %s", (unsigned long long)s->id,
			e == -EPERM ? "the daemon has no such session (no checkpoint of it)"
				    : strerror(-e));
		/* Once: the other threads that find the connection gone
		 * break the session. */
		s->resumable = 0;
		return err;
	}
	/* Kept from the oldest message it may not have applied, and no
	 * older than what a reply showed. */
	if (applied > s->sent || applied < s->confirmed || (s->log && s->log->n > applied + 1)) {
		cmx_err("session %llu: the daemon resumed it from an older checkpoint "
			"(%llu messages applied of %llu sent): not resumed",
			(unsigned long long)s->id, (unsigned long long)applied,
			(unsigned long long)s->sent);
		s->resumable = 0;
		cmx_dial_close(fd);
		cmx_dial_close(nfd);
		return err;
	}
	/* From here its count is the daemon's: the GetStats, the area's
	 * OpenArea, then each message sent again. */
	s->sent = applied + 1 + (s->area.base != NULL);
	/* shm: they go into the new command ring, and a full ring's wait
	 * looks at the new socket. */
	if (shm)
		s->fd = fd;
	e = 0;
	for (struct sent **pp = &s->log; *pp && !e;) {
		struct sent *m = *pp;
		struct iovec iov[2] = { { m->msg, m->len }, { (void *)m->ext, m->ext_len } };
		if (m->n <= applied && (!m->pending || m->newid)) {
			if (m->pending) {
				waiter_fail(s, m->seq);
				pp = &m->next;
				continue;
			}
			*pp = m->next;
			s->log_bytes -= m->len;
			free(m);
			continue;
		}
		e = shm ? ring_send(s, iov, m->ext_len ? 2 : 1)
			: write_all(fd, iov, m->ext_len ? 2 : 1, &s->stats.writes);
		m->n = ++s->sent;
		pp = &m->next;
	}
	s->log_tail = &s->log;
	while (*s->log_tail)
		s->log_tail = &(*s->log_tail)->next;
	/* The batch's messages were kept: they went with the others. */
	s->batch_len = 0;
	if (e) {
		s->fd = old_fd;
		cmx_dial_close(fd);
		cmx_dial_close(nfd);
		return err;
	}
	s->nfd = nfd;
	pthread_mutex_lock(&s->recv_lock);
	if (s->rx_next >= 0)
		cmx_dial_close(s->rx_next);
	if (s->reading) {
		/* The reader takes it up when it reads next. */
		s->rx_next = fd;
	} else {
		cmx_dial_close(s->rx.fd);
		s->rx.fd = fd;
		s->rx.pos = s->rx.len = 0;
	}
	s->fd = fd;
	atomic_fetch_add(&s->gen, 1);
	pthread_mutex_unlock(&s->recv_lock);
	cmx_warn("session %llu resumed: %llu messages applied before, the rest sent again",
		 (unsigned long long)s->id, (unsigned long long)applied);
	return 0;
}

/* A reader's channel failed with err while its generation was gen: 0 once
 * the session is resumed (by this thread or another), else err. */
static int resume_after(struct cmx_session *s, int err, unsigned gen)
{
	int e = err;

	if (!s->resumable || atomic_load(&s->broken))
		return err;
	pthread_mutex_lock(&s->send_lock);
	if (atomic_load(&s->gen) != gen)
		e = 0;
	else
		e = resume_locked(s, err);
	pthread_mutex_unlock(&s->send_lock);
	return e;
}

/* Everything a session holds; each part may be absent. */
static void session_free(struct cmx_session *s)
{
	while (s->log) {
		struct sent *m = s->log;
		s->log = m->next;
		free(m);
	}
	if (s->rx_next >= 0)
		cmx_dial_close(s->rx_next);
	if (s->rx.fd >= 0 && s->rx.fd != s->fd)
		cmx_dial_close(s->rx.fd);
	if (s->nrx.fd >= 0 && s->nrx.fd != s->nfd)
		cmx_dial_close(s->nrx.fd);
	free(s->spec);
	if (s->area_fd >= 0)
		close(s->area_fd);
	for (int k = 0; k < 2; k++)
		if (s->rings_map[k])
			munmap(s->rings_map[k] + AREA_PAGE, s->area.hdr.data_off - AREA_PAGE);
	cmx_lanes_destroy(s->lanes);
	cmx_dial_close(s->nfd);
	cmx_dial_close(s->fd);
	if (s->bell >= 0)
		close(s->bell);
	cmx_garea_unmap(&s->area);
	cmx_givs_close(&s->ivs);
	free(s->nrx.buf);
	free(s->rx.buf);
	free(s->batch);
	free(s);
}

int cmx_session_open(const char *spec, const struct cmx_notify_ops *ops, void *ctx,
		     struct cmx_session **out)
{
	struct cmx_session *s = calloc(1, sizeof(*s));
	int e;

	if (!s)
		return -ENOMEM;
	s->fd = s->nfd = s->bell = s->ivs.fd = s->area_fd = -1;
	s->rx.fd = s->nrx.fd = s->rx_next = -1;
	s->log_tail = &s->log;
	s->rx.s = s->nrx.s = s;
	s->rx.spin = 1;
	s->chan = &chan_sock;
	s->spin_ns = SPIN_NS;
	s->ops = ops;
	s->ctx = ctx;
	pthread_mutex_init(&s->send_lock, NULL);
	pthread_mutex_init(&s->recv_lock, NULL);
	pthread_mutex_init(&s->nrx_lock, NULL);
	pthread_cond_init(&s->recv_cond, NULL);
	s->batch = malloc(BATCH_SIZE);
	s->rx.buf = malloc(RX_SIZE);
	s->nrx.buf = malloc(RX_SIZE);
	if (!s->batch || !s->rx.buf || !s->nrx.buf)
		e = -ENOMEM;
	else if (!strncmp(spec, "ivshmem", 7) && (spec[7] == ':' || !spec[7]))
		e = ivs_connect(s, spec);
	else
		e = sock_connect(s, spec);
	if (!e)
		e = -pthread_create(&s->notify_thread, NULL, notify_main, s);
	if (e) {
		session_free(s);
		return e;
	}
	*out = s;
	return 0;
}

void cmx_session_close(struct cmx_session *s)
{
	cmx_session_flush(s);
	atomic_store(&s->broken, 1);
	if (s->fd >= 0)
		shutdown(s->fd, SHUT_RDWR);
	if (s->nfd >= 0)
		shutdown(s->nfd, SHUT_RDWR);
	s->chan->wake(s);
	pthread_join(s->notify_thread, NULL);
	session_free(s);
}

/* In the child of a fork(): the session is the parent's, and its threads
 * did not come along. Its calls fail as on a lost connection and it is
 * never resumed; the child closes its copies of the sockets (close(),
 * never shutdown(), which would end the parent's connection too) and
 * leaves the shared memory mapped and untouched. */
void cmx_session_forked(struct cmx_session *s)
{
	int *fds[] = { &s->fd, &s->nfd, &s->rx_next, &s->bell, &s->area_fd, &s->ivs.fd };

	atomic_store(&s->broken, 1);
	s->resumable = 0;
	if (s->rx.fd != s->fd && s->rx.fd >= 0)
		close(s->rx.fd);
	if (s->nrx.fd != s->nfd && s->nrx.fd >= 0)
		close(s->nrx.fd);
	s->rx.fd = s->nrx.fd = -1;
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

void cmx_session_get_stats(struct cmx_session *s, struct cmx_session_stats *st)
{
	pthread_mutex_lock(&s->send_lock);
	*st = s->stats;
	pthread_mutex_unlock(&s->send_lock);
	st->notifications = __atomic_load_n(&s->stats.notifications, __ATOMIC_RELAXED);
}
