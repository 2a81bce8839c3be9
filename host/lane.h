// SPDX-License-Identifier: MIT
// Bulk lanes: a session's extra connections, and the large transfers whose
// pieces travel on them straight into (or out of) the mapped native buffer.
#ifndef CMX_HOST_LANE_H
#define CMX_HOST_LANE_H

#include <CL/cl.h>
#include <stdint.h>

#include "codec.h"
#include "piece.h"

struct cmx_call;
struct cmx_conn;
struct cmx_server;
struct cmx_session;

/* Pieces one transfer takes: ranges checked for overlap. */
#define CMX_XFER_PIECES (4 * CMX_LANES_MAX)

/*
 * A large transfer on a session's lanes, mapped for its pieces. It lives
 * from its WriteLanes/ReadLanes (host/exec_lane.c) to the last of: its end
 * (WriteLanesEnd, or the read's last piece sent) and every piece being
 * received into it (refs). Until then it holds the queue and the buffer,
 * so a session that ends mid-transfer never frees memory a worker still
 * writes into.
 */
struct cmx_xfer {
	const struct cmx_server *srv;
	struct cmx_xfer *next;
	struct cmx_session *s; /* NULL once out of the session's list */
	uint64_t id;
	int refs; /* the session's list, pieces in flight, the parked end */
	int reading;
	int unmapped;
	cl_command_queue q;
	cl_mem m;
	void *ptr;
	uint64_t off, size;
	uint64_t got;	   /* write: bytes landed */
	unsigned sending;  /* read: pieces not yet sent */
	cl_event gate;	   /* read: the unmap waits for it */
	struct cmx_ref ev; /* the guest's event for the command */
	/* A WriteLanesEnd waiting for bytes, and what finishes it when the
	 * last piece is in (host/exec_lane.c), holding a reference. */
	struct cmx_call *end;
	void (*end_fin)(struct cmx_xfer *x);
	uint64_t ranges[CMX_XFER_PIECES][2];
	unsigned nranges;
};

/* Hello with role lane on c: makes it a lane of s. 0 or -errno. */
int cmx_lane_attach(struct cmx_session *s, struct cmx_conn *c);
/* A lane connection ended: the session loses it. */
void cmx_lane_detach(struct cmx_session *s, struct cmx_conn *c);

/* A LanePiece header on a lane of s: where its len payload bytes go, with
 * a reference on the transfer in *x (cmx_lane_piece_end() or
 * cmx_xfer_put()), or NULL for a piece the session never asked for (an
 * unknown transfer, a read's, out of range, overlapping another piece). */
void *cmx_lane_piece_begin(struct cmx_session *s, uint64_t transfer, uint64_t off, uint64_t len,
			   struct cmx_xfer **x);
/* Every byte of the piece arrived; drops its reference. The last piece of
 * a write whose WriteLanesEnd waits finishes it (x->end_fin). */
void cmx_lane_piece_end(struct cmx_xfer *x, uint64_t len);
/* Drops a reference (a piece cut short: the connection ended). */
void cmx_xfer_put(struct cmx_xfer *x);
/* The transfer id of s, or NULL. */
struct cmx_xfer *cmx_lane_xfer(struct cmx_session *s, uint64_t id);
/* Takes x out of its session's list, and the list's reference with it. */
void cmx_xfer_unlist(struct cmx_xfer *x);

/* The session ends: its lanes close, its transfers are unmapped once no
 * piece is still being received into them (host/exec_lane.c). */
void cmx_lane_session_close(struct cmx_session *s);

#endif
