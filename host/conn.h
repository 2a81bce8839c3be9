// SPDX-License-Identifier: MIT
// One client connection on the loop: framing in, gathered writes out.
#ifndef CMX_HOST_CONN_H
#define CMX_HOST_CONN_H

#include <stdint.h>
#include <sys/uio.h>

#include "loop.h"
#include "peer.h"
#include "pending.h"
#include "proto.gen.h"
#include "tenant.h"
#include "wire.h"

struct cmx_auth;
struct cmx_conn;
struct cmx_listener;
struct cmx_ring;
struct cmx_server;
struct cmx_session;
struct cmx_xfer;
struct seg;

/* A connection's role is the Hello's (enum cmx_role of the schema), or
 * this before its Hello. */
#define CMX_ROLE_NEW 0

#define CMX_CONN_IOV 64

/* Moves a connection's bytes where there is no socket (the vhost-user-vsock
 * device): input arrives through cmx_conn_input(). */
struct cmx_conn_mover {
	/* Takes bytes of iov towards the peer: the count (0: none now, and
	 * cmx_conn_tx_ready() follows), or -errno. */
	long (*write)(void *ctx, const struct iovec *iov, int n);
	/* The connection ended: no call into ctx follows. */
	void (*close)(void *ctx);
	/* The connection takes input again after it took less than it was
	 * offered (cmx_conn_input()); NULL: the mover never holds input back. */
	void (*resume)(void *ctx);
};

/* Where a connection's messages go: the layer that serves them registers
 * its table on the server (srv->conn_ops) before the first accept
 * (cmx_dispatch_attach() in a worker, cmx_front_start() in the front end). */
struct cmx_conn_ops {
	/* An Auth message, before Hello (host/call.c): 0, or -ECONNABORTED
	 * once a refusal is queued. */
	int (*auth)(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args);
	/* Hello, in a worker: the connection's session begins or it joins
	 * one as its notification channel or a lane. */
	int (*hello)(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args);
	/* Hello, in the front end: the connection goes to its tenant's
	 * worker with the n bytes from `from` on (host/front.c); 0 when
	 * handed over. */
	int (*handoff)(struct cmx_conn *c, const uint8_t *from, size_t n);
	/* Every later message of a call channel; takes ownership of bulk. */
	int (*dispatch)(struct cmx_session *s, const struct cmx_hdr *h, const uint8_t *args,
			uint8_t *bulk);
	/* A worker's call channel ended: its session closes, releasing
	 * everything it held (host/release.c). */
	void (*ended)(struct cmx_session *s);
};

struct cmx_conn {
	struct cmx_server *srv;
	int fd;
	int refs; /* the owner, plus one per submission in flight */
	int dead;
	int closing; /* ends once its output is written (a refused Auth) */
	uint8_t role; /* enum cmx_role, or CMX_ROLE_NEW */
	struct cmx_session *sess;
	/* Who connected (host/peer.h); auth: the listener's tokens, which an
	 * Auth message must match before Hello (NULL: none asked). */
	struct cmx_peer peer;
	struct cmx_auth *auth;
	int authed;
	int lz4; /* Compress granted LZ4: payloads may come and go compressed */
	const struct cmx_conn_mover *mover; /* NULL: fd is a socket */
	void *mover_ctx;

	/* shm: messages come from rx_ring, output goes to tx_ring (from the
	 * moment the socket has sent everything queued before tx_ring_next
	 * was set); the socket only tells that the guest lives. */
	struct cmx_ring *rx_ring, *tx_ring, *tx_ring_next;
	/* Wakes rx_ring's reader when the connection takes input again
	 * (host/shm.c's doorbell); NULL: it reads again by itself (an ivshmem
	 * slot's next turn). */
	void (*rx_ring_resume)(struct cmx_conn *c);
	int last_sync; /* the last call taken in was sync: its sender now waits */
	uint8_t probe[16];
	struct cmx_ident ident; /* who connected: decides the tenant at Hello */
	struct cmx_io hs_io;	/* the time allowed for Hello (host/conn.c) */
	int hs_armed;
	struct cmx_pending pending; /* counted until Hello (host/pending.c) */

	struct cmx_io rx_io;
	uint8_t *rx;
	size_t rx_len, rx_cap, rx_pos;
	/* A message whose payload is still arriving, straight into bulk_buf. */
	struct cmx_hdr bulk_hdr;
	uint8_t *bulk_args;
	uint8_t *bulk_buf;
	uint64_t bulk_got;
	int in_bulk;
	/* bulk_buf is mapped native memory (host/land.h), not staging; handed
	 * to the handler as `landed` while the call is delivered. land_last:
	 * the native unmap that ended the latest landing (retained). */
	struct cmx_land *bulk_land, *landed;
	void *land_last;
	/* A lane's piece being received into its transfer's region (host/lane.c). */
	struct cmx_xfer *lane_xfer;

	/* Input held back (host/conn.c STALL_*): its tenant's rate (until
	 * rate_io fires), its session's unread output (until it drains). The
	 * socket's recv is not armed meanwhile (rx_armed: it is). */
	unsigned stall;
	int rx_armed, resume_posted;
	struct cmx_io rate_io;
	struct __kernel_timespec rate_ts;

	struct cmx_io tx_io;
	struct seg *tx_head, **tx_tail;
	int tx_busy;
	struct iovec iov[CMX_CONN_IOV];
	struct msghdr mh;
	uint64_t cmsg[4]; /* SCM_RIGHTS with up to 2 fds */
	uint64_t tx_bytes_queued;
	struct cmx_tenant *charged; /* whose output the queue is (its session's) */
	/* Bytes written ever; unread_io times a peer over the output cap that
	 * reads nothing (unread_mark: tx_sent when armed). */
	uint64_t tx_sent, unread_mark;
	struct cmx_io unread_io;
	struct __kernel_timespec unread_ts; /* its timeout, unread_s() */
	int unread_armed;
};

/* Takes a socket accepted on l (NULL: a unix peer, no token, no tenant):
 * its peer identity, tokens and tenant. 0 (also when the peer has too many
 * connections before Hello: fd closed, logged), or -ENOMEM. */
int cmx_conn_accept(struct cmx_server *srv, int fd, const struct cmx_listener *l);
/* The same for a socket whose bytes a mover carries (TLS, host/tls.c): fd
 * names the peer and stays the caller's. 0 with *out set; -EAGAIN: refused,
 * its peer has too many connections before Hello (logged); -ENOMEM. */
int cmx_conn_accept_moved(struct cmx_server *srv, int fd, const struct cmx_listener *l,
			  const struct cmx_conn_mover *m, void *ctx, struct cmx_conn **out);
/* A connection whose bytes a mover carries, from the VM with vsock CID cid,
 * the tenant's named (or NULL: the CID decides); NULL when out of memory or
 * when that CID has too many connections before Hello (logged). */
struct cmx_conn *cmx_conn_create_moved(struct cmx_server *srv, const struct cmx_conn_mover *m,
				       void *ctx, uint32_t cid, const char *tenant);
/* A worker takes a connection the front end handed over (host/front.c):
 * the socket, who is at the other end, the tenant the front end chose, and
 * the n bytes it read from the Hello on. 0, or -errno (fd closed). */
int cmx_conn_adopt(struct cmx_server *srv, int fd, const struct cmx_peer *peer, int authed,
		   const char *tenant, const void *bytes, size_t n);
/* Bytes from the peer of a moved connection: the count taken. Fewer than
 * len while the connection holds input back (its tenant's rate, its
 * session's unread output): the mover keeps the rest, takes nothing more
 * from its peer, and offers it again when m->resume() is called. */
size_t cmx_conn_input(struct cmx_conn *c, const void *buf, size_t len);
/* The mover can take bytes again. */
void cmx_conn_tx_ready(struct cmx_conn *c);
/* Queues a message: header, encoded args (copied), and a payload that stays
 * referenced until written, then is passed to free_fn. */
void cmx_conn_send(struct cmx_conn *c, const struct cmx_hdr *h, const void *args,
		   void *bulk, void (*free_fn)(void *));
/* The same, with free_fn(free_arg) once the payload is written (a piece of
 * a larger region). */
void cmx_conn_send_ref(struct cmx_conn *c, const struct cmx_hdr *h, const void *args,
		       void *bulk, void (*free_fn)(void *), void *free_arg);
/* The same, passing fds[0..1] (those >= 0; fds may be NULL), which the
 * connection closes once sent, with the message's first byte. A header with CMX_HDR_AREA queues no payload: it is
 * in the shared area, and free_fn(bulk) runs at once. */
void cmx_conn_send_fd(struct cmx_conn *c, const struct cmx_hdr *h, const void *args,
		      void *bulk, void (*free_fn)(void *), const int *fds);
/* shm: takes in and acts on every message the command ring holds; the
 * number of bytes taken (the connection may have ended meanwhile). Takes
 * none while the connection holds input back (cmx_conn_held()); the shm
 * doorbell is rung when it takes input again. */
long cmx_conn_ring_input(struct cmx_conn *c);
/* Whether the connection takes no input for now: its tenant's rate or its
 * session's unread output. */
int cmx_conn_held(const struct cmx_conn *c);
/* The daemon is ending after a checkpoint: c takes no more input (what
 * it applies after the checkpoint would be lost; the resuming guest sends
 * it again), while its output goes on. */
void cmx_conn_drain(struct cmx_conn *c);
/* Whether c has output queued that its peer has not taken yet. */
int cmx_conn_sending(const struct cmx_conn *c);
/* A session about to move (host/migrate.c): its call channel takes no
 * input while held (what came stays unparsed, so not applied), and goes
 * on when released. */
void cmx_conn_hold(struct cmx_conn *c, int hold);
/* n bytes came from the tenant by a path no message carries (an area
 * buffer mapped for writing): charged to its rate like received bytes;
 * over it, the connection's next input waits. */
void cmx_conn_rate_charge(struct cmx_conn *c, uint64_t n);
/* Retries queued output (the ring had no room). */
void cmx_conn_kick(struct cmx_conn *c);
/* Ends the connection; its session learns of it. */
void cmx_conn_kill(struct cmx_conn *c, const char *why);

#endif
