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

/* A connection's place in the count (embedded in struct cmx_conn). */
struct cmx_pending {
	int in; /* counted */
	uint8_t key[16];
};

/* Counts a new connection of peer p: 0, or -EAGAIN when p or everyone is at
 * the cap (one line is logged, at most one a second for all refusals). */
int cmx_pending_enter(struct cmx_pending *pd, const struct cmx_peer *p);
/* The connection said Hello or ended; again is harmless. */
void cmx_pending_leave(struct cmx_pending *pd);
/* Connections counted now (tests, stats). */
unsigned cmx_pending_count(void);

#endif
