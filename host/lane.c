// SPDX-License-Identifier: MIT
// Bulk lanes: a session's extra connections, and the pieces of large
// transfers that host/conn.c receives on them into the mapped buffer. The
// transfers' calls (WriteLanes, ReadLanes, their ends) are
// host/exec_lane.c, above the call's end.
#include "lane.h"

#include <CL/cl.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "exec.h"
#include "server.h"
#include "session.h"

/*
 * One TCP stream is bounded by its receiver's copy (docs/performance.md):
 * a transfer spread over several streams is copied by several threads.
 * The loop only parses the pieces' headers; their payloads are received
 * (and a read's sent) by io_uring's worker threads, one per lane at once
 * (IOSQE_ASYNC, host/conn.c), straight into the region mapped here.
 */

int cmx_lane_attach(struct cmx_session *s, struct cmx_conn *c)
{
	if (s->shm || s->closed)
		return -EOPNOTSUPP; /* the rings carry everything */
	if (s->nlanes >= CMX_LANES_MAX)
		return -EMFILE;
	s->lanes[s->nlanes++] = c;
	cmx_session_ref(s);
	return 0;
}

void cmx_lane_detach(struct cmx_session *s, struct cmx_conn *c)
{
	for (unsigned i = 0; i < s->nlanes; i++)
		if (s->lanes[i] == c) {
			memmove(&s->lanes[i], &s->lanes[i + 1],
				(s->nlanes - i - 1) * sizeof(s->lanes[0]));
			s->nlanes--;
			cmx_session_unref(s);
			return;
		}
}

struct cmx_xfer *cmx_lane_xfer(struct cmx_session *s, uint64_t id)
{
	for (struct cmx_xfer *x = s->xfers; x; x = x->next)
		if (x->id == id)
			return x;
	return NULL;
}

void cmx_xfer_unlist(struct cmx_xfer *x)
{
	struct cmx_xfer **pp;

	if (!x->s)
		return;
	for (pp = &x->s->xfers; *pp && *pp != x; pp = &(*pp)->next)
		;
	if (*pp) {
		*pp = x->next;
		x->s->nxfers--;
	}
	x->s = NULL;
	cmx_xfer_put(x);
}

void cmx_xfer_put(struct cmx_xfer *x)
{
	if (--x->refs)
		return;
	/* Nothing writes into the region any more: a transfer that never
	 * ended gives it back unchanged as far as the guest knows. */
	if (!x->unmapped && clEnqueueUnmapMemObject(x->q, x->m, x->ptr, 0, NULL, NULL) == CL_SUCCESS)
		cmx_queue_flush(x->srv, x->q);
	if (x->gate) {
		clSetUserEventStatus(x->gate, CL_COMPLETE);
		clReleaseEvent(x->gate);
	}
	clReleaseMemObject(x->m);
	clReleaseCommandQueue(x->q);
	free(x);
}

void *cmx_lane_piece_begin(struct cmx_session *s, uint64_t transfer, uint64_t off, uint64_t len,
			   struct cmx_xfer **out)
{
	struct cmx_xfer *x = s ? cmx_lane_xfer(s, transfer) : NULL;

	if (!x || x->reading || !len || off > x->size || len > x->size - off ||
	    x->nranges == CMX_XFER_PIECES)
		return NULL;
	for (unsigned i = 0; i < x->nranges; i++)
		if (off < x->ranges[i][1] && x->ranges[i][0] < off + len)
			return NULL; /* overlaps a piece already taken */
	x->ranges[x->nranges][0] = off;
	x->ranges[x->nranges][1] = off + len;
	x->nranges++;
	x->refs++;
	*out = x;
	return (char *)x->ptr + off;
}

void cmx_lane_piece_end(struct cmx_xfer *x, uint64_t len)
{
	x->got += len;
	/* The last piece: the parked WriteLanesEnd goes on above. */
	if (x->got == x->size && x->end && x->s)
		x->end_fin(x);
	cmx_xfer_put(x);
}
