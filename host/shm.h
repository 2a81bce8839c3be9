// SPDX-License-Identifier: MIT
// The shm transport on the host: a session's rings in its shared area and
// the doorbell the guest rings, watched by the loop.
#ifndef CMX_HOST_SHM_H
#define CMX_HOST_SHM_H

#include <stdint.h>

#include "loop.h"
#include "ring.h"

struct cmx_area;
struct cmx_session;

struct cmx_shm {
	struct cmx_server *srv;
	struct cmx_session *s; /* NULL once the session has closed */
	struct cmx_area *area; /* referenced: the rings live in it */
	struct cmx_ring cmd, rep, ntf;
	int bell; /* eventfd the guest writes; a read of it stays armed */
	uint64_t bell_val;
	struct cmx_io bell_io;
};

struct cmx_conn;

/* One turn over a ring session (shm, ivshmem): takes every call its command
 * ring holds, retries output that waited for room, and spins for a bounded
 * time while calls keep coming. chan(arg, 0) and chan(arg, 1) give the call
 * and notification connections, NULL once gone (they may end meanwhile).
 * Returns 1 when it may sleep, 0 when the session ended, -EAGAIN when its
 * time is spent (come back after the others); *took is set when a call
 * came in. Loop thread. */
int cmx_shm_pump(struct cmx_server *srv, struct cmx_conn *(*chan)(void *arg, int ntf), void *arg,
		 int *took);

/* Puts the rings of s->area to work for s: calls are read from the command
 * ring, replies and notifications go to theirs once each socket has sent
 * its set-up reply. *guest_bell is the doorbell for the guest (the caller
 * passes it on and closes it). 0 or -errno. */
int cmx_shm_create(struct cmx_session *s, int *guest_bell);
/* The session is over: the doorbell is released once its read returns. */
void cmx_shm_close(struct cmx_shm *m);

#endif
