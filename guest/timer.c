// SPDX-License-Identifier: MIT
// Host timers (clGetDeviceAndHostTimer, clGetHostTimer): the host timer is
// the guest's clock, and the device's is that clock plus an offset measured
// against the daemon's device timer.
//
// The offset comes from round trips: the guest reads its clock (g0), the
// daemon reads the device timer (d), the guest reads its clock again (g1);
// d was read at some guest time in [g0, g1], so offset = d - (g0 + g1) / 2
// is off by at most (g1 - g0) / 2. Of SAMPLES round trips the shortest
// gives the offset and that bound. It is measured at the first call for a
// device and again once older than REFRESH_NS, so that the two clocks'
// drift adds at most its rate times REFRESH_NS (docs/compatibility.md gives
// the bounds measured).
#include "timer.h"

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include "session.h"
#include "stubs.gen.h"

#define SAMPLES	   5
#define REFRESH_NS 1000000000ull
#define SLOTS	   64

struct calib {
	struct cmx_session *s; /* NULL: free */
	uint64_t id;
	cl_int err;	/* the daemon's answer when the device has no timer */
	uint64_t at;	/* guest time of the measurement */
	int64_t offset; /* device - guest */
};

static struct calib slots[SLOTS];
static unsigned next_slot;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

uint64_t cmx_timer_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One round trip: 0 with *g0, *d, *g1, else the daemon's error or a
 * transport failure's. */
static cl_int sample(struct cmx_session *s, uint64_t id, uint64_t *g0, uint64_t *d, uint64_t *g1)
{
	struct cmx_GetDeviceAndHostTimer_in in = {.device = {.id = id}};
	struct cmx_GetDeviceAndHostTimer_out out = {0};
	struct cmx_reply r;
	cl_int e;
	int rc;

	*g0 = cmx_timer_now();
	rc = cmx_rpc_GetDeviceAndHostTimer(s, &in, &out, &r);
	*g1 = cmx_timer_now();
	if (rc)
		return CL_OUT_OF_RESOURCES;
	e = r.status;
	cmx_reply_fini(&r);
	*d = out.device_ts;
	return e;
}

/* Measures c's offset again (lock held). */
static void measure(struct calib *c)
{
	uint64_t best = UINT64_MAX, g0, d, g1, at = 0;
	int64_t offset = 0;

	for (int i = 0; i < SAMPLES; i++) {
		cl_int e = sample(c->s, c->id, &g0, &d, &g1);

		if (e) {
			/* A device without the timer says so at once; a
			 * later failure keeps the measurement there is. */
			if (!c->at)
				c->err = e;
			return;
		}
		if (g1 - g0 < best) {
			best = g1 - g0;
			at = g0 + best / 2;
			offset = (int64_t)(d - at);
		}
	}
	c->at = at;
	c->offset = offset;
	c->err = CL_SUCCESS;
}

/* The slot of (s, id), measured fresh enough (lock held). */
static struct calib *calib_get(struct cmx_session *s, uint64_t id, uint64_t now)
{
	struct calib *c = NULL;

	for (unsigned i = 0; i < SLOTS && !c; i++)
		if (slots[i].s == s && slots[i].id == id)
			c = &slots[i];
	if (!c) {
		/* The oldest goes: a session that ended leaves its slots. */
		c = &slots[next_slot++ % SLOTS];
		*c = (struct calib){.s = s, .id = id};
	}
	if (!c->err && (!c->at || now - c->at > REFRESH_NS))
		measure(c);
	return c;
}

cl_int cmx_timer_read(struct cmx_session *s, uint64_t id, cl_ulong *dev, cl_ulong *host)
{
	struct calib *c;
	uint64_t now = cmx_timer_now();
	cl_int e;

	pthread_mutex_lock(&lock);
	c = calib_get(s, id, now);
	e = c->err;
	if (!e && dev) {
		/* Read again: the measurement may have taken a while. */
		now = cmx_timer_now();
		*dev = (cl_ulong)(now + (uint64_t)c->offset);
	}
	pthread_mutex_unlock(&lock);
	if (!e && host)
		*host = now;
	return e;
}
