// SPDX-License-Identifier: MIT
// Checkpoints: every session of this process written to the state
// directory (--state-dir), its device drained first.
#ifndef CMX_HOST_CHECKPOINT_H
#define CMX_HOST_CHECKPOINT_H

#include <stdint.h>

struct cmx_server;
struct cmx_session;

/* Opens (makes) the state directory for this process: 0 or -errno
 * (-EPERM: not the daemon's user's alone). */
int cmx_checkpoint_open(const char *path);
/* Whether a state directory was given. */
int cmx_checkpoint_enabled(void);

struct cmx_checkpoint_stats {
	unsigned sessions, failed;
	uint64_t records, bytes; /* buffer bytes written */
	uint64_t ns;		 /* wall time, drain included */
};

/* Writes every open session (its queues finished first, on this thread);
 * a session that cannot be written is logged and counted as failed, and
 * the others are written still. 0, or -errno when there is no directory. */
int cmx_checkpoint_all(struct cmx_server *srv, struct cmx_checkpoint_stats *st);

#endif
