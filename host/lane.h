// SPDX-License-Identifier: MIT
// Bulk lanes: a session's extra connections, and the large transfers whose
// pieces travel on them straight into (or out of) the mapped native buffer.
#ifndef CMX_HOST_LANE_H
#define CMX_HOST_LANE_H

#include <stdint.h>

#include "piece.h"

struct cmx_conn;
struct cmx_session;
struct cmx_xfer;

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
/* Every byte of the piece arrived; drops its reference. */
void cmx_lane_piece_end(struct cmx_xfer *x, uint64_t len);
/* Drops a reference (a piece cut short: the connection ended). */
void cmx_xfer_put(struct cmx_xfer *x);

/* The session ends: its lanes close, its transfers are unmapped once no
 * piece is still being received into them. */
void cmx_lane_session_close(struct cmx_session *s);

#endif
