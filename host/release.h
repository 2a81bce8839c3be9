// SPDX-License-Identifier: MIT
// Releasing what a session holds (host/release.c).
#ifndef CMX_HOST_RELEASE_H
#define CMX_HOST_RELEASE_H

struct cmx_obj;
struct cmx_server;
struct cmx_session;
struct cmx_tenant;

/* Releases o, which s's table no longer holds: what it holds elsewhere
 * (the scheduler's commands, event callbacks, a command buffer's
 * commands, its record), then its native object, on the reaper when that
 * may take long. srv->release, through which cmx_session_release() calls
 * it. */
void cmx_release_obj(struct cmx_session *s, struct cmx_obj *o);
/* The call connection went away: release every object, drop the session. */
void cmx_release_session(struct cmx_session *s);
/* Ends every session of t in this process (clmuxctl evict); how many. */
unsigned cmx_release_tenant(struct cmx_server *srv, struct cmx_tenant *t);

#endif
