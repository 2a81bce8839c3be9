// SPDX-License-Identifier: MIT
// Restores: this process's tenants' sessions read back from the state
// directory (--state-dir), and a guest's Hello that resumes one.
#ifndef CMX_HOST_RESTORE_H
#define CMX_HOST_RESTORE_H

#include <stdint.h>

struct cmx_server;
struct cmx_session;
struct cmx_tenant;

/* How many kinds of request the log of a directory's restore keeps the
 * time of (struct cmx_restores). */
#define CMX_RESTORE_SPENT 8

struct cmx_restore_op_time {
	uint16_t op;
	unsigned n;
	uint64_t ns;
};

/* A process's restores from its state directory (srv->restores). Loop
 * thread. */
struct cmx_restores {
	/* Whether a tenant's files are this process's (cmx_restore_all();
	 * NULL: every tenant's). */
	int (*serves)(const struct cmx_tenant *t);
	/* cmx_restore_all() has read the state directory: a session not
	 * found after it is not there to resume. */
	int ran;
	/* cmx_restore_all()'s files together: once the last is replayed,
	 * one line says how long the whole directory took, from its listing
	 * on (sessions are replayed side by side, each going on as its
	 * deferred calls end). */
	unsigned left, restored, failed;
	uint64_t bytes, images, t0;
	int listing; /* still reading the directory */
	/* Where the time went: the requests of the costliest kinds, from
	 * dispatch to their end (a deferred one's too), summed over the
	 * sessions; contents and images under op 0. */
	struct cmx_restore_op_time spent[CMX_RESTORE_SPENT];
};

/* Every state file of a tenant that serves_fn says is this process's
 * (NULL: every tenant) is replayed, on the loop; a file that fails is
 * logged and kept as NAME.bad, and ends only its own session. */
void cmx_restore_all(struct cmx_server *srv, int (*serves_fn)(const struct cmx_tenant *t));
/* One state file of the directory, at run time (a migration's, received
 * by host/migrate.c): replayed as cmx_restore_all() replays each. */
void cmx_restore_file(struct cmx_server *srv, const char *name);
/* Registers what the files below ask a restore through the server, before
 * the first connection: a call's end (srv->replayed), a CreateBuffer
 * (srv->restore_covers, srv->restore_unfilled), a resuming Hello
 * (srv->restore_find). A restore replays through cmx_dispatch_call(), so
 * it lies above the dispatcher. */
void cmx_restore_attach(struct cmx_server *srv);

#endif
