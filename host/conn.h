// SPDX-License-Identifier: MIT
// One client connection on the loop: framing in, gathered writes out.
#ifndef CMX_HOST_CONN_H
#define CMX_HOST_CONN_H

#include <stdint.h>
#include <sys/uio.h>

#include "loop.h"
#include "peer.h"
#include "wire.h"

struct cmx_auth;
struct cmx_listener;
struct cmx_server;
struct cmx_session;
struct seg;

enum cmx_conn_role { CMX_ROLE_NEW, CMX_ROLE_CALL, CMX_ROLE_NOTIFY };

#define CMX_CONN_IOV 64

struct cmx_conn {
	struct cmx_server *srv;
	int fd;
	int refs; /* the owner, plus one per submission in flight */
	int dead;
	int closing; /* ends once its output is written (a refused Auth) */
	enum cmx_conn_role role;
	struct cmx_session *sess;
	/* Who connected (host/peer.h); auth: the listener's tokens, which an
	 * Auth message must match before Hello (NULL: none asked). */
	struct cmx_peer peer;
	struct cmx_auth *auth;
	int authed;
	struct cmx_io hs_io; /* the time allowed for Auth (host/conn.c) */
	int hs_armed;

	struct cmx_io rx_io;
	uint8_t *rx;
	size_t rx_len, rx_cap, rx_pos;
	/* A message whose payload is still arriving, straight into bulk_buf. */
	struct cmx_hdr bulk_hdr;
	uint8_t *bulk_args;
	uint8_t *bulk_buf;
	uint64_t bulk_got;
	int in_bulk;

	struct cmx_io tx_io;
	struct seg *tx_head, **tx_tail;
	int tx_busy;
	struct iovec iov[CMX_CONN_IOV];
	struct msghdr mh;
	uint64_t tx_bytes_queued;
};

/* Takes a connected socket (a unix peer, no token asked). */
int cmx_conn_create(struct cmx_server *srv, int fd);
/* Takes a socket accepted on l: its peer identity and tokens. */
int cmx_conn_accept(struct cmx_server *srv, int fd, const struct cmx_listener *l);
/* Queues a message: header, encoded args (copied), and a payload that stays
 * referenced until written, then is passed to free_fn. */
void cmx_conn_send(struct cmx_conn *c, const struct cmx_hdr *h, const void *args,
		   void *bulk, void (*free_fn)(void *));
/* Ends the connection; its session learns of it. */
void cmx_conn_kill(struct cmx_conn *c, const char *why);

#endif
