// SPDX-License-Identifier: MIT
// The scheduler (docs/architecture.md, "Sharing the device"): no more than
// a short window of estimated device time on the device at once; the rest
// wait natively behind a gate user event per command, released in
// virtual-time order, where a tenant's virtual time grows by its measured
// device time over its weight.
#include "scheduler.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "exec.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "tenant.h"

#define MAX_DEPS 4
/* The cap's bucket holds at most this much device time (its window). */
#define CAP_WINDOW_NS (200ull * 1000 * 1000)
/* Commands on the device at once, whatever their estimates. */
#define MAX_RUNNING 1024

struct cmx_gate {
	struct cmx_tenant *t;
	uint64_t session;
	cl_event user;		 /* the gate, while held; NULL when enqueued ungated */
	cl_event done;		 /* the command's own event */
	cl_event deps[MAX_DEPS]; /* guest user events it waits for, not yet set */
	unsigned ndeps;
	uint64_t released, est; /* when it went on the device; charged estimate */
	cl_command_queue queue;
	struct lane *lane;	    /* while on the device */
	struct cmx_gate *next_held; /* while held: the tenant's queue; then its lane */
	int has_cb;		    /* its completion is reported */
	int finished;		    /* reported by a later one's: awaits its own */
	int in_order;
	cl_event wait_buf[]; /* the extended wait list */
};

/*
 * What one native queue has on the device, in the order it was enqueued.
 * An in-order queue finishes its commands in that order, so one completion
 * callback, on the newest, reports them all: it is set once per loop turn,
 * not per command (callbacks are what a driver makes expensive).
 */
struct lane {
	cl_command_queue queue;
	int in_order, dirty;
	struct cmx_gate *head, **tail;
	struct lane *next;
};

struct cmx_sched {
	struct cmx_server *srv;
	uint64_t window_ns;   /* estimated device time let onto the device */
	uint64_t running_est; /* estimated device time of what is there */
	unsigned running, held;
	unsigned busy; /* tenants with commands in flight (inflight > 0) */
	uint64_t vclock;	  /* virtual time of the last command released */
	uint64_t last_done;	  /* when the device last finished a command */
	struct cmx_tenant *ready; /* tenants with held commands */
	struct lane *lanes;
	int flush_posted;
	struct cmx_io timer_io;
	struct __kernel_timespec timer_ts;
	int timer_armed;
};

static void kick(struct cmx_sched *sc);

/* Every change of a tenant's in-flight count goes through these, so that
 * `busy` follows it. */
static void inflight_inc(struct cmx_sched *sc, struct cmx_tenant *t)
{
	if (!t->inflight++)
		sc->busy++;
}

static void inflight_dec(struct cmx_sched *sc, struct cmx_tenant *t)
{
	if (!--t->inflight)
		sc->busy--;
}

/* Cleared once the daemon has stopped its loop: a driver thread's late
 * callback then posts nothing. */
static atomic_int alive = 1;

int cmx_sched_create(struct cmx_server *srv, uint64_t window_us)
{
	struct cmx_sched *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return -ENOMEM;
	sc->srv = srv;
	sc->window_ns = (window_us ? window_us : 1) * 1000;
	srv->sched = sc;
	return 0;
}

/* A tenant's next command's device time: its running average, or, before
 * anything of it was measured, the whole window (one at a time until then:
 * a newcomer cannot flood the device with commands of unknown length). */
static uint64_t estimate(const struct cmx_sched *sc, const struct cmx_tenant *t)
{
	return t->est_ns ? t->est_ns : sc->window_ns;
}

/* Room on the device for a command estimated at est: always for one, then
 * while the estimates of what is there fit the window. */
static int room(struct cmx_sched *sc, uint64_t est)
{
	return !sc->running ||
	       (sc->running < MAX_RUNNING && sc->running_est + est <= sc->window_ns);
}

int cmx_sched_busy(struct cmx_server *srv)
{
	struct cmx_sched *sc = srv->sched;

	return sc && (sc->running || sc->held || sc->lanes);
}

void cmx_sched_destroy(struct cmx_server *srv)
{
	atomic_store(&alive, 0);
	free(srv->sched);
	srv->sched = NULL;
}

/* Cap: a token bucket of device time, refilled at cap% of wall time. */
static int cap_ok(struct cmx_tenant *t, uint64_t now)
{
	int64_t full = (int64_t)(CAP_WINDOW_NS * t->q.cap / 100);

	if (!t->q.cap)
		return 1;
	t->cap_tokens += (int64_t)((now - t->cap_stamp) * t->q.cap / 100);
	t->cap_stamp = now;
	if (t->cap_tokens > full)
		t->cap_tokens = full;
	return t->cap_tokens > 0;
}

/* A head whose guest user events are not all set would hold a device slot
 * without running: it waits its turn until they are. */
static int deps_done(struct cmx_gate *g)
{
	while (g->ndeps) {
		cl_int st = CL_COMPLETE;
		clGetEventInfo(g->deps[g->ndeps - 1], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st),
			       &st, NULL);
		if (st > CL_COMPLETE)
			return 0;
		clReleaseEvent(g->deps[--g->ndeps]);
	}
	return 1;
}

static void CL_CALLBACK done_cb(cl_event e, cl_int status, void *arg);
static void done_post(void *arg);

static void watch(struct cmx_gate *g)
{
	g->has_cb = 1;
	/* Without a callback nothing would report it: count it done now. */
	if (clSetEventCallback(g->done, CL_COMPLETE, done_cb, g))
		done_post(g);
}

/* Once per loop turn: a callback on each in-order lane's newest command. */
static void flush_post(void *arg)
{
	struct cmx_sched *sc = arg;

	sc->flush_posted = 0;
	for (struct lane *l = sc->lanes; l; l = l->next) {
		struct cmx_gate *last;
		if (!l->dirty || !l->head)
			continue;
		l->dirty = 0;
		last = (struct cmx_gate *)((char *)l->tail - offsetof(struct cmx_gate, next_held));
		if (!last->has_cb)
			watch(last);
	}
}

static void lane_add(struct cmx_sched *sc, struct cmx_gate *g, int in_order)
{
	struct lane *l;

	for (l = sc->lanes; l && l->queue != g->queue; l = l->next)
		;
	if (!l) {
		l = calloc(1, sizeof(*l));
		if (!l) {
			g->lane = NULL;
			watch(g);
			return;
		}
		l->queue = g->queue;
		l->in_order = in_order;
		l->tail = &l->head;
		l->next = sc->lanes;
		sc->lanes = l;
	}
	g->lane = l;
	g->next_held = NULL;
	*l->tail = g;
	l->tail = &g->next_held;
	if (!l->in_order) {
		watch(g);
		return;
	}
	l->dirty = 1;
	if (!sc->flush_posted) {
		sc->flush_posted = 1;
		cmx_loop_post(sc->srv->loop, flush_post, sc);
	}
}

static void charge_start(struct cmx_sched *sc, struct cmx_gate *g, uint64_t now)
{
	struct cmx_tenant *t = g->t;

	g->released = now;
	g->est = estimate(sc, t);
	sc->running++;
	sc->running_est += g->est;
	sc->vclock = t->vtime;
	/* Charged an estimate now, corrected on completion, so a tenant does
	 * not take the whole window before its first command is measured. */
	t->vtime += g->est / t->q.weight;
	if (t->q.cap)
		t->cap_tokens -= (int64_t)g->est;
	/* Last: when no callback can be set, this completes (and frees) g. */
	lane_add(sc, g, g->in_order);
}

static void ready_add(struct cmx_sched *sc, struct cmx_tenant *t)
{
	if (t->ready)
		return;
	t->ready = 1;
	t->next_ready = sc->ready;
	sc->ready = t;
}

static void timer_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_sched *sc =
	    (struct cmx_sched *)((char *)io - offsetof(struct cmx_sched, timer_io));

	sc->timer_armed = 0;
	kick(sc);
}

static void timer_arm(struct cmx_sched *sc, uint64_t ns)
{
	if (sc->timer_armed)
		return;
	sc->timer_armed = 1;
	sc->timer_io.cb = timer_done;
	sc->timer_ts.tv_sec = (long long)(ns / 1000000000ull);
	sc->timer_ts.tv_nsec = (long long)(ns % 1000000000ull);
	io_uring_prep_timeout(cmx_loop_sqe(sc->srv->loop, &sc->timer_io), &sc->timer_ts, 0, 0);
}

/* Releases held commands while the device has room, lowest virtual time
 * first. */
static void kick(struct cmx_sched *sc)
{
	uint64_t now = cmx_now_ns();

	for (;;) {
		struct cmx_tenant *best = NULL, **pp, **best_pp = NULL;
		cl_event user;
		int capped = 0;

		for (pp = &sc->ready; *pp;) {
			struct cmx_tenant *t = *pp;
			if (!t->held) {
				*pp = t->next_ready;
				t->ready = 0;
				continue;
			}
			if (!cap_ok(t, now)) {
				capped = 1;
				t->capped++;
			} else if (deps_done(t->held) && (!best || t->vtime < best->vtime)) {
				best = t;
				best_pp = pp;
			}
			pp = &t->next_ready;
		}
		if (!best) {
			if (capped)
				timer_arm(sc, 2 * 1000 * 1000);
			return;
		}
		if (!room(sc, estimate(sc, best)))
			return;
		struct cmx_gate *g = best->held;
		best->held = g->next_held;
		if (!best->held) {
			best->held_tail = &best->held;
			*best_pp = best->next_ready;
			best->ready = 0;
		}
		sc->held--;
		user = g->user;
		g->user = NULL;
		charge_start(sc, g, now);
		clSetUserEventStatus(user, CL_COMPLETE);
		clReleaseEvent(user);
	}
}

static void gate_free(struct cmx_gate *g)
{
	for (unsigned i = 0; i < g->ndeps; i++)
		clReleaseEvent(g->deps[i]);
	clReleaseEvent(g->done);
	free(g);
}

/* g's command finished on the device, in ns of device time. */
static void account(struct cmx_sched *sc, struct cmx_gate *g, uint64_t ns, uint64_t now)
{
	struct cmx_tenant *t = g->t;
	uint64_t undo = g->est / t->q.weight;

	sc->running--;
	sc->running_est -= g->est;
	t->est_ns = t->est_ns ? (t->est_ns * 7 + ns) / 8 : ns;
	/* The estimate charged at release, replaced by the measure. */
	t->vtime += ns / t->q.weight;
	t->vtime -= undo < t->vtime ? undo : t->vtime;
	if (t->q.cap)
		t->cap_tokens -= (int64_t)ns - (int64_t)g->est;
	cmx_tenant_account(t, ns, now);
	inflight_dec(sc, t);
	t->completed++;
}

/* g completed: so did everything before it in its in-order lane. */
static void done_post(void *arg)
{
	struct cmx_gate *g = arg, *x;
	struct cmx_sched *sc = cmx_srv->sched;
	struct lane *l = g->lane;
	uint64_t now = cmx_now_ns(), from, total, k = 1;

	if (g->finished) {
		gate_free(g);
		return;
	}
	if (!l) {
		from = g->released > sc->last_done ? g->released : sc->last_done;
		account(sc, g, now > from ? now - from : 0, now);
		gate_free(g);
		sc->last_done = now;
		kick(sc);
		return;
	}
	if (l->in_order)
		for (x = l->head, k = 1; x != g; x = x->next_held)
			k++;
	/* The device's time since it last finished something, or since the
	 * first of these started if later: serial device time, shared evenly
	 * among the k commands this completion reports. */
	x = l->in_order ? l->head : g;
	from = x->released > sc->last_done ? x->released : sc->last_done;
	total = now > from ? now - from : 0;
	sc->last_done = now;
	for (uint64_t i = 0; i < k; i++) {
		struct cmx_gate **pp = &l->head;
		if (!l->in_order)
			while (*pp != g)
				pp = &(*pp)->next_held;
		x = *pp;
		*pp = x->next_held;
		if (l->tail == &x->next_held)
			l->tail = pp;
		account(sc, x, total / k, now);
		/* One whose own callback is still to come is freed by it. */
		if (x->has_cb && x != g)
			x->finished = 1;
		else
			gate_free(x);
	}
	if (!l->head) {
		struct lane **lp = &sc->lanes;
		while (*lp != l)
			lp = &(*lp)->next;
		*lp = l->next;
		free(l);
	}
	kick(sc);
}

static void CL_CALLBACK done_cb(cl_event e, cl_int status, void *arg)
{
	if (atomic_load(&alive)) /* pairs with the store in cmx_sched_destroy() */
		cmx_loop_post(cmx_srv->loop, done_post, arg);
}

static void kick_post(void *arg)
{
	kick(cmx_srv->sched);
}

static void CL_CALLBACK dep_cb(cl_event e, cl_int status, void *arg)
{
	if (atomic_load(&alive))
		cmx_loop_post(cmx_srv->loop, kick_post, NULL);
}

/*
 * No other tenant has a command held or on the device. Gates are then pure
 * cost, and some drivers make them dear: NVIDIA ran 1.7k kernels/s with
 * 2,000 gated commands pending against 94k/s ungated (docs/performance.md).
 * The price: a tenant that becomes busy waits once behind what the lone
 * one had already queued; from then on both are gated and shared fairly.
 */
static int alone(const struct cmx_sched *sc, const struct cmx_tenant *t)
{
	return sc->busy == (t->inflight ? 1u : 0u);
}

int cmx_sched_begin(struct cmx_call *c, cl_uint nwait, void *const *wait, struct cmx_sched_cmd *cmd)
{
	struct cmx_sched *sc = cmx_srv->sched;
	struct cmx_tenant *t = c->s->tenant;
	struct cmx_obj *q = cmx_session_obj(c->s, ((struct cmx_ref *)c->in)->id, CMX_K_QUEUE);
	struct cmx_gate *g;
	cl_int e;

	cmd->nwait = nwait;
	cmd->wait = (const cl_event *)wait;
	cmd->g = NULL;
	if (!sc || !q)
		return CL_SUCCESS;
	if (t->inflight >= t->q.inflight) {
		t->refused++;
		return CL_OUT_OF_RESOURCES;
	}
	g = calloc(1, sizeof(*g) + (nwait + 1) * sizeof(cl_event));
	if (!g)
		return CL_OUT_OF_HOST_MEMORY;
	g->t = t;
	g->session = c->s->id;
	g->queue = q->h;
	g->in_order = !(q->flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
	for (cl_uint i = 0; i < nwait; i++) {
		cl_command_type type = 0;
		cl_int st = CL_COMPLETE;
		g->wait_buf[i] = wait[i];
		clGetEventInfo(wait[i], CL_EVENT_COMMAND_TYPE, sizeof(type), &type, NULL);
		if (type != CL_COMMAND_USER || g->ndeps == MAX_DEPS)
			continue;
		clGetEventInfo(wait[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
		if (st > CL_COMPLETE &&
		    clSetEventCallback(wait[i], CL_COMPLETE, dep_cb, NULL) == 0) {
			clRetainEvent(wait[i]);
			g->deps[g->ndeps++] = wait[i];
		}
	}
	cmd->g = g;
	/* The device has room and nobody waits, or the tenant is alone with
	 * work (nobody to be fair to) and uncapped: straight on, no gate. */
	if (!sc->held && !g->ndeps && cap_ok(t, cmx_now_ns()) &&
	    ((!t->q.cap && alone(sc, t)) || room(sc, estimate(sc, t))))
		return CL_SUCCESS;
	g->user = clCreateUserEvent(q->ctx, &e);
	if (!g->user) {
		cmd->g = NULL;
		for (unsigned i = 0; i < g->ndeps; i++)
			clReleaseEvent(g->deps[i]);
		free(g);
		return e ? e : CL_OUT_OF_RESOURCES;
	}
	g->wait_buf[nwait] = g->user;
	cmd->nwait = nwait + 1;
	cmd->wait = g->wait_buf;
	return CL_SUCCESS;
}

void cmx_sched_end(struct cmx_sched_cmd *cmd, cl_int err, cl_event ev)
{
	struct cmx_sched *sc = cmx_srv->sched;
	struct cmx_gate *g = cmd->g;
	struct cmx_tenant *t;

	if (!g)
		return;
	t = g->t;
	if (err) {
		if (g->user) {
			clSetUserEventStatus(g->user, CL_COMPLETE);
			clReleaseEvent(g->user);
		}
		for (unsigned i = 0; i < g->ndeps; i++)
			clReleaseEvent(g->deps[i]);
		free(g);
		return;
	}
	clRetainEvent(ev);
	g->done = ev;
	inflight_inc(sc, t);
	t->launched++;
	if (!g->user) {
		charge_start(sc, g, cmx_now_ns());
		return;
	}
	g->next_held = NULL;
	sc->held++;
	*t->held_tail = g;
	t->held_tail = &g->next_held;
	/* A tenant back from idle starts at the present, not with credit. */
	if (!t->ready && t->vtime < sc->vclock)
		t->vtime = sc->vclock;
	ready_add(sc, t);
	kick(sc);
}

void cmx_sched_drop(struct cmx_session *s)
{
	struct cmx_tenant *t = s->tenant;
	struct cmx_gate **pp = &t->held;

	if (!cmx_srv->sched)
		return;
	/* Failing the gate fails the command; its callback still accounts it. */
	while (*pp) {
		struct cmx_gate *g = *pp;
		if (g->session != s->id) {
			pp = &g->next_held;
			continue;
		}
		*pp = g->next_held;
		cmx_srv->sched->held--;
		clSetUserEventStatus(g->user, CL_OUT_OF_RESOURCES);
		clReleaseEvent(g->user);
		inflight_dec(cmx_srv->sched, g->t);
		g->t->completed++;
		gate_free(g);
	}
	t->held_tail = &t->held;
	while (*t->held_tail)
		t->held_tail = &(*t->held_tail)->next_held;
}
