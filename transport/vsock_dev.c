// SPDX-License-Identifier: MIT
// virtio-vsock device (virtio 1.2, section 5.10), stream sockets only: the
// packet rules, connection states and credit accounting of both directions.
#include "vsock_dev.h"

#include <errno.h>
#include <linux/virtio_vsock.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

/* A control packet (RESPONSE, RST, CREDIT_UPDATE) waiting for an rx buffer. */
struct cmx_vsock_ctl {
	struct cmx_vsock_ctl *next;
	struct virtio_vsock_hdr h;
};

_Static_assert(sizeof(struct virtio_vsock_hdr) == CMX_VSOCK_HDR_SIZE, "vsock header");

void cmx_vsock_dev_init(struct cmx_vsock_dev *d, uint64_t guest_cid, struct cmx_virtq *rxq,
			struct cmx_virtq *txq, const struct cmx_vsock_ops *ops, void *ctx)
{
	memset(d, 0, sizeof(*d));
	d->guest_cid = guest_cid;
	d->rxq = rxq;
	d->txq = txq;
	d->ops = ops;
	d->ctx = ctx;
	d->ctl_tail = &d->ctl_head;
}

static void stream_unlink(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st)
{
	for (struct cmx_vsock_stream **p = &d->streams; *p; p = &(*p)->next)
		if (*p == st) {
			*p = st->next;
			return;
		}
}

void cmx_vsock_dev_fini(struct cmx_vsock_dev *d)
{
	while (d->streams) {
		struct cmx_vsock_stream *st = d->streams;
		d->streams = st->next;
		d->ops->closed(d->ctx, st);
		free(st);
	}
	while (d->ctl_head) {
		struct cmx_vsock_ctl *c = d->ctl_head;
		d->ctl_head = c->next;
		free(c);
	}
	d->ctl_tail = &d->ctl_head;
}

static void hdr_fill(struct virtio_vsock_hdr *h, const struct cmx_vsock_dev *d, uint32_t host_port,
		     uint32_t guest_port, uint16_t op)
{
	memset(h, 0, sizeof(*h));
	h->src_cid = CMX_VSOCK_HOST_CID;
	h->dst_cid = d->guest_cid;
	h->src_port = host_port;
	h->dst_port = guest_port;
	h->type = VIRTIO_VSOCK_TYPE_STREAM;
	h->op = op;
}

static void hdr_credit(struct virtio_vsock_hdr *h, struct cmx_vsock_stream *st)
{
	h->buf_alloc = CMX_VSOCK_BUF_ALLOC;
	h->fwd_cnt = st->fwd_cnt;
	st->fwd_reported = st->fwd_cnt;
}

/* Writes one packet into the next rx buffer, with as much of the payload
 * (iov at off, up to max bytes) as the buffer takes: the payload bytes
 * written, or -EAGAIN when the guest has no buffer posted. */
static long rx_put(struct cmx_vsock_dev *d, struct virtio_vsock_hdr *h, const struct iovec *iov,
		   unsigned n, size_t off, size_t max)
{
	struct cmx_virtq_elem e;
	int r = cmx_virtq_pop(d->rxq, &e);
	size_t w;

	if (r <= 0)
		return r < 0 ? r : -EAGAIN;
	if (e.in_len < CMX_VSOCK_HDR_SIZE || (max && e.in_len == CMX_VSOCK_HDR_SIZE)) {
		/* A guest that posts buffers too small to carry anything. */
		cmx_virtq_push(d->rxq, e.head, 0);
		d->rx_pushed = 1;
		d->broken = 1;
		return -EINVAL;
	}
	if (max > e.in_len - CMX_VSOCK_HDR_SIZE)
		max = e.in_len - CMX_VSOCK_HDR_SIZE;
	h->len = (uint32_t)max;
	cmx_iov_write(e.in, e.nin, 0, h, CMX_VSOCK_HDR_SIZE);
	w = CMX_VSOCK_HDR_SIZE;
	for (unsigned i = 0; i < n && w < CMX_VSOCK_HDR_SIZE + max; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - off, left = CMX_VSOCK_HDR_SIZE + max - w;
		if (k > left)
			k = left;
		cmx_iov_write(e.in, e.nin, w, (char *)iov[i].iov_base + off, k);
		w += k;
		off = 0;
	}
	cmx_virtq_log_in(d->rxq, &e, w);
	cmx_virtq_push(d->rxq, e.head, (uint32_t)w);
	d->rx_pushed = 1;
	return (long)max;
}

/* Sends queued control packets in order; 0 when all went. */
static int ctl_flush(struct cmx_vsock_dev *d)
{
	while (d->ctl_head) {
		struct cmx_vsock_ctl *c = d->ctl_head;
		long e = rx_put(d, &c->h, NULL, 0, 0, 0);
		if (e < 0)
			return (int)e;
		d->ctl_head = c->next;
		if (!d->ctl_head)
			d->ctl_tail = &d->ctl_head;
		free(c);
	}
	return 0;
}

static void ctl_queue(struct cmx_vsock_dev *d, const struct virtio_vsock_hdr *h)
{
	struct cmx_vsock_ctl *c = malloc(sizeof(*c));

	if (!c) {
		cmx_err("vsock: out of memory queueing a control packet");
		return;
	}
	c->next = NULL;
	c->h = *h;
	*d->ctl_tail = c;
	d->ctl_tail = &c->next;
	ctl_flush(d);
}

static void send_rst(struct cmx_vsock_dev *d, uint32_t host_port, uint32_t guest_port)
{
	struct virtio_vsock_hdr h;

	hdr_fill(&h, d, host_port, guest_port, VIRTIO_VSOCK_OP_RST);
	ctl_queue(d, &h);
}

static void send_ctl(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st, uint16_t op)
{
	struct virtio_vsock_hdr h;

	hdr_fill(&h, d, st->host_port, st->guest_port, op);
	hdr_credit(&h, st);
	ctl_queue(d, &h);
}

static struct cmx_vsock_stream *stream_find(struct cmx_vsock_dev *d, uint32_t host_port,
					    uint32_t guest_port)
{
	for (struct cmx_vsock_stream *st = d->streams; st; st = st->next)
		if (st->host_port == host_port && st->guest_port == guest_port)
			return st;
	return NULL;
}

static void stream_gone(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st)
{
	stream_unlink(d, st);
	d->ops->closed(d->ctx, st);
	free(st);
}

/* Bytes taken from the guest after which it hears of them. */
static uint32_t credit_step(const struct cmx_vsock_stream *st)
{
	uint32_t w = st->peer_buf_alloc < CMX_VSOCK_BUF_ALLOC ? st->peer_buf_alloc
							       : CMX_VSOCK_BUF_ALLOC;

	return w / 4 ? w / 4 : 1;
}

static void on_request(struct cmx_vsock_dev *d, const struct virtio_vsock_hdr *h)
{
	struct cmx_vsock_stream *st = calloc(1, sizeof(*st));

	if (!st) {
		send_rst(d, h->dst_port, h->src_port);
		return;
	}
	st->host_port = h->dst_port;
	st->guest_port = h->src_port;
	st->peer_buf_alloc = h->buf_alloc;
	st->peer_fwd_cnt = h->fwd_cnt;
	if (d->ops->accept(d->ctx, st)) {
		free(st);
		send_rst(d, h->dst_port, h->src_port);
		return;
	}
	st->next = d->streams;
	d->streams = st;
	send_ctl(d, st, VIRTIO_VSOCK_OP_RESPONSE);
}

/* One packet from the guest. 0, or -EINVAL for a malformed one. */
static int on_packet(struct cmx_vsock_dev *d, const struct cmx_virtq_elem *e)
{
	struct virtio_vsock_hdr h;
	struct cmx_vsock_stream *st;

	if (cmx_iov_read(e->out, e->nout, 0, &h, sizeof(h)) != sizeof(h))
		return -EINVAL;
	if (h.len > e->out_len - CMX_VSOCK_HDR_SIZE)
		return -EINVAL;
	/* Packets for another address are dropped, as the spec says. */
	if (h.src_cid != d->guest_cid || h.dst_cid != CMX_VSOCK_HOST_CID)
		return 0;
	if (h.type != VIRTIO_VSOCK_TYPE_STREAM) {
		if (h.op != VIRTIO_VSOCK_OP_RST)
			send_rst(d, h.dst_port, h.src_port);
		return 0;
	}
	st = stream_find(d, h.dst_port, h.src_port);
	if (!st) {
		if (h.op == VIRTIO_VSOCK_OP_REQUEST)
			on_request(d, &h);
		else if (h.op != VIRTIO_VSOCK_OP_RST)
			send_rst(d, h.dst_port, h.src_port);
		return 0;
	}
	st->peer_buf_alloc = h.buf_alloc;
	st->peer_fwd_cnt = h.fwd_cnt;
	cmx_dbg("vsock: port %u op %u len %u buf_alloc %u fwd_cnt %u", st->guest_port, h.op, h.len,
		h.buf_alloc, h.fwd_cnt);
	switch (h.op) {
	case VIRTIO_VSOCK_OP_RW:
		/* The guest may not exceed the window we granted, bytes we
		 * keep back uncredited included. */
		if (h.len > CMX_VSOCK_BUF_ALLOC - st->held) {
			send_rst(d, st->host_port, st->guest_port);
			stream_gone(d, st);
			return 0;
		}
		size_t took =
		    h.len ? d->ops->data(d->ctx, st, e->out, e->nout, CMX_VSOCK_HDR_SIZE, h.len)
			  : 0;
		/* data() may have ended the stream from the host side. */
		if (stream_find(d, h.dst_port, h.src_port) != st)
			return 0;
		if (took > h.len)
			took = h.len;
		st->held += h.len - (uint32_t)took;
		st->fwd_cnt += (uint32_t)took;
		/* The Linux driver stops sending once its own buffer size is
		 * unacknowledged, whatever our window: report well before. */
		if (st->fwd_cnt - st->fwd_reported >= credit_step(st))
			send_ctl(d, st, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
		break;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		send_ctl(d, st, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
		break;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		/* Either half closing ends a clmux channel: nothing would be
		 * answered on it. The reset completes the guest's close. */
		send_rst(d, st->host_port, st->guest_port);
		stream_gone(d, st);
		return 0;
	case VIRTIO_VSOCK_OP_RST:
		stream_gone(d, st);
		return 0;
	default: /* REQUEST on a live stream, RESPONSE, unknown */
		send_rst(d, st->host_port, st->guest_port);
		stream_gone(d, st);
		return 0;
	}
	if (st->blocked) {
		st->blocked = 0;
		d->ops->writable(d->ctx, st);
	}
	return 0;
}

void cmx_vsock_stream_credit(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st, uint32_t n)
{
	if (n > st->held)
		n = st->held;
	if (!n)
		return;
	st->held -= n;
	st->fwd_cnt += n;
	/* The guest may be waiting with a full window: tell it now. */
	send_ctl(d, st, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
}

int cmx_vsock_dev_tx(struct cmx_vsock_dev *d)
{
	struct cmx_virtq_elem e;
	int r = 0;

	while (!d->broken && (r = cmx_virtq_pop(d->txq, &e)) > 0) {
		int err = on_packet(d, &e);
		cmx_virtq_push(d->txq, e.head, 0);
		d->tx_pushed = 1;
		if (err) {
			cmx_warn("vsock: malformed packet from guest CID %llu; device stops",
				 (unsigned long long)d->guest_cid);
			d->broken = 1;
		}
	}
	if (r < 0)
		d->broken = 1;
	return d->broken ? -EINVAL : 0;
}

int cmx_vsock_dev_rx(struct cmx_vsock_dev *d)
{
	if (d->broken)
		return -EINVAL;
	if (ctl_flush(d))
		return d->broken ? -EINVAL : 0;
	/* Each blocked stream is woken once; writable() may close its own
	 * stream, so the walk restarts after each. */
	for (struct cmx_vsock_stream *st = d->streams; st; st = st->next)
		st->wake = st->blocked;
	for (;;) {
		struct cmx_vsock_stream *st = d->streams;
		for (; st && !st->wake; st = st->next)
			;
		if (!st || !cmx_virtq_has_avail(d->rxq))
			break;
		st->wake = st->blocked = 0;
		d->ops->writable(d->ctx, st);
	}
	return d->broken ? -EINVAL : 0;
}

long cmx_vsock_stream_write(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st,
			    const struct iovec *iov, unsigned n, size_t len)
{
	size_t done = 0;

	if (d->broken)
		return -EIO;
	/* Control packets first: a RESPONSE must reach the guest before data. */
	while (done < len && !ctl_flush(d)) {
		struct virtio_vsock_hdr h;
		uint32_t credit = st->peer_buf_alloc - (st->tx_cnt - st->peer_fwd_cnt);
		long k;

		/* No credit, or a guest that lies about fwd_cnt: wait for its
		 * next CREDIT_UPDATE (the driver sends one as its reader drains). */
		if (!credit || credit > st->peer_buf_alloc)
			break;
		hdr_fill(&h, d, st->host_port, st->guest_port, VIRTIO_VSOCK_OP_RW);
		hdr_credit(&h, st);
		k = rx_put(d, &h, iov, n, done, len - done < credit ? len - done : credit);
		if (k == -EAGAIN)
			break;
		if (k < 0)
			return -EIO;
		st->tx_cnt += (uint32_t)k;
		done += (size_t)k;
	}
	if (done < len) {
		cmx_dbg("vsock: port %u blocked after %zu of %zu bytes (credit %u, rx %s)",
			st->guest_port, done, len,
			st->peer_buf_alloc - (st->tx_cnt - st->peer_fwd_cnt),
			cmx_virtq_has_avail(d->rxq) ? "has buffers" : "full");
		st->blocked = 1;
	}
	return (long)done;
}

void cmx_vsock_stream_close(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st)
{
	send_rst(d, st->host_port, st->guest_port);
	stream_unlink(d, st);
	free(st);
}
