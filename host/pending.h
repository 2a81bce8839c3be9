// SPDX-License-Identifier: MIT
// Connections that have not said Hello yet, counted per peer and in all.
#ifndef CMX_HOST_PENDING_H
#define CMX_HOST_PENDING_H

#include <stdint.h>

#include "peer.h"

/* Most connections one peer (a Unix uid, a vsock CID, a TCP address or
 * IPv6 /64) may have open before their Hello, and all peers together. */
#define CMX_PENDING_PER_PEER 64
#define CMX_PENDING_MAX	     1024

/* The server's count (struct cmx_server's pending). One entry per peer
 * with pending connections; at most CMX_PENDING_MAX, since each holds one
 * at least. A linear scan: a thousand 16-byte compares cost less than the
 * accept they guard. Loop thread only. */
struct cmx_pending_peers {
	struct {
		uint8_t key[16];
		unsigned n;
	} peers[CMX_PENDING_MAX];
	unsigned npeers, total;
	uint64_t logged_ns; /* the last refusal's line */
	unsigned unlogged;  /* refusals since, not logged */
};

/* A connection's place in the count (embedded in struct cmx_conn). */
struct cmx_pending {
	struct cmx_pending_peers *in; /* counted there, or NULL */
	uint8_t key[16];
};

/* Counts a new connection of peer p in pp: 0, or -EAGAIN when p or
 * everyone is at the cap (one line is logged, at most one a second for all
 * refusals). */
int cmx_pending_enter(struct cmx_pending_peers *pp, struct cmx_pending *pd,
		      const struct cmx_peer *p);
/* The connection said Hello or ended; again is harmless. */
void cmx_pending_leave(struct cmx_pending *pd);

#endif
