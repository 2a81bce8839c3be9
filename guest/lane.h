// SPDX-License-Identifier: MIT
// Bulk lanes of a guest session: extra connections, a thread each, that move
// the pieces of a large blocking transfer side by side.
// Layer: transport, below session.c (guest/icd.h has the layers).
#ifndef CMX_GUEST_LANE_H
#define CMX_GUEST_LANE_H

#include <stdint.h>

#include "piece.h"

struct cmx_lanes;

/* Transfers of at least this many bytes take the lanes. */
#define CMX_LANES_MIN (8u << 20)

/* How many lanes a tcp session opens: $CLMUX_LANES (0: none), else
 * min(4, the number of CPUs), at most CMX_LANES_MAX. */
unsigned cmx_lanes_wanted(void);
/* Takes n connected lanes (their Hello done) and starts their threads;
 * the fds are the lanes' from then on (closed with them). 0 or -errno
 * (the fds are closed then too). */
int cmx_lanes_create(const int *fds, unsigned n, struct cmx_lanes **out);
/* Wakes every lane thread out of its I/O for good (the session broke). */
void cmx_lanes_shutdown(struct cmx_lanes *l);
/* Shuts down, joins the threads, closes the lanes. NULL is ignored. */
void cmx_lanes_destroy(struct cmx_lanes *l);

/* One transfer at a time: 1 with the lanes taken and *transfer a fresh id
 * for it, 0 when another thread's transfer has them (use the call channel). */
int cmx_lanes_take(struct cmx_lanes *l, uint64_t *transfer);
void cmx_lanes_give(struct cmx_lanes *l);
unsigned cmx_lanes_count(const struct cmx_lanes *l);

/* Sends piece i of [ptr, ptr + size) on lane i, all lanes at once; returns
 * when every piece is written. 0 or -errno (a lane failed: the session is
 * lost, its data incomplete). */
int cmx_lanes_send(struct cmx_lanes *l, uint64_t transfer, const void *ptr, uint64_t size);
/* Has lane i receive piece i of a transfer of size bytes into dst; then
 * cmx_lanes_wait() returns once every piece is in. */
void cmx_lanes_recv_start(struct cmx_lanes *l, uint64_t transfer, void *dst, uint64_t size);
/* Waits for the current job of every lane: 0 or -errno (a lane failed, or
 * the daemon sent a piece that is not the one expected). */
int cmx_lanes_wait(struct cmx_lanes *l);

#endif
