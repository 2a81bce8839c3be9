// SPDX-License-Identifier: MIT
// Guest session: batching of async calls, sync round trips, notifications.
#include "session.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "addr.h"
#include "log.h"
#include "proto.gen.h"

#define BATCH_SIZE (256u << 10)	 /* async calls gathered before a write */
#define INLINE_BULK 4096u	 /* smaller payloads are copied into the batch */
#define RX_SIZE (64u << 10)
#define RECV_STEP (128u << 10)

/* A buffered reader over one channel; only one thread reads at a time. */
struct rx {
	int fd;
	uint8_t *buf;
	size_t pos, len;
};

/* A thread waiting for the reply to its sync call. */
struct waiter {
	uint32_t seq;
	int done; /* 1: replied; -errno: the session broke */
	void *dst;
	uint64_t dst_len;
	uint8_t *args; /* the reply's encoded arguments (malloc) */
	uint32_t size;
	struct waiter *next;
};

struct cmx_session {
	int fd, nfd;
	uint64_t id, token;

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

	atomic_int broken;
	struct cmx_session_stats stats; /* under send_lock, notifications atomic */

	const struct cmx_notify_ops *ops;
	void *ctx;
	pthread_t notify_thread;
	struct rx nrx;
};

static int write_all(int fd, struct iovec *iov, int n, uint64_t *writes)
{
	while (n) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		(*writes)++;
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

/* Makes at least n bytes readable at r->buf + r->pos (n <= RX_SIZE). */
static int rx_need(struct rx *r, size_t n)
{
	if (r->len - r->pos >= n)
		return 0;
	memmove(r->buf, r->buf + r->pos, r->len - r->pos);
	r->len -= r->pos;
	r->pos = 0;
	while (r->len < n) {
		ssize_t got = recv(r->fd, r->buf + r->len, RX_SIZE - r->len, 0);
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
		ssize_t got = recv(r->fd, dst ? dst : scratch,
				   dst ? (size_t)(len < RECV_STEP ? len : RECV_STEP) : sizeof(scratch),
				   MSG_WAITALL);
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
	cmx_err("connection to clmuxd lost (%s); OpenCL calls now fail", strerror(-err));
	shutdown(s->fd, SHUT_RDWR);
	shutdown(s->nfd, SHUT_RDWR);
}

int cmx_session_broken(struct cmx_session *s)
{
	return atomic_load(&s->broken);
}

static void put_header(uint8_t *p, const struct cmx_msgdesc *d, uint32_t size, uint16_t flags,
		       uint32_t seq, uint64_t bulk)
{
	struct cmx_hdr h = { .size = size, .op = d->op, .flags = flags, .seq = seq, .bulk = bulk };
	memcpy(p, &h, CMX_HDR_SIZE);
}

static int flush_locked(struct cmx_session *s, const void *bulk, uint64_t bulk_len)
{
	struct iovec iov[2] = { { s->batch, s->batch_len }, { (void *)bulk, bulk_len } };
	int n = bulk_len ? 2 : 1, e;

	if (!s->batch_len && !bulk_len)
		return 0;
	if (atomic_load(&s->broken))
		return -ECONNRESET;
	e = write_all(s->fd, iov, n, &s->stats.writes);
	s->stats.bytes += s->batch_len + bulk_len;
	s->batch_len = 0;
	if (e)
		session_break(s, e);
	return e;
}

/* Appends one message to the batch under send_lock; a large payload is
 * written straight from the caller's memory right after the batch. */
static int append_locked(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
			 uint16_t flags, uint32_t seq, const void *bulk, uint64_t bulk_len)
{
	size_t size = cmx_codec_size(d, in);
	size_t need = CMX_HDR_SIZE + size + (bulk_len <= INLINE_BULK ? bulk_len : 0);
	int e;

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
		put_header(m, d, (uint32_t)size, flags, seq, bulk_len);
		cmx_codec_encode(d, in, m + CMX_HDR_SIZE);
		e = write_all(s->fd, iov, bulk_len ? 2 : 1, &s->stats.writes);
		s->stats.bytes += CMX_HDR_SIZE + size + bulk_len;
		free(m);
		if (e)
			session_break(s, e);
		s->stats.messages++;
		return e;
	}
	put_header(s->batch + s->batch_len, d, (uint32_t)size, flags, seq, bulk_len);
	cmx_codec_encode(d, in, s->batch + s->batch_len + CMX_HDR_SIZE);
	s->batch_len += CMX_HDR_SIZE + size;
	s->stats.messages++;
	if (bulk_len <= INLINE_BULK) {
		if (bulk_len)
			memcpy(s->batch + s->batch_len, bulk, bulk_len);
		s->batch_len += bulk_len;
		return 0;
	}
	return flush_locked(s, bulk, bulk_len);
}

int cmx_session_send(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
		     const void *bulk, uint64_t bulk_len)
{
	int e;

	if (atomic_load(&s->broken))
		return -ECONNRESET;
	pthread_mutex_lock(&s->send_lock);
	e = append_locked(s, d, in, 0, 0, bulk, bulk_len);
	pthread_mutex_unlock(&s->send_lock);
	return e;
}

int cmx_session_flush(struct cmx_session *s)
{
	int e;

	pthread_mutex_lock(&s->send_lock);
	e = flush_locked(s, NULL, 0);
	pthread_mutex_unlock(&s->send_lock);
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
	if (!w || h.bulk > w->dst_len) {
		free(args);
		return -EBADMSG;
	}
	e = rx_take(&s->rx, w->dst, h.bulk);
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
		if (s->reading) {
			pthread_cond_wait(&s->recv_cond, &s->recv_lock);
			continue;
		}
		s->reading = 1;
		pthread_mutex_unlock(&s->recv_lock);
		e = read_reply(s);
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
	int64_t status;
	int e;

	r->buf = NULL;
	r->status = 0;
	if (atomic_load(&s->broken))
		return -ECONNRESET;
	pthread_mutex_lock(&s->send_lock);
	me.seq = ++s->seq;
	/* Listed before it is sent, so the reply always finds its waiter. */
	pthread_mutex_lock(&s->recv_lock);
	me.next = s->waiters;
	s->waiters = &me;
	pthread_mutex_unlock(&s->recv_lock);
	s->stats.round_trips++;
	e = append_locked(s, din, in, CMX_HDR_SYNC, me.seq, bulk, bulk_len);
	if (!e)
		e = flush_locked(s, NULL, 0);
	pthread_mutex_unlock(&s->send_lock);
	if (e)
		session_break(s, e);
	e = wait_reply(s, &me);
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
	return 0;
}

void cmx_reply_fini(struct cmx_reply *r)
{
	free(r->buf);
	r->buf = NULL;
}

static void *notify_main(void *arg)
{
	struct cmx_session *s = arg;

	for (;;) {
		const struct cmx_opinfo *oi;
		struct cmx_hdr h;
		uint8_t *args;
		uint64_t in[64]; /* the largest notification struct fits */
		void *dst = NULL;
		int e = rx_message(&s->nrx, &h, &args);

		if (e) {
			if (!atomic_load(&s->broken))
				session_break(s, e);
			return NULL;
		}
		oi = cmx_op_info(h.op);
		if (!oi || !(oi->flags & CMX_OPF_NOTIFY) || oi->in->size > sizeof(in) ||
		    cmx_codec_decode(oi->in, args, h.size, in)) {
			free(args);
			session_break(s, -EBADMSG);
			return NULL;
		}
		if (h.bulk)
			dst = s->ops->bulk_dst(s->ctx, h.op, in, h.bulk);
		e = rx_take(&s->nrx, dst, h.bulk);
		if (e) {
			free(args);
			session_break(s, e);
			return NULL;
		}
		__atomic_fetch_add(&s->stats.notifications, 1, __ATOMIC_RELAXED);
		s->ops->done(s->ctx, h.op, in);
		free(args);
	}
}

static int hello(struct cmx_session *s, int fd, uint64_t role)
{
	struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
				   .role = role, .session = s->id, .token = s->token };
	struct cmx_Hello_out out;
	size_t size = cmx_codec_size(&cmx_desc_Hello_in, &in);
	uint8_t msg[CMX_HDR_SIZE + 64];
	struct iovec iov = { msg, CMX_HDR_SIZE + size };
	struct rx r = { .fd = fd, .buf = malloc(RX_SIZE) };
	struct cmx_hdr h;
	uint8_t *args = NULL;
	int64_t status;
	int e;

	if (!r.buf)
		return -ENOMEM;
	put_header(msg, &cmx_desc_Hello_in, (uint32_t)size, CMX_HDR_SYNC, 0, 0);
	cmx_codec_encode(&cmx_desc_Hello_in, &in, msg + CMX_HDR_SIZE);
	e = write_all(fd, &iov, 1, &s->stats.writes);
	if (!e)
		e = rx_message(&r, &h, &args);
	if (!e && (h.op != CMX_OP_REPLY || h.size < 8 || h.bulk ||
		   cmx_codec_decode(&cmx_desc_Hello_out, args + 8, h.size - 8, &out)))
		e = -EPROTO;
	if (!e) {
		memcpy(&status, args, 8);
		if (status)
			e = -EPERM;
		else if (role == 0) {
			s->id = out.session;
			s->token = out.token;
		}
	}
	free(args);
	free(r.buf);
	return e;
}

int cmx_session_open(const char *spec, const struct cmx_notify_ops *ops, void *ctx,
		     struct cmx_session **out)
{
	struct cmx_session *s;
	struct cmx_addr a;
	char why[160];
	int e;

	e = cmx_addr_parse(spec, &a, why, sizeof(why));
	if (e) {
		cmx_err("%s", why);
		return e;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->fd = s->nfd = -1;
	s->ops = ops;
	s->ctx = ctx;
	pthread_mutex_init(&s->send_lock, NULL);
	pthread_mutex_init(&s->recv_lock, NULL);
	pthread_cond_init(&s->recv_cond, NULL);
	s->batch = malloc(BATCH_SIZE);
	s->rx.buf = malloc(RX_SIZE);
	s->nrx.buf = malloc(RX_SIZE);
	if (!s->batch || !s->rx.buf || !s->nrx.buf) {
		e = -ENOMEM;
		goto fail;
	}
	s->fd = s->rx.fd = cmx_addr_connect(&a);
	if (s->fd < 0) {
		e = s->fd;
		goto fail;
	}
	e = hello(s, s->fd, 0);
	if (e)
		goto fail;
	s->nfd = s->nrx.fd = cmx_addr_connect(&a);
	if (s->nfd < 0) {
		e = s->nfd;
		goto fail;
	}
	e = hello(s, s->nfd, 1);
	if (e)
		goto fail;
	e = -pthread_create(&s->notify_thread, NULL, notify_main, s);
	if (e)
		goto fail;
	*out = s;
	return 0;
fail:
	if (s->nfd >= 0)
		close(s->nfd);
	if (s->fd >= 0)
		close(s->fd);
	free(s->nrx.buf);
	free(s->rx.buf);
	free(s->batch);
	free(s);
	return e;
}

void cmx_session_close(struct cmx_session *s)
{
	cmx_session_flush(s);
	atomic_store(&s->broken, 1);
	shutdown(s->fd, SHUT_RDWR);
	shutdown(s->nfd, SHUT_RDWR);
	pthread_join(s->notify_thread, NULL);
	close(s->fd);
	close(s->nfd);
	free(s->nrx.buf);
	free(s->rx.buf);
	free(s->batch);
	free(s);
}

void cmx_session_get_stats(struct cmx_session *s, struct cmx_session_stats *st)
{
	pthread_mutex_lock(&s->send_lock);
	*st = s->stats;
	pthread_mutex_unlock(&s->send_lock);
	st->notifications = __atomic_load_n(&s->stats.notifications, __ATOMIC_RELAXED);
}
