// SPDX-License-Identifier: MIT
// Completion fences (host/fence.h). A session keeps the guest ids of its
// newest kernel launches; at the end of each loop turn that saw one go to
// the driver, before each reply, and while the loop lingers before it
// sleeps (for the server's fence_linger_ns), the loop asks the oldest for their status
// and stores the fences of those that completed. A guest's wait
// for a command that finished a while ago then needs no round trip, and a
// client that keeps a few commands in flight refills the device without
// one. Nothing waits for a fence: a command not yet stored is answered by
// the daemon as before.
#include "fence.h"

#include <CL/cl.h>

#include "area.h"
#include "log.h"
#include "loop.h"
#include "object.h"
#include "server.h"
#include "session.h"

#define FENCE_LINGER_MIN_NS 50000

/* How long the loop keeps looking for the completion of commands it
 * tracks, once it has nothing else to do, is the server's fence_linger_ns;
 * the area's header says it, and a guest waiting for one looks for its
 * fence as long (guest/event.c) before it asks. */

/* Looks at every listed session of the server arg; whether any has
 * commands still running. */
static int poll_all(void *arg)
{
	struct cmx_fences *fs = &((struct cmx_server *)arg)->fences;
	struct cmx_session **pp = &fs->listed;
	uint64_t now = cmx_now_ns();

	/* The time between looks while something is tracked: how late a
	 * completion can be seen. */
	if (fs->listed && fs->looked_ns)
		cmx_hist_add(&fs->look, now - fs->looked_ns);
	fs->looked_ns = fs->listed ? now : 0;

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
	return fs->listed != NULL;
}

/* arg: the server. */
static void turn_end(void *arg)
{
	struct cmx_server *srv = arg;

	srv->fences.posted = 0;
	if (poll_all(srv)) {
		/* At least FENCE_LINGER_MIN_NS, the looks or not; longer while
		 * tracked commands run, as long as a listed session's area
		 * says (cmx_fence_spin_us()). */
		uint64_t us = 0;
		for (struct cmx_session *s = srv->fences.listed; s; s = s->fence_next)
			if (s->area && s->area->hdr.fence_spin_us > us)
				us = s->area->hdr.fence_spin_us;
		cmx_loop_linger(srv->loop, FENCE_LINGER_MIN_NS);
		cmx_loop_linger_with(srv->loop, us * 1000, poll_all, srv);
	}
}

uint32_t cmx_fence_spin_us(const struct cmx_server *srv, int rings)
{
	return (uint32_t)((rings ? FENCE_LINGER_MIN_NS : srv->fence_linger_ns) / 1000);
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
	cmx_area_fence_watch(s->area, id, 1);
	if (!s->fence_listed) {
		s->fence_listed = 1;
		s->fence_next = s->srv->fences.listed;
		s->srv->fences.listed = s;
	}
	if (!s->srv->fences.posted) {
		s->srv->fences.posted = 1;
		cmx_loop_post(s->srv->loop, turn_end, s->srv);
	}
}

void cmx_fence_poll(struct cmx_session *s)
{
	while (s->fence_n) {
		uint64_t id = s->fence_ids[s->fence_head];
		struct cmx_obj *o = cmx_session_obj(s, id, CMX_K_EVENT);
		cl_int st = CL_COMPLETE;
		int fenced = 0;

		/* Released by the guest, or poisoned: nobody can wait for it
		 * here. An error is the daemon's to answer. */
		if (o && o->h &&
		    clGetEventInfo(o->h, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				   NULL) == CL_SUCCESS) {
			if (st > CL_COMPLETE)
				return; /* running: what follows it mostly is too */
			if (st == CL_COMPLETE) {
				cmx_area_fence(s->area, id);
				s->srv->fences.stored++;
				s->srv->fences.stored_ns = cmx_now_ns();
				fenced = 1;
			}
		}
		if (!fenced)
			cmx_area_fence_watch(s->area, id, 0);
		s->fence_head = (uint8_t)((s->fence_head + 1) % CMX_FENCE_PEND);
		s->fence_n--;
	}
}

void cmx_fence_forget(struct cmx_session *s)
{
	struct cmx_session **pp = &s->srv->fences.listed;

	if (!s->fence_listed)
		return;
	/* Its guest asks the daemon for these now, at once. */
	for (unsigned i = 0; s->area && i < s->fence_n; i++)
		cmx_area_fence_watch(s->area, s->fence_ids[(s->fence_head + i) % CMX_FENCE_PEND], 0);
	while (*pp != s)
		pp = &(*pp)->fence_next;
	*pp = s->fence_next;
	s->fence_listed = 0;
	s->fence_n = 0;
}

void cmx_fence_launch(struct cmx_server *srv, uint64_t arrived)
{
	struct cmx_fences *fs = &srv->fences;

	/* A refill follows its fence within a linger; later is a new start. */
	if (fs->stored_ns && arrived > fs->stored_ns && arrived - fs->stored_ns < 5000000)
		cmx_hist_add(&fs->refill, arrived - fs->stored_ns);
	fs->stored_ns = 0;
	cmx_hist_add(&fs->launch, cmx_now_ns() - arrived);
}

void cmx_fence_report(struct cmx_server *srv)
{
	struct cmx_fences *fs = &srv->fences;

	if (fs->stored)
		cmx_info("fences: %llu stored; median / p90 / p99 / p99.9 (up to, us): a fence to "
			 "the next launch's arrival %u / %u / %u, a launch's arrival to the "
			 "driver's return %u / %u / %u, between looks %u / %u / %u / %u",
			 (unsigned long long)fs->stored, cmx_hist_quantile_us(&fs->refill, 500),
			 cmx_hist_quantile_us(&fs->refill, 900), cmx_hist_quantile_us(&fs->refill, 990),
			 cmx_hist_quantile_us(&fs->launch, 500), cmx_hist_quantile_us(&fs->launch, 900),
			 cmx_hist_quantile_us(&fs->launch, 990), cmx_hist_quantile_us(&fs->look, 500),
			 cmx_hist_quantile_us(&fs->look, 900), cmx_hist_quantile_us(&fs->look, 990),
			 cmx_hist_quantile_us(&fs->look, 999));
}
