// SPDX-License-Identifier: MIT
// Restores: this process's tenants' sessions read back from the state
// directory (--state-dir), and a guest's Hello that resumes one.
#ifndef CMX_HOST_RESTORE_H
#define CMX_HOST_RESTORE_H

#include <stdint.h>

struct cmx_server;
struct cmx_session;
struct cmx_tenant;

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
