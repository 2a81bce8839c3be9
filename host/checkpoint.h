// SPDX-License-Identifier: MIT
// Checkpoints: every session of this process written to the state
// directory (--state-dir), its device drained first.
#ifndef CMX_HOST_CHECKPOINT_H
#define CMX_HOST_CHECKPOINT_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>

#include "state.h"

struct cmx_server;
struct cmx_session;

/* A process's state directory (srv->state; all zero: none given). */
struct cmx_state_dir {
	int open; /* fd is the directory's (cmx_checkpoint_open()) */
	int fd;
	/* The instance id the names of this process's files carry (16 hex
	 * digits, drawn at the open; host/checkpoint.c says why not the
	 * pid). */
	char instance[17];
	/* The key of this worker process, as state file names have it
	 * (cmx_checkpoint_worker()); "" in a daemon without workers, whose
	 * files name their tenant's worker. */
	char owner[CMX_STATE_KEY_MAX];
};

/* Opens (makes) the state directory for srv's process, and draws its
 * instance id: 0 or -errno (-EPERM: not the daemon's user's alone; the
 * errno of getrandom() when it gave no id). */
int cmx_checkpoint_open(struct cmx_server *srv, const char *path);
/* This process's instance id, in the names of the state files it writes
 * (16 hex digits; "" before cmx_checkpoint_open()): unlike its pid, not
 * one a predecessor had (host/checkpoint.c). */
const char *cmx_checkpoint_instance(const struct cmx_server *srv);
/* This process is the worker `key` (clmuxd --worker): its files name it,
 * and it restores only the files that are its (below). */
void cmx_checkpoint_worker(struct cmx_server *srv, const char *key);
/* Whether the state file `name` is this process's to restore at its start
 * (docs/architecture.md, "The state file"): without workers, any; in a
 * tenant's worker, one of a tenant's worker or of none (its tenant then
 * decides); in a TLS listener's or a VM device's worker, its own only.
 * Never one this process wrote. */
int cmx_checkpoint_file_ours(const struct cmx_server *srv, const char *name);
/* Whether a state directory was given; its descriptor (-1: none). */
int cmx_checkpoint_enabled(const struct cmx_server *srv);
int cmx_checkpoint_dirfd(const struct cmx_server *srv);
/* The state directory's listing (closedir() it), or NULL without one. */
DIR *cmx_checkpoint_dir_list(const struct cmx_server *srv);
/* A queue of native context ctx: one of s's, else one made for the
 * caller to release (*made set). NULL when none can be had. */
void *cmx_checkpoint_queue(struct cmx_session *s, void *ctx, int *made);
/* The id of a queue of s in native context ctx, or 0. */
uint64_t cmx_checkpoint_queue_id(struct cmx_session *s, void *ctx);

struct cmx_checkpoint_stats {
	unsigned sessions, failed;
	uint64_t records, bytes; /* buffer bytes written */
	uint64_t images;	 /* image bytes written */
	uint64_t ns;		 /* wall time, drain included */
};

/* Writes every open session (its queues finished first, on this thread);
 * a session that cannot be written is logged and counted as failed, and
 * the others are written still. 0, or -errno when there is no directory. */
int cmx_checkpoint_all(struct cmx_server *srv, struct cmx_checkpoint_stats *st);
/* Writes one session the same way (its queues finished first), as the
 * file `name` of the state directory; 0 or -errno (-EBUSY: a call that
 * changes an object is still running). */
int cmx_checkpoint_session(struct cmx_session *s, char *name, size_t len,
			   struct cmx_checkpoint_stats *st);

#endif
