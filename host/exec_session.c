// SPDX-License-Identifier: MIT
// Handlers: session housekeeping (Ping, GetStats, OpenArea).
#include "exec.h"
#include "area.h"
#include "conn.h"
#include "fence.h"
#include "shm.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

int cmx_h_Hello(struct cmx_call *c, struct cmx_Hello_in *in, struct cmx_Hello_out *out)
{
	/* Hello is answered by cmx_dispatch_hello() before a session exists; a
	 * second one on an open session is an error. */
	return CL_INVALID_OPERATION;
}

int cmx_h_Auth(struct cmx_call *c, struct cmx_Auth_in *in, struct cmx_Auth_out *out)
{
	/* Auth is answered by cmx_dispatch_auth() before Hello; later it is an error. */
	return CL_INVALID_OPERATION;
}

int cmx_h_Ping(struct cmx_call *c, struct cmx_Ping_in *in, struct cmx_Ping_out *out)
{
	return CL_SUCCESS;
}

/* Counter order is part of the protocol (docs/protocol.md). */
int cmx_h_GetStats(struct cmx_call *c, struct cmx_GetStats_in *in, struct cmx_GetStats_out *out)
{
	struct cmx_session *s = c->s;
	uint64_t *v = malloc(9 * sizeof(*v));

	if (!v)
		return CL_OUT_OF_HOST_MEMORY;
	v[0] = s->messages;
	v[1] = s->sync_calls;
	v[2] = s->recvs;
	v[3] = s->objs.count;
	v[4] = s->bytes;
	v[5] = s->async_errors;
	v[6] = s->srv->objects;
	v[7] = s->srv->bytes;
	v[8] = (uint64_t)(int64_t)s->last_async_error;
	c->scratch = v;
	out->counters.v = v;
	out->counters.n = 9;
	return CL_SUCCESS;
}

/* The shared memory of the session: made once, handed over as a memfd with
 * the reply (host/area.c). */
int cmx_h_OpenArea(struct cmx_call *c, struct cmx_OpenArea_in *in, struct cmx_OpenArea_out *out)
{
	/* CMX_AREA_HEAP needs nothing made: it grants CreateBufferArea. */
	unsigned flags = (unsigned)(in->flags & (CMX_AREA_RINGS | CMX_AREA_HEAP));
	int fd;
	struct sockaddr_storage sa = { 0 };
	socklen_t len = sizeof(sa);

	/* Only a Unix socket can carry the memfd, and only a peer on this
	 * host can map it. A restored session's area, laid out as before,
	 * goes to its resuming guest once (host/restore.c). */
	int restored = c->s->area && c->s->area_fd >= 0 && !c->s->shm &&
		       !(flags & CMX_AREA_RINGS) == !c->s->area->hdr.ring_len[0];

	if (restored) {
		fd = c->s->area_fd;
		c->s->area_fd = -1;
	} else if (c->s->area || (in->flags & ~(uint64_t)(CMX_AREA_RINGS | CMX_AREA_HEAP)) ||
		   !c->s->conn || getsockname(c->s->conn->fd, (struct sockaddr *)&sa, &len) ||
		   sa.ss_family != AF_UNIX) {
		return CL_INVALID_OPERATION;
	} else if (cmx_area_create(in->size, flags, &c->s->area, &fd)) {
		return CL_OUT_OF_HOST_MEMORY;
	} else {
		cmx_area_fence_spin(c->s->area,
				    cmx_fence_spin_us(c->s->srv, (flags & CMX_AREA_RINGS) != 0));
	}
	c->rfd[0] = fd;
	/* shm: the rings take over once this reply is out. */
	if ((flags & CMX_AREA_RINGS) && cmx_shm_create(c->s, &c->rfd[1])) {
		if (!restored) {
			cmx_area_put(c->s->area);
			c->s->area = NULL;
		}
		close(c->rfd[0]);
		c->rfd[0] = -1;
		return CL_OUT_OF_HOST_MEMORY;
	}
	out->size = c->s->area->size;
	out->flags = flags;
	return CL_SUCCESS;
}
