// SPDX-License-Identifier: MIT
// virtio-vsock device, stream sockets: the guest's connections to the host
// CID, with credit flow control both ways, over an rx and a tx virtqueue.
#ifndef CMX_VSOCK_DEV_H
#define CMX_VSOCK_DEV_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "virtq.h"

#define CMX_VSOCK_HOST_CID 2
#define CMX_VSOCK_HDR_SIZE 44
/* What one stream may have in flight towards us: the guest's send window.
 * Bytes the user keeps back (ops->data) are not credited until it takes
 * them, so they count against it. */
#define CMX_VSOCK_BUF_ALLOC (1u << 20)

struct cmx_vsock_dev;

struct cmx_vsock_stream {
	struct cmx_vsock_stream *next;
	uint32_t host_port, guest_port;
	uint32_t peer_buf_alloc, peer_fwd_cnt; /* the guest's receive window */
	uint32_t tx_cnt;		       /* bytes we sent the guest */
	uint32_t fwd_cnt, fwd_reported;	       /* bytes of the guest's we took */
	uint32_t held; /* bytes received that the user keeps back, not credited */
	int blocked; /* a write stopped for want of credit or buffers */
	int wake;    /* cmx_vsock_dev_rx(): still to be woken */
	void *user;
};

struct cmx_vsock_ops {
	/* The guest connects to port: 0 to accept (st->user may be set), or
	 * -errno to refuse with a reset. */
	int (*accept)(void *ctx, struct cmx_vsock_stream *st);
	/* len bytes for st, at off in the iovec: the count taken now. The user
	 * keeps the rest itself and credits it with cmx_vsock_stream_credit()
	 * once taken; meanwhile the guest's window holds them. */
	size_t (*data)(void *ctx, struct cmx_vsock_stream *st, const struct iovec *iov, unsigned n,
		       size_t off, size_t len);
	/* The stream is gone (guest closed or reset it, or the device is
	 * stopping); st is freed when this returns. */
	void (*closed)(void *ctx, struct cmx_vsock_stream *st);
	/* A blocked stream may write again. */
	void (*writable)(void *ctx, struct cmx_vsock_stream *st);
};

struct cmx_vsock_ctl;

struct cmx_vsock_dev {
	uint64_t guest_cid;
	struct cmx_virtq *rxq, *txq;
	const struct cmx_vsock_ops *ops;
	void *ctx;
	struct cmx_vsock_stream *streams;
	struct cmx_vsock_ctl *ctl_head, **ctl_tail; /* control packets not yet sent */
	int rx_pushed, tx_pushed; /* the caller signals the queue's call fd */
	int broken;		  /* sticky: the guest sent garbage */
};

void cmx_vsock_dev_init(struct cmx_vsock_dev *d, uint64_t guest_cid, struct cmx_virtq *rxq,
			struct cmx_virtq *txq, const struct cmx_vsock_ops *ops, void *ctx);
/* Closes every stream (ops->closed) and drops queued packets, writing
 * nothing to the guest; the device may then start afresh (a reset). */
void cmx_vsock_dev_fini(struct cmx_vsock_dev *d);
/* The guest kicked the tx queue: handles its packets. 0, or -EINVAL when
 * the device is broken. */
int cmx_vsock_dev_tx(struct cmx_vsock_dev *d);
/* The guest kicked the rx queue (more buffers): sends what waited. */
int cmx_vsock_dev_rx(struct cmx_vsock_dev *d);
/* Writes up to len bytes from iov[0..n) at off to the guest: the count
 * taken (0: blocked, ops->writable follows), or -errno. */
long cmx_vsock_stream_write(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st,
			    const struct iovec *iov, unsigned n, size_t len);
/* n bytes the user kept back (ops->data) are taken: credited to the guest,
 * which hears of it at once. */
void cmx_vsock_stream_credit(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st, uint32_t n);
/* The host side ends st: the guest is reset; st is freed (no ops->closed). */
void cmx_vsock_stream_close(struct cmx_vsock_dev *d, struct cmx_vsock_stream *st);

#endif
