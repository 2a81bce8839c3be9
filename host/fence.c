// SPDX-License-Identifier: MIT
// Completion fences (host/fence.h). A session keeps the guest ids of its
// newest kernel launches; at the end of each loop turn that saw one go to
// the driver, before each reply, and while the loop lingers before it
// sleeps (for FENCE_LINGER_NS), the loop asks the oldest for their status
// and stores the fences of those that completed. A guest's wait
// for a command that finished a while ago then needs no round trip, and a
// client that keeps a few commands in flight refills the device without
// one. Nothing waits for a fence: a command not yet stored is answered by
// the daemon as before.
#include "fence.h"

#include <CL/cl.h>

#include "area.h"
#include "loop.h"
#include "object.h"
#include "server.h"
#include "session.h"

static struct {
	struct cmx_session *listed; /* sessions with commands to look at */
	int posted;		    /* turn_end() is posted */
} fs;

/* How long the loop keeps looking for the completion of commands it
 * tracks, once it has nothing else to do; a guest waiting for one looks
 * for its fence as long (guest/event.c) before it asks. */
#define FENCE_LINGER_NS 50000

/* Looks at every listed session; whether any has commands still running. */
static int poll_all(void)
{
	struct cmx_session **pp = &fs.listed;

	while (*pp) {
		struct cmx_session *s = *pp;
		cmx_fence_poll(s);
		if (s->fence_n) {
			pp = &s->fence_next;
			continue;
		}
		*pp = s->fence_next;
		s->fence_listed = 0;
	}
	return fs.listed != NULL;
}

static void turn_end(void *arg)
{
	(void)arg;
	fs.posted = 0;
	if (poll_all())
		cmx_loop_linger_with(cmx_srv->loop, FENCE_LINGER_NS, poll_all);
}

void cmx_fence_track(struct cmx_session *s, uint64_t id)
{
	if (!id || !s->area || !s->area->hdr.fence_n || s->closed)
		return;
	/* Full: the command is answered by the daemon when waited for; the
	 * older ones, which a client waits for first, stay. */
	if (s->fence_n == CMX_FENCE_PEND)
		return;
	s->fence_ids[(s->fence_head + s->fence_n++) % CMX_FENCE_PEND] = id;
	if (!s->fence_listed) {
		s->fence_listed = 1;
		s->fence_next = fs.listed;
		fs.listed = s;
	}
	if (!fs.posted) {
		fs.posted = 1;
		cmx_loop_post(cmx_srv->loop, turn_end, NULL);
	}
}

void cmx_fence_poll(struct cmx_session *s)
{
	while (s->fence_n) {
		uint64_t id = s->fence_ids[s->fence_head];
		struct cmx_obj *o = cmx_session_obj(s, id, CMX_K_EVENT);
		cl_int st = CL_COMPLETE;

		/* Released by the guest, or poisoned: nobody can wait for it
		 * here. An error is the daemon's to answer. */
		if (o && o->h &&
		    clGetEventInfo(o->h, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				   NULL) == CL_SUCCESS) {
			if (st > CL_COMPLETE)
				return; /* running: what follows it mostly is too */
			if (st == CL_COMPLETE)
				cmx_area_fence(s->area, id);
		}
		s->fence_head = (uint8_t)((s->fence_head + 1) % CMX_FENCE_PEND);
		s->fence_n--;
	}
}

void cmx_fence_forget(struct cmx_session *s)
{
	struct cmx_session **pp = &fs.listed;

	if (!s->fence_listed)
		return;
	while (*pp != s)
		pp = &(*pp)->fence_next;
	*pp = s->fence_next;
	s->fence_listed = 0;
	s->fence_n = 0;
}
