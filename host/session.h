// SPDX-License-Identifier: MIT
// A guest session: its channels, its objects and what they are charged.
#ifndef CMX_HOST_SESSION_H
#define CMX_HOST_SESSION_H

#include <stdint.h>

#include "object.h"
#include "objtab.h"
#include "piece.h"
#include "record.h"

struct cmx_amap;
struct cmx_area;
struct cmx_shm;
struct cmx_conn;
struct cmx_server;
struct cmx_tenant;
struct cmx_xfer;
struct cmx_restore;
struct cmx_parts;

/* Commands of a session whose completion the loop looks for at once. */
#define CMX_FENCE_PEND 32

struct cmx_session {
	uint64_t id, token;
	int refs; /* the call connection, calls in flight, callbacks pending */
	int closed;
	unsigned calls; /* dispatched and not done (cmx_call_done()) */
	struct cmx_server *srv;
	struct cmx_tenant *tenant; /* whose quotas it draws on */
	struct cmx_conn *conn;	/* calls and replies */
	struct cmx_conn *nconn; /* notifications */
	/* Bulk lanes (host/lane.c), in the order their Hellos came, and the
	 * transfers on them. */
	struct cmx_conn *lanes[CMX_LANES_MAX];
	unsigned nlanes;
	struct cmx_xfer *xfers;
	unsigned nxfers;
	struct cmx_objtab objs;
	struct cmx_reclog log; /* what made its objects (host/record.c) */
	/* Restored from the state directory: being replayed (host/restore.c),
	 * then waiting for its guest's Hello (restored, conn NULL). */
	struct cmx_restore *restore;
	int restored;
	int from_state; /* made by a restore, resumed or not: calls may come again */
	/* A checkpoint came while it was being restored: its state file
	 * stood for it, and it is written once its restore is done. */
	int checkpoint_owed;
	struct cmx_area *area; /* shared memory (OpenArea), or NULL */
	/* A restored area's memfd until its resuming guest's OpenArea takes
	 * it (host/restore.c), else -1. */
	int area_fd;
	struct cmx_shm *shm;   /* its rings at work (shm transport), or NULL */
	struct cmx_amap *amaps; /* area buffers' native maps (host/exec_mem.c) */
	uint64_t bytes; /* device memory charged */
	/* It set a user event to an error, or a command it waited for
	 * failed: its in-order queues' commands may have failed, and their
	 * events rest before their release (host/complete.c). Until then
	 * they are released at once. */
	int failed;
	/* A program's source or IL arriving in parts (ProgramPart), or NULL
	 * (host/exec_program.c). */
	struct cmx_parts *parts;
	/* Guest event ids of commands whose completion fences are still to be
	 * stored, oldest first (host/fence.c), and the list of sessions with
	 * some. */
	uint64_t fence_ids[CMX_FENCE_PEND];
	uint8_t fence_head, fence_n;
	int fence_listed;
	struct cmx_session *fence_next;
	struct cmx_session *next, **pprev;

	/* Counters (GetStats, docs/protocol.md). */
	uint64_t messages, sync_calls, recvs, async_errors;
	int32_t last_async_error; /* the status the last of them failed with */
};

struct cmx_session *cmx_session_create(struct cmx_server *srv, struct cmx_conn *conn,
				       struct cmx_tenant *t);
void cmx_session_ref(struct cmx_session *s);
void cmx_session_unref(struct cmx_session *s);
struct cmx_session *cmx_session_find(struct cmx_server *srv, uint64_t id, uint64_t token);

/* The object `id` of `kind`, or NULL (absent, another kind). */
struct cmx_obj *cmx_session_obj(struct cmx_session *s, uint64_t id, unsigned kind);
/* Registers a new object (h NULL and err set: a poisoned one). 0 or -errno. */
int cmx_session_add(struct cmx_session *s, uint64_t id, unsigned kind, void *h, void *ctx,
		    int32_t err, struct cmx_obj **out);
/* Charges o's device memory to the session, its tenant and the daemon;
 * returned when o is freed. */
void cmx_session_charge(struct cmx_session *s, struct cmx_obj *o, uint64_t bytes);
/* Forgets id and releases it (srv->release: host/release.c). */
void cmx_session_release(struct cmx_session *s, uint64_t id, unsigned kind);

#endif
