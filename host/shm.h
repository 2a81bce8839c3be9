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
	struct cmx_session *s; /* NULL once the session has closed */
	struct cmx_area *area; /* referenced: the rings live in it */
	struct cmx_ring cmd, rep, ntf;
	int bell; /* eventfd the guest writes; a read of it stays armed */
	uint64_t bell_val;
	struct cmx_io bell_io;
};

/* Puts the rings of s->area to work for s: calls are read from the command
 * ring, replies and notifications go to theirs once each socket has sent
 * its set-up reply. *guest_bell is the doorbell for the guest (the caller
 * passes it on and closes it). 0 or -errno. */
int cmx_shm_create(struct cmx_session *s, int *guest_bell);
/* The session is over: the doorbell is released once its read returns. */
void cmx_shm_close(struct cmx_shm *m);

#endif
