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
/* The end of a request a restore dispatched (cmx_call_done()). */
void cmx_restore_done(struct cmx_session *s, int status);
/* While s is being restored: whether its file holds every byte of buffer
 * id, size bytes, not yet made; such a buffer needs no zero fill, and
 * cmx_restore_unfilled() names the native buffer made without one (its
 * restore fails unless it gets them all). */
int cmx_restore_covers(struct cmx_session *s, uint64_t id, uint64_t size);
void cmx_restore_unfilled(struct cmx_session *s, uint64_t id, void *mem);
/* A restored session of tenant t waiting for its guest, with this id and
 * token; NULL when there is none, *busy set when it is still being
 * replayed. */
struct cmx_session *cmx_restore_find(struct cmx_server *srv, const struct cmx_tenant *t,
				     uint64_t id, uint64_t token, int *busy);

#endif
