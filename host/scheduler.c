// SPDX-License-Identifier: MIT
// The scheduler (docs/architecture.md, "Sharing the device"): no more than
// a short window of estimated device time on the device at once; the rest
// is held in the daemon, each command's guest event standing in as a
// placeholder, and enqueued in virtual-time order, where a tenant's virtual
// time grows by its measured device time over its weight.
#include "scheduler.h"

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call.h"
#include "complete.h"
#include "ctl.h"
#include "exec.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "tenant.h"

#define MAX_DEPS 4
/* The cap's bucket holds at most this much device time (its window). */
#define CAP_WINDOW_NS (200ull * 1000 * 1000)
/* Commands on the device at once, whatever their estimates: enough to keep
 * a device busy with tiny kernels (one client with 4 in flight saturates
 * the H100), few enough that the rest waits here, where weights act. */
#define MAX_RUNNING 16
/*
 * Turns. The tenants of a group have native contexts of their own, and a
 * device given work from several contexts at once switches between them
 * (NVIDIA time-slices them, and each switch costs device time): the group's
 * tenants take turns instead. While one holds the turn, only its commands
 * are released, up to TURN_DEPTH windows of estimated device time (the
 * device never waits for a completion report); the turn passes after
 * TURN_LEN windows, or at once when its holder has nothing held or on the
 * device, to the ready tenant with the lowest virtual time, so weights
 * decide how often each gets one. A tenant back from idle (a latency probe,
 * an interactive client) ends the turn after half a window and goes next.
 * Neither a lone tenant nor a group sharing one context takes turns.
 */
#define TURN_LEN   4
#define TURN_DEPTH 2
/* A turn's holder refilling its queue, where the driver slices contexts
 * (turn_over()). */
#define REFILL_SLICED_NS (150ull * 1000)
/*
 * The arbiter between workers (host/ctl.h): a turn ends once nothing was
 * launched for share_idle_ns() and nothing is on the device (a tenant that
 * waits for each command is not idle between them). Where the driver
 * time-slices contexts (NVIDIA) a client refills its queue within tens of
 * us of a completion, and a turn held by a tenant that launches once a
 * millisecond idled the device for the others: a probe beside 8 busy
 * tenants waited a median 185 ms with 5 ms here. A worker held for
 * SHARE_HOLD_MAX_NS without a word from the front end launches at will
 * again: a lost packet must not stall it.
 */
#define SHARE_IDLE_NS	     (5ull * 1000 * 1000)
#define SHARE_IDLE_SLICED_NS (500ull * 1000)
#define SHARE_HOLD_MAX_NS    (5ull * 1000 * 1000 * 1000)

static uint64_t share_idle_ns(const struct cmx_server *srv)
{
	return srv->slices_contexts ? SHARE_IDLE_SLICED_NS : SHARE_IDLE_NS;
}
/* Buckets of the placeholder and kernel maps (powers of two). */
#define PH_BUCKETS 1024
#define K_BUCKETS  256

/*
 * One scheduled command. Held: op is set, the guest's event is the native
 * user event ph (a placeholder nothing but the daemon completes) and the
 * command waits on its tenant's FIFO. Released: op is enqueued, done is its
 * event, the guest's id and its queue's last event now name done, and ph is
 * completed with done's status when the scheduler learns done completed
 * (at once, with a callback of its own, when something native waits on ph:
 * `exposed`).
 *
 * A lone tenant's launches that go straight to the driver share one ticket
 * per in-order queue and loop turn (`n` commands, `done` the newest): they
 * finish in order, and a ticket per launch cost each launch an allocation,
 * an accounting and its event's last release on the loop, a large part of
 * what an empty kernel costs PoCL. The ticket takes launches until its
 * completion is watched (flush_post()).
 */
struct cmx_ticket {
	struct cmx_server *srv;
	struct cmx_tenant *t;
	uint64_t session, event_id, queue_id;
	struct cmx_sched_op *op; /* while held */
	cl_event ph;		 /* placeholder, until accounted */
	cl_event done;		 /* the command's own event */
	cl_event deps[MAX_DEPS]; /* guest user events it waits for, not yet set */
	unsigned ndeps;
	uint64_t released, est; /* when it went on the device; charged estimate */
	unsigned n;		/* commands it stands for: done and those before it */
	cl_command_queue queue;
	struct runlist *runlist;      /* its queue's */
	struct cmx_ticket *next_held; /* while held: the tenant's FIFO; then its runlist */
	struct cmx_ticket *next_q;    /* while held: its runlist's held list */
	struct cmx_ticket *next_ph;   /* the placeholder map's chain */
	int has_cb;		      /* a completion callback is set on it */
	unsigned reports;	      /* completion reports (callback, poller) to come */
	int finished;		      /* accounted: freed once its reports have come */
	int in_order, exposed;
	int launch;	     /* a kernel launch (CMX_OPF_HOLDABLE), not a copy or fill */
	int waits;	     /* it went to the driver with a wait list */
	uint64_t seq;	     /* the scheduler's count when it went (the watchdog's name) */
	cl_uint nwait;	     /* held: its wait list (retained) */
	cl_event wait_buf[]; /* the wait list */
};

/*
 * What one native queue has in the scheduler, in the order it was enqueued:
 * held commands, then those on the device. An in-order queue finishes its
 * commands in order, so one completion callback, on the newest, reports them
 * all: it is set once per loop turn, not per command (callbacks are what a
 * driver makes expensive).
 */
struct runlist {
	cl_command_queue queue;
	uint64_t session;
	int in_order, dirty;
	int unflushed;		   /* released into since the last clFlush */
	struct cmx_ticket *waiter; /* the command its poller watches */
	struct cmx_ticket *polled; /* the loop's poll of it: the command (a report) */
	uint64_t polled_since;
	struct runlist *poll_next;	     /* the scheduler's polled runlists */
	struct cmx_ticket *head, **tail;     /* on the device */
	struct cmx_ticket *held, *held_last; /* held, oldest first */
	uint64_t dog_seq, dog_since;	     /* its oldest unfinished command, since when */
	struct runlist *next;
};

/* A kernel with held launches: clSetKernelArg on it clones it first. */
struct kheld {
	cl_kernel k;
	unsigned n;
	struct kheld *next;
};

/* A buffer or sampler the session released while its commands were held. */
struct kept {
	uint64_t session;
	unsigned kind;
	void *h;
	struct kept *next;
};

struct cmx_sched {
	struct cmx_server *srv;
	uint64_t window_ns;   /* estimated device time let onto the device */
	uint64_t running_est; /* estimated device time of what is there */
	unsigned running, held;
	unsigned busy;		 /* tenants with commands in flight (inflight > 0) */
	unsigned phs;		 /* placeholders in the map */
	unsigned unflushed;	 /* runlists released into since the last flush */
	uint64_t vclock;	 /* virtual time of the last command released */
	uint64_t last_done;	 /* when the device last finished a command */
	struct cmx_tenant *turn; /* who holds the turn, if anybody */
	uint64_t turn_start, turn_end;
	uint64_t turn_idle;	  /* when its holder last ran out of commands */
	int turn_fresh;		  /* its holder came back from idle for it */
	struct cmx_tenant *ready; /* tenants with held commands */
	struct runlist *runlists;
	struct kept *kept;
	int flush_posted;
	/* The loop's completion polls (runlist_poll()). */
	struct runlist *polled;
	int poll_posted, poll_armed;
	uint64_t poll_wait_ns;
	struct cmx_io poll_io;
	struct __kernel_timespec poll_ts;
	struct cmx_io timer_io, update_io;
	struct __kernel_timespec timer_ts;
	uint64_t timer_at; /* when the armed timer fires */
	int timer_armed;
	struct cmx_io dog_io; /* the kernel-time watchdog (watchdog()) */
	struct __kernel_timespec dog_ts;
	int dog_armed;
	uint64_t seq; /* commands gone to the device */
	/* The arbiter's say (cmx_sched_share()): a mode of enum
	 * cmx_share_mode, since when, and a turn's number and end. */
	unsigned share;
	int turned; /* the turn is over and TURNED was sent */
	uint64_t share_since, share_seq, share_end;
	/* What the device did for this worker in its turn: commands finished
	 * and their device time (the debug log's line at TURNED). */
	uint64_t turn_done, turn_dev_ns;
	int turn_late;	    /* its end came with commands on the device */
	uint64_t beat;	    /* the last BUSY */
	uint64_t last_work; /* the last command scheduled */
	/* The last launching tenant keeps a shallow queue (shallow()): said
	 * with BUSY and TURNED. */
	int shallow;
	struct cmx_ticket *ph_map[PH_BUCKETS];
	struct kheld *k_map[K_BUCKETS];
};

static void kick(struct cmx_sched *sc);
static int alone(const struct cmx_sched *sc, const struct cmx_tenant *t);

/* Every change of a tenant's in-flight count goes through these, so that
 * `busy` follows it. */
static void inflight_inc(struct cmx_sched *sc, struct cmx_tenant *t)
{
	if (!t->inflight++)
		sc->busy++;
}

static void inflight_sub(struct cmx_sched *sc, struct cmx_tenant *t, unsigned n)
{
	t->inflight -= n;
	if (!t->inflight) {
		sc->busy--;
		if (sc->turn == t)
			sc->turn_idle = cmx_now_ns();
	}
}

static void inflight_dec(struct cmx_sched *sc, struct cmx_tenant *t)
{
	inflight_sub(sc, t, 1);
}

/* Several tenants have commands on the device, some wait in the daemon,
 * or the arbiter between workers is on (a turn ends when what it let on
 * has finished, and NVIDIA's callback for a lone 1-item kernel came 20 ms
 * late: a probe's turns ran their whole length): quick completion reports
 * (a runlist's poller) are worth a core. */
static int contended(const struct cmx_sched *sc)
{
	/* A group sharing a context has no turns among its tenants: its
	 * completions only count device time, which callbacks do (the H100:
	 * 8 tenants' short kernels, 40.6k launches/s with quick reports
	 * against 43.5-44.3k without). */
	return sc->share != CMX_SHARE_FREE ||
	       (!sc->srv->shared_context && (sc->busy > 1 || sc->held));
}

/* Cleared once the daemon has stopped its loop: a driver thread's late
 * callback then posts nothing. */
static atomic_int alive = 1;

static unsigned hash_ptr(const void *p, unsigned buckets)
{
	uint64_t x = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull;

	return (unsigned)(x >> 40) & (buckets - 1);
}

static struct cmx_ticket *ph_find(struct cmx_sched *sc, cl_event e)
{
	struct cmx_ticket *g;

	if (!sc->phs || !e)
		return NULL;
	for (g = sc->ph_map[hash_ptr(e, PH_BUCKETS)]; g && g->ph != e; g = g->next_ph)
		;
	return g;
}

static void ph_add(struct cmx_sched *sc, struct cmx_ticket *g)
{
	struct cmx_ticket **b = &sc->ph_map[hash_ptr(g->ph, PH_BUCKETS)];

	g->next_ph = *b;
	*b = g;
	sc->phs++;
}

static void ph_del(struct cmx_sched *sc, struct cmx_ticket *g)
{
	struct cmx_ticket **pp = &sc->ph_map[hash_ptr(g->ph, PH_BUCKETS)];

	while (*pp && *pp != g)
		pp = &(*pp)->next_ph;
	if (*pp) {
		*pp = g->next_ph;
		sc->phs--;
	}
}

static struct kheld **k_slot(struct cmx_sched *sc, cl_kernel k)
{
	struct kheld **pp = &sc->k_map[hash_ptr(k, K_BUCKETS)];

	while (*pp && (*pp)->k != k)
		pp = &(*pp)->next;
	return pp;
}

static int k_hold(struct cmx_sched *sc, cl_kernel k)
{
	struct kheld **pp = k_slot(sc, k);

	if (!*pp) {
		*pp = calloc(1, sizeof(**pp));
		if (!*pp)
			return -ENOMEM;
		(*pp)->k = k;
	}
	(*pp)->n++;
	return 0;
}

static void k_unhold(struct cmx_sched *sc, cl_kernel k)
{
	struct kheld **pp = k_slot(sc, k), *kh = *pp;

	if (kh && !--kh->n) {
		*pp = kh->next;
		free(kh);
	}
}

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

/* One launch's device time: t's median of the last CMX_TYPICAL_N, once
 * they are in. */
static void typical_add(struct cmx_tenant *t, uint64_t ns)
{
	uint32_t v[CMX_TYPICAL_N];

	t->recent_ns[t->recent_n++ % CMX_TYPICAL_N] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
	if (t->recent_n % CMX_TYPICAL_N)
		return;
	memcpy(v, t->recent_ns, sizeof(v));
	for (unsigned i = 1; i < CMX_TYPICAL_N; i++)
		for (unsigned j = i; j && v[j - 1] > v[j]; j--) {
			uint32_t x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	t->typical_ns = v[CMX_TYPICAL_N / 2];
}

/* Whether t, with n commands in flight, keeps a shallow queue (struct
 * cmx_ctl_busy): two or more, their typical device time run back to back
 * under CMX_SHARE_SHALLOW_NS. Unknown until CMX_TYPICAL_N have completed. */
static int shallow(const struct cmx_tenant *t, uint64_t n)
{
	return n >= 2 && t->typical_ns && n * t->typical_ns < CMX_SHARE_SHALLOW_NS;
}

/* Whether the arbiter between workers lets a command estimated at est
 * onto the device now: at will; not while held or after the turn; during
 * the turn, while what is on the device fits what is left of it (always
 * one), so that the turn ends when it should, long kernels included. A
 * draining worker ends its held commands' sessions, never waits. */
static int share_open(const struct cmx_sched *sc, uint64_t now, uint64_t est)
{
	if (sc->share == CMX_SHARE_FREE || sc->srv->draining)
		return 1;
	if (sc->share == CMX_SHARE_HOLD || now >= sc->share_end)
		return 0;
	return !sc->running || sc->running_est + est <= sc->share_end - now;
}

static int turns(const struct cmx_sched *sc)
{
	return !sc->srv->shared_context;
}

/* Room for the turn's holder t: as room(), with a deeper queue while it
 * holds the turn, so that the device always has its next command. */
static int room_turn(struct cmx_sched *sc, const struct cmx_tenant *t, uint64_t est)
{
	return room(sc, est) ||
	       (turns(sc) && sc->turn == t && sc->running < MAX_RUNNING &&
		(t->running < 2 || sc->running_est + est <= TURN_DEPTH * sc->window_ns));
}

/* When the turn is over (lapsed() from then on): its time is up, its
 * holder has been out of commands for a while, or a tenant owed service
 * waits (cut) and the holder has had half a window. */
static uint64_t turn_over(const struct cmx_sched *sc, int cut)
{
	const struct cmx_tenant *h = sc->turn;
	uint64_t end = sc->turn_end;

	if (!h)
		return 0;
	if (!h->inflight) {
		/* A busy holder out of commands is refilling: it keeps the
		 * turn a quarter window. One back from idle is done. Where
		 * the driver time-slices contexts every holder keeps it for
		 * a refill's round trip: each hand-over is a context switch,
		 * and 8 tenants with 4 short kernels in flight each, all back
		 * from idle at every turn, changed turns every 0.6 ms and
		 * got 0.14 of 8 native processes (0.22 with it). */
		uint64_t grace = sc->srv->slices_contexts ? REFILL_SLICED_NS
				 : sc->turn_fresh	  ? 0
							  : sc->window_ns / 4;
		if (sc->turn_idle + grace < end)
			end = sc->turn_idle + grace;
	}
	if (cut && sc->turn_start + sc->window_ns / 2 < end)
		end = sc->turn_start + sc->window_ns / 2;
	return end;
}

static int lapsed(const struct cmx_sched *sc, uint64_t now, int cut)
{
	return now >= turn_over(sc, cut);
}

/* A tenant back from idle that is owed service: it cuts the turn short
 * and goes next. */
static int owed(const struct cmx_sched *sc, const struct cmx_tenant *t)
{
	return t->fresh && sc->turn && sc->turn != t && t->vtime < sc->turn->vtime;
}

static void turn_take(struct cmx_sched *sc, struct cmx_tenant *t, uint64_t now)
{
	if (sc->turn != t)
		cmx_dbg("sched: turn to %s%s", t->name, t->fresh ? " (back from idle)" : "");
	sc->turn = t;
	sc->turn_start = now;
	sc->turn_end = now + TURN_LEN * sc->window_ns;
	sc->turn_fresh = t->fresh;
	t->fresh = 0;
}

/* Some ready tenant is owed service (it cuts the turn short). */
static int cut_due(const struct cmx_sched *sc)
{
	for (const struct cmx_tenant *t = sc->ready; t; t = t->next_ready)
		if (t->held && owed(sc, t))
			return 1;
	return 0;
}

/* t holds a turn that lasts, with nothing of its own held (which would
 * go first): its commands go straight to the driver. */
static int holds_turn(const struct cmx_sched *sc, const struct cmx_tenant *t, uint64_t now)
{
	return turns(sc) && sc->turn == t && !t->held && !lapsed(sc, now, cut_due(sc));
}

/* Whether t's command may go to the device now as far as turns go, with
 * nothing held anywhere (cmx_sched_begin()'s straight path): yes if t
 * holds the turn, or takes it over from a holder whose turn lapsed. */
static int turn_mine(struct cmx_sched *sc, struct cmx_tenant *t, uint64_t now)
{
	if (!turns(sc))
		return 1;
	if (sc->turn != t && !lapsed(sc, now, 0))
		return 0;
	if (sc->turn != t || now >= sc->turn_end) {
		t->fresh = !t->inflight;
		turn_take(sc, t, now);
	}
	return 1;
}

int cmx_sched_busy(struct cmx_server *srv)
{
	struct cmx_sched *sc = srv->sched;

	return sc && (sc->running || sc->held || sc->runlists);
}

int cmx_sched_alone(const struct cmx_server *srv, const struct cmx_tenant *t)
{
	const struct cmx_sched *sc = srv->sched;

	return !sc || (!sc->held && alone(sc, t));
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
static int deps_done(struct cmx_ticket *g)
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

static void done_settled(void *arg, cl_int status);
static void done_post(void *arg);

/* A completion slot (host/complete.c), not a bare callback: PoCL never
 * calls back for a launch that failed through its wait list, whose ticket
 * would then hold its runlist, and count as in flight, for ever. */
static void watch(struct cmx_ticket *g)
{
	g->has_cb = 1;
	g->reports++;
	/* Without a callback nothing would report it: count it done now. */
	if (cmx_complete_when(g->srv, g->done, done_settled, g))
		done_post(g);
}

/* Reports g's completion without a callback if it has completed already
 * (a blocking call's watch, or clFinish, saw it): setting one costs NVIDIA
 * 2 us on the loop, and the callback comes back through the eventfd, a
 * loop turn more, often during the guest's next call. Returns 1 when it
 * did. */
static int report_done(struct cmx_ticket *g)
{
	cl_int st = CL_QUEUED;

	if (!g->srv->tune.sched_peek ||
	    clGetEventInfo(g->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL) !=
		CL_SUCCESS ||
	    st > CL_COMPLETE)
		return 0;
	g->has_cb = 1; /* closed: no launch joins it */
	g->reports++;
	cmx_loop_post(g->srv->loop, done_post, g);
	return 1;
}

static void ticket_free(struct cmx_ticket *g);

/* A poll's report that will not come (its runlist goes, a newer command is
 * polled, or it gave up). */
static void poll_drop(struct cmx_ticket *g)
{
	if (!--g->reports && g->finished)
		ticket_free(g);
}

/*
 * The poll: where tenants contend, the loop watches each in-order runlist's
 * newest command until it completes (or a callback reported it first), then
 * reports it like the callback. Some drivers call callbacks late: NVIDIA's
 * came milliseconds after its 19 us kernels, which, counted as device time,
 * let one kernel onto the device at a time, and 20 ms late for the last
 * command of a worker's turn. The loop thread itself asks the status at the
 * end of every turn, between its looks while it lingers, and on a timer
 * while it sleeps (20 us, doubling to 1 ms while nothing completes): no
 * thread of its own and no hand-off back to the loop (an executor thread
 * per runlist polling cost 8 isolated tenants' short kernels on the H100
 * 14 % of their launches). It gives up after POLL_NS: a command that
 * waits for what nobody sets is left to its callbacks, and the runlist's
 * next completion polls again.
 */
#define POLL_NS		 (200ull * 1000 * 1000)
#define POLL_LINGER_NS	 50000
#define POLL_WAIT_MIN_NS 20000
/* sched-poll-max-us: 1000 */
#define POLL_WAIT_MAX_NS(sc) ((uint64_t)(sc)->srv->tune.sched_poll_max_us * 1000)

static void poll_arm(struct cmx_sched *sc);

/* arg: the scheduler. */
static int poll_all(void *arg)
{
	struct cmx_sched *sc = arg;
	struct cmx_ticket *done[32], *left[32];
	unsigned n = 0, nleft = 0;
	uint64_t now = cmx_now_ns();

	if (!sc)
		return 0;
	for (struct runlist **pp = &sc->polled; *pp && n < 32 && nleft < 32;) {
		struct runlist *l = *pp;
		struct cmx_ticket *g = l->polled;
		cl_int st = CL_COMPLETE;
		if (!g->finished &&
		    clGetEventInfo(g->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				   NULL) == CL_SUCCESS &&
		    st > CL_COMPLETE && now - l->polled_since < POLL_NS) {
			pp = &l->poll_next;
			continue;
		}
		*pp = l->poll_next;
		l->polled = NULL;
		if (!g->finished && st > CL_COMPLETE) {
			/* Gave up: its runlist waits for its callbacks. */
			if (l->waiter == g)
				l->waiter = NULL;
			poll_drop(g);
			if (!g->has_cb)
				left[nleft++] = g;
			continue;
		}
		done[n++] = g;
	}
	if (n)
		sc->poll_wait_ns = POLL_WAIT_MIN_NS;
	/* Not finished, so not freed by poll_drop(); flush_post() set it no
	 * callback while it was polled. */
	for (unsigned i = 0; i < nleft; i++)
		watch(left[i]);
	/* done_post() may poll again, or free a runlist. */
	for (unsigned i = 0; i < n; i++)
		done_post(done[i]);
	return sc->polled != NULL;
}

static void poll_timer(struct cmx_io *io, int res, unsigned flags)
{
	/* The scheduler's own timer: its io is the one armed. */
	struct cmx_sched *sc = (struct cmx_sched *)((char *)io - offsetof(struct cmx_sched, poll_io));

	(void)res, (void)flags;
	if (!sc)
		return;
	sc->poll_armed = 0;
	if (!poll_all(sc))
		return;
	if (sc->poll_wait_ns < POLL_WAIT_MAX_NS(sc))
		sc->poll_wait_ns *= 2;
	if (sc->poll_wait_ns > POLL_WAIT_MAX_NS(sc))
		sc->poll_wait_ns = POLL_WAIT_MAX_NS(sc);
	poll_arm(sc);
}

static void poll_arm(struct cmx_sched *sc)
{
	if (sc->poll_armed)
		return;
	sc->poll_armed = 1;
	sc->poll_ts.tv_sec = 0;
	sc->poll_ts.tv_nsec = (long long)sc->poll_wait_ns;
	sc->poll_io.cb = poll_timer;
	io_uring_prep_timeout(cmx_loop_sqe(sc->srv->loop, &sc->poll_io), &sc->poll_ts, 0, 0);
}

static void poll_turn_end(void *arg)
{
	struct cmx_sched *sc = arg;

	sc->poll_posted = 0;
	if (!poll_all(sc))
		return;
	cmx_loop_linger(sc->srv->loop, POLL_LINGER_NS);
	cmx_loop_linger_with(sc->srv->loop, POLL_LINGER_NS, poll_all, sc);
	poll_arm(sc);
}

static void runlist_unpoll(struct cmx_sched *sc, struct runlist *l)
{
	struct runlist **pp = &sc->polled;

	if (!l->polled)
		return;
	while (*pp != l)
		pp = &(*pp)->poll_next;
	*pp = l->poll_next;
	poll_drop(l->polled);
	l->polled = NULL;
}

static void runlist_poll(struct runlist *l, struct cmx_ticket *g)
{
	struct cmx_sched *sc = g->srv->sched;

	g->reports++;
	l->waiter = g;
	runlist_unpoll(sc, l);
	l->polled = g;
	l->polled_since = cmx_now_ns();
	l->poll_next = sc->polled;
	sc->polled = l;
	if (!sc->poll_wait_ns)
		sc->poll_wait_ns = POLL_WAIT_MIN_NS;
	if (!sc->poll_posted) {
		sc->poll_posted = 1;
		cmx_loop_post(sc->srv->loop, poll_turn_end, sc);
	}
}

/* Once per loop turn: a callback on each in-order runlist's newest command. */
static void flush_post(void *arg)
{
	struct cmx_sched *sc = arg;

	sc->flush_posted = 0;
	for (struct runlist *l = sc->runlists; l; l = l->next) {
		struct cmx_ticket *last;
		if (!l->dirty || !l->head)
			continue;
		l->dirty = 0;
		last =
		    (struct cmx_ticket *)((char *)l->tail - offsetof(struct cmx_ticket, next_held));
		/* Quick completion reports matter when tenants contend; a
		 * lone tenant's callbacks do, and a poller would take a core
		 * from its enqueueing on a small machine. */
		if (!l->waiter && contended(sc))
			runlist_poll(l, last);
		/* The poll reports it; a callback would slow the command
		 * down (NVIDIA), and comes only if the poll gives up. */
		if (l->in_order && l->polled == last)
			continue;
		if (!last->has_cb && !report_done(last))
			watch(last);
	}
}

static struct runlist *runlist_find(struct cmx_sched *sc, cl_command_queue q)
{
	struct runlist *l;

	for (l = sc->runlists; l && l->queue != q; l = l->next)
		;
	return l;
}

static struct runlist *runlist_get(struct cmx_sched *sc, struct cmx_ticket *g)
{
	struct runlist *l = runlist_find(sc, g->queue);

	if (l)
		return l;
	l = calloc(1, sizeof(*l));
	if (!l)
		return NULL;
	l->queue = g->queue;
	l->session = g->session;
	l->in_order = g->in_order;
	l->tail = &l->head;
	l->next = sc->runlists;
	sc->runlists = l;
	return l;
}

/* Frees l once nothing of its queue is held or on the device. */
static void runlist_put(struct cmx_sched *sc, struct runlist *l)
{
	struct runlist **lp = &sc->runlists;

	if (l->head || l->held)
		return;
	runlist_unpoll(sc, l);
	if (l->unflushed)
		sc->unflushed--;
	while (*lp != l)
		lp = &(*lp)->next;
	*lp = l->next;
	free(l);
}

static void runlist_add(struct cmx_sched *sc, struct cmx_ticket *g)
{
	struct runlist *l = g->runlist ? g->runlist : runlist_get(sc, g);

	g->runlist = l;
	if (!l) {
		watch(g);
		return;
	}
	g->next_held = NULL;
	*l->tail = g;
	l->tail = &g->next_held;
	if (!l->in_order || g->exposed) {
		if (!g->has_cb)
			watch(g);
		/* Its callback alone can come late: NVIDIA's for the last
		 * command of a worker's turn on the device came 20.1 ms after
		 * it was released (a 1.6 ms kernel), every turn, and the turn
		 * ran that much over. */
		if (l->in_order && !l->waiter && contended(sc))
			runlist_poll(l, g);
		return;
	}
	l->dirty = 1;
	if (!sc->flush_posted) {
		sc->flush_posted = 1;
		cmx_loop_post(sc->srv->loop, flush_post, sc);
	}
}

/*
 * The kernel-time watchdog. OpenCL cannot stop a running kernel; only the
 * end of the process that owns its context does. Four times a second,
 * while a tenant with a kernel-time has commands on the device, each
 * runlist's oldest unfinished command is found by asking its status; one
 * that has stayed the oldest and on the device (running, or submitted
 * with no wait list, as NVIDIA reports a running kernel) past its
 * tenant's kernel-time has the front end end this worker: its tenants'
 * sessions close, their guests get errors, and the worker is replaced.
 */
#define DOG_NS (250ull * 1000 * 1000)

static void watchdog(struct cmx_io *io, int res, unsigned flags);

static void dog_arm(struct cmx_sched *sc)
{
	if (sc->dog_armed)
		return;
	sc->dog_armed = 1;
	sc->dog_io.cb = watchdog;
	sc->dog_ts.tv_sec = 0;
	sc->dog_ts.tv_nsec = (long long)DOG_NS;
	io_uring_prep_timeout(cmx_loop_sqe(sc->srv->loop, &sc->dog_io), &sc->dog_ts, 0, 0);
}

/* 1: g is on the device unfinished; 0: it waits for others; -1: it has
 * finished (or cannot be asked). */
static int dog_state(const struct cmx_ticket *g)
{
	cl_int st = CL_COMPLETE;

	if (clGetEventInfo(g->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL) ||
	    st <= CL_COMPLETE)
		return -1;
	return st == CL_RUNNING || (st == CL_SUBMITTED && !g->waits);
}

static void overtime(struct cmx_sched *sc, struct cmx_tenant *t, uint64_t ns)
{
	char why[128];

	if (t->overtime)
		return;
	t->overtime = 1;
	snprintf(why, sizeof(why), "a command ran %.1f s, past its kernel-time (%" PRIu64 " s)",
		 (double)ns / 1e9, t->q.kernel_time);
	if (!sc->srv->report || sc->srv->report->overtime(t->name, why))
		cmx_warn("tenant %s: %s: nothing ends it without worker processes", t->name, why);
}

static void watchdog(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_sched *sc =
	    (struct cmx_sched *)((char *)io - offsetof(struct cmx_sched, dog_io));
	uint64_t now = cmx_now_ns();
	int again = 0;

	if (!atomic_load(&alive))
		return;
	sc->dog_armed = 0;
	for (struct runlist *l = sc->runlists; l; l = l->next) {
		struct cmx_ticket *g;
		int on = -1;
		for (g = l->head; g && (on = dog_state(g)) < 0; g = g->next_held)
			;
		if (!g || g->t->q.kernel_time == CMX_UNLIMITED)
			continue;
		again = 1;
		if (g->seq != l->dog_seq || !on) {
			l->dog_seq = on ? g->seq : 0;
			l->dog_since = now;
		} else if (now - l->dog_since > g->t->q.kernel_time * 1000000000ull) {
			overtime(sc, g->t, now - l->dog_since);
		}
	}
	if (again)
		dog_arm(sc);
}

static void charge_start(struct cmx_sched *sc, struct cmx_ticket *g, uint64_t now)
{
	struct cmx_tenant *t = g->t;

	g->released = now;
	g->seq = ++sc->seq;
	g->est = estimate(sc, t);
	g->n = 1;
	sc->running++;
	t->running++;
	sc->running_est += g->est;
	sc->vclock = t->vtime;
	/* Charged an estimate now, corrected on completion, so a tenant does
	 * not take the whole window before its first command is measured. */
	t->vtime += g->est / t->q.weight;
	if (t->q.cap)
		t->cap_tokens -= (int64_t)g->est;
	if (t->q.kernel_time != CMX_UNLIMITED)
		dog_arm(sc);
	/* Last: when no callback can be set, this completes (and frees) g. */
	runlist_add(sc, g);
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

static void timer_updated(struct cmx_io *io, int res, unsigned flags)
{
}

/* A kick in ns at the latest: arms the timer, or brings an armed one
 * forward (a turn cut short for a tenant back from idle). */
static void timer_arm(struct cmx_sched *sc, uint64_t ns)
{
	uint64_t at = cmx_now_ns() + ns;

	if (sc->timer_armed && sc->timer_at <= at)
		return;
	sc->timer_at = at;
	sc->timer_ts.tv_sec = (long long)(ns / 1000000000ull);
	sc->timer_ts.tv_nsec = (long long)(ns % 1000000000ull);
	if (sc->timer_armed) {
		sc->update_io.cb = timer_updated;
		io_uring_prep_timeout_update(cmx_loop_sqe(sc->srv->loop, &sc->update_io),
					     &sc->timer_ts, (uint64_t)(uintptr_t)&sc->timer_io, 0);
		return;
	}
	sc->timer_armed = 1;
	sc->timer_io.cb = timer_done;
	io_uring_prep_timeout(cmx_loop_sqe(sc->srv->loop, &sc->timer_io), &sc->timer_ts, 0, 0);
}

static int session_holds(struct cmx_sched *sc, uint64_t session)
{
	for (struct runlist *l = sc->runlists; l; l = l->next)
		if (l->held && l->session == session)
			return 1;
	return 0;
}

static void release_kept(void *h, unsigned kind)
{
	if (kind == CMX_K_MEM)
		clReleaseMemObject(h);
	else
		clReleaseSampler(h);
}

/* The session's last held command left: what it released may go now. */
static void kept_put(struct cmx_sched *sc, uint64_t session)
{
	struct kept **pp = &sc->kept;

	if (!*pp || session_holds(sc, session))
		return;
	while (*pp) {
		struct kept *k = *pp;
		if (k->session != session) {
			pp = &k->next;
			continue;
		}
		*pp = k->next;
		release_kept(k->h, k->kind);
		free(k);
	}
}

void cmx_sched_keep(struct cmx_session *s, unsigned kind, void *h)
{
	struct cmx_sched *sc = s->srv->sched;
	struct kept *k;

	if (!sc || !sc->held || !h || (kind != CMX_K_MEM && kind != CMX_K_SAMPLER) ||
	    !session_holds(sc, s->id) || !(k = malloc(sizeof(*k))))
		return;
	if (kind == CMX_K_MEM)
		clRetainMemObject(h);
	else
		clRetainSampler(h);
	k->session = s->id;
	k->kind = kind;
	k->h = h;
	k->next = sc->kept;
	sc->kept = k;
}

/* Takes g off its tenant's FIFO head and its runlist's held list (whose head
 * it is: a queue's commands are held in its tenant's order). */
static void unhold(struct cmx_sched *sc, struct cmx_ticket *g)
{
	struct runlist *l = g->runlist;
	struct cmx_ticket **pp = &l->held;

	while (*pp != g)
		pp = &(*pp)->next_q;
	*pp = g->next_q;
	if (l->held_last == g) {
		l->held_last = NULL;
		for (struct cmx_ticket *x = l->held; x; x = x->next_q)
			l->held_last = x;
	}
	sc->held--;
	if (g->op->kernel)
		k_unhold(sc, g->op->kernel);
	g->op->destroy(g->op);
	g->op = NULL;
}

/* The guest's names for a placeholder (its event id, its queue's last
 * command) name the command's own event from now on. */
static void swap_names(struct cmx_ticket *g)
{
	struct cmx_session *s;
	struct cmx_obj *o;

	for (s = g->srv->sessions; s && s->id != g->session; s = s->next)
		;
	if (!s || s->closed)
		return;
	o = g->event_id ? cmx_session_obj(s, g->event_id, CMX_K_EVENT) : NULL;
	if (o && o->h == g->ph) {
		clRetainEvent(g->done);
		o->h = g->done;
		clReleaseEvent(g->ph);
	}
	o = cmx_session_obj(s, g->queue_id, CMX_K_QUEUE);
	if (o && o->last == g->ph) {
		clRetainEvent(g->done);
		o->last = g->done;
		clReleaseEvent(g->ph);
	}
}

/* The placeholder takes its command's final status. */
static void ph_complete(struct cmx_sched *sc, struct cmx_ticket *g, cl_int status)
{
	if (!g->ph)
		return;
	cmx_dbg("sched: ph %p done %d", (void *)g->ph, status);
	clSetUserEventStatus(g->ph, status < 0 ? status : CL_COMPLETE);
	ph_del(sc, g);
	clReleaseEvent(g->ph);
	g->ph = NULL;
}

static void ticket_free(struct cmx_ticket *g)
{
	for (unsigned i = 0; i < g->ndeps; i++)
		clReleaseEvent(g->deps[i]);
	for (cl_uint i = 0; i < g->nwait; i++)
		clReleaseEvent(g->wait_buf[i]);
	if (g->done)
		clReleaseEvent(g->done);
	if (g->queue_id)
		clReleaseCommandQueue(g->queue);
	free(g);
}

/* A held command's turn: its native enqueue, behind the wait list it was
 * given, placeholders of commands enqueued since replaced by their events. */
static void release(struct cmx_sched *sc, struct cmx_ticket *g, uint64_t now)
{
	cl_event stack[16], *wait = g->nwait <= 16 ? stack : malloc(g->nwait * sizeof(cl_event));
	struct runlist *l = g->runlist;
	cl_event ev = NULL;
	cl_int e = CL_OUT_OF_HOST_MEMORY;

	cmx_dbg("sched: release ticket %p ph %p", (void *)g, (void *)g->ph);
	if (wait) {
		e = CL_SUCCESS;
		for (cl_uint i = 0; i < g->nwait; i++) {
			struct cmx_ticket *d = ph_find(sc, g->wait_buf[i]);
			cl_int st = CL_COMPLETE;
			wait[i] = d && d->done ? d->done : g->wait_buf[i];
			/* Behind an event that has failed already, a driver may
			 * never run nor fail the command (PoCL): fail it here. */
			clGetEventInfo(wait[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				       NULL);
			if (st < 0)
				e = CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST;
		}
		if (!e)
			e = g->op->enqueue(g->op, g->nwait, g->nwait ? wait : NULL, &ev);
		if (wait != stack)
			free(wait);
	}
	unhold(sc, g);
	for (cl_uint i = 0; i < g->nwait; i++)
		clReleaseEvent(g->wait_buf[i]);
	g->nwait = 0;
	if (e) {
		/* Never on the device: its event fails with the error. */
		ph_complete(sc, g, e < 0 ? e : CL_OUT_OF_RESOURCES);
		inflight_dec(sc, g->t);
		g->t->completed++;
		g->runlist = NULL;
		kept_put(sc, g->session);
		runlist_put(sc, l);
		ticket_free(g);
		return;
	}
	g->done = ev;
	if (!l->unflushed++)
		sc->unflushed++;
	swap_names(g);
	kept_put(sc, g->session);
	charge_start(sc, g, now);
}

/* What was released goes to the device now: the guest flushed its queue
 * when the command was held, and a driver may keep unflushed commands
 * back (NVIDIA does). */
static void flush_released(struct cmx_sched *sc)
{
	for (struct runlist *l = sc->runlists; l && sc->unflushed; l = l->next)
		if (l->unflushed) {
			l->unflushed = 0;
			sc->unflushed--;
			cmx_queue_flush(sc->srv, l->queue);
		}
}

static void kick_once(struct cmx_sched *sc);

static void share_check(struct cmx_sched *sc);

/* Releases held commands while the device has room, lowest virtual time
 * first. */
static void kick(struct cmx_sched *sc)
{
	kick_once(sc);
	flush_released(sc);
	if (sc->share != CMX_SHARE_FREE)
		share_check(sc);
}

static void kick_once(struct cmx_sched *sc)
{
	uint64_t now = cmx_now_ns();

	for (;;) {
		struct cmx_tenant *best = NULL, **pp, **best_pp = NULL, **turn_pp = NULL;
		int capped = 0, best_owed = 0;

		for (pp = &sc->ready; *pp;) {
			struct cmx_tenant *t = *pp;
			if (!t->held) {
				*pp = t->next_ready;
				t->ready = 0;
				t->fresh = 0;
				continue;
			}
			if (!cap_ok(t, now)) {
				capped = 1;
				t->capped++;
			} else if (deps_done(t->held)) {
				/* The lowest virtual time goes first; one back
				 * from idle and owed service before the rest. */
				int o = owed(sc, t);
				if (!best || o > best_owed ||
				    (o == best_owed && t->vtime < best->vtime)) {
					best = t;
					best_pp = pp;
					best_owed = o;
				}
				if (t == sc->turn)
					turn_pp = pp;
			}
			pp = &t->next_ready;
		}
		if (!best) {
			if (capped)
				timer_arm(sc, 2 * 1000 * 1000);
			return;
		}
		if (turns(sc)) {
			if (!lapsed(sc, now, best_owed)) {
				/* The holder's turn: the others wait for its end. */
				if (!turn_pp) {
					timer_arm(sc, turn_over(sc, best_owed) - now);
					return;
				}
				best = sc->turn;
				best_pp = turn_pp;
			} else if (best != sc->turn || now >= sc->turn_end) {
				turn_take(sc, best, now);
			}
		}
		if (!room_turn(sc, best, estimate(sc, best)) ||
		    !share_open(sc, now, estimate(sc, best)))
			return;
		struct cmx_ticket *g = best->held;
		best->held = g->next_held;
		if (!best->held) {
			best->held_tail = &best->held;
			*best_pp = best->next_ready;
			best->ready = 0;
		}
		release(sc, g, now);
	}
}

/* Out of turn, ignoring the window and guest user events (the driver
 * waits for those now): g's tenant's held commands up to g. For what cannot
 * wait behind them in the daemon (a read, a marker on g's queue) or must
 * change under them (a kernel the driver cannot clone). */
static void release_upto(struct cmx_sched *sc, struct cmx_ticket *g)
{
	struct cmx_tenant *t = g->t;
	uint64_t now = cmx_now_ns();
	struct cmx_ticket *x;

	do {
		x = t->held;
		t->held = x->next_held;
		if (!t->held)
			t->held_tail = &t->held;
		while (x->ndeps)
			clReleaseEvent(x->deps[--x->ndeps]);
		release(sc, x, now);
	} while (x != g);
	flush_released(sc);
}

/* g's command finished on the device, in ns of device time: the driver's
 * profile of it where it has one (native queues profile where tenants
 * share the device: struct cmx_server's profile), else ns, its share of
 * the time since the device last finished something. The
 * profile leaves out what the device spends between commands: switching
 * between tenants' contexts cost the H100 milliseconds, which, counted,
 * made every estimate larger than the window. */
static void account(struct cmx_sched *sc, struct cmx_ticket *g, uint64_t ns, uint64_t now)
{
	struct cmx_tenant *t = g->t;
	uint64_t undo = g->est / t->q.weight;
	cl_ulong start = 0, end = 0;

	/* A ticket of several commands has the profile of its newest only. */
	if (g->n == 1 &&
	    !clGetEventProfilingInfo(g->done, CL_PROFILING_COMMAND_START, sizeof(start), &start,
				     NULL) &&
	    !clGetEventProfilingInfo(g->done, CL_PROFILING_COMMAND_END, sizeof(end), &end, NULL) &&
	    end > start)
		ns = end - start;

	sc->running -= g->n;
	t->running -= g->n;
	sc->running_est -= g->est;
	sc->turn_done += g->n;
	sc->turn_dev_ns += ns;
	/* The running average per command, as if they had come one by one
	 * (after 16 the older value weighs 0.12: enough). */
	for (unsigned i = 0; i < g->n && i < 16; i++)
		t->est_ns = t->est_ns ? (t->est_ns * 7 + ns / g->n) / 8 : ns / g->n;
	/* Launches only: a fill of fresh memory takes microseconds. */
	if (g->launch)
		typical_add(t, ns / g->n);
	/* The estimate charged at release, replaced by the measure. */
	t->vtime += ns / t->q.weight;
	t->vtime -= undo < t->vtime ? undo : t->vtime;
	if (t->q.cap)
		t->cap_tokens -= (int64_t)ns - (int64_t)g->est;
	cmx_tenant_account(t, ns, now);
	inflight_sub(sc, t, g->n);
	t->completed += g->n;
	if (g->ph) {
		cl_int st = CL_COMPLETE;
		clGetEventInfo(g->done, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
		ph_complete(sc, g, st);
	}
}

/* x is accounted: freed now, or by the last of its reports still to come. */
static void finish(struct cmx_ticket *x)
{
	x->finished = 1;
	if (!x->reports)
		ticket_free(x);
}

/* g completed: so did everything before it in its in-order runlist. */
static void done_post(void *arg)
{
	struct cmx_ticket *g = arg, *x;
	struct cmx_sched *sc = g->srv->sched;
	struct runlist *l = g->runlist;
	uint64_t now = cmx_now_ns(), from, total, k = g->n, tickets = 1;

	g->reports--;
	if (g->finished) {
		if (!g->reports)
			ticket_free(g);
		return;
	}
	if (!l) {
		from = g->released > sc->last_done ? g->released : sc->last_done;
		account(sc, g, now > from ? now - from : 0, now);
		finish(g);
		sc->last_done = now;
		kick(sc);
		return;
	}
	if (l->in_order)
		for (x = l->head; x != g; x = x->next_held) {
			tickets++;
			k += x->n;
		}
	/* The device's time since it last finished something, or since the
	 * first of these started if later: serial device time, shared evenly
	 * among the k commands this completion reports. */
	x = l->in_order ? l->head : g;
	from = x->released > sc->last_done ? x->released : sc->last_done;
	total = now > from ? now - from : 0;
	sc->last_done = now;
	for (uint64_t i = 0; i < tickets; i++) {
		struct cmx_ticket **pp = &l->head;
		if (!l->in_order)
			while (*pp != g)
				pp = &(*pp)->next_held;
		x = *pp;
		*pp = x->next_held;
		if (l->tail == &x->next_held)
			l->tail = pp;
		if (l->waiter == x)
			l->waiter = NULL;
		account(sc, x, total * x->n / (k ? k : 1), now);
		finish(x);
	}
	/* The poller goes on with what was enqueued since (only while tenants
	 * contend, as in flush_post()). */
	if (l->head && l->in_order && !l->waiter && contended(sc))
		runlist_poll(l, (struct cmx_ticket *)((char *)l->tail -
						      offsetof(struct cmx_ticket, next_held)));
	runlist_put(sc, l);
	kick(sc);
}

static void done_settled(void *arg, cl_int status)
{
	struct cmx_ticket *g = arg;

	/* After the handler that may be running now (a sweep settles from
	 * inside one). */
	if (atomic_load(&alive)) /* pairs with the store in cmx_sched_destroy() */
		cmx_loop_post(g->srv->loop, done_post, g);
}

static void kick_post(void *arg)
{
	struct cmx_server *srv = arg;

	kick(srv->sched);
}

/* arg: the server. */
static void CL_CALLBACK dep_cb(cl_event e, cl_int status, void *arg)
{
	struct cmx_server *srv = arg;

	if (atomic_load(&alive))
		cmx_loop_post(srv->loop, kick_post, srv);
}

static void ticket_abandon(struct cmx_ticket *g)
{
	for (unsigned i = 0; i < g->ndeps; i++)
		clReleaseEvent(g->deps[i]);
	free(g);
}

/*
 * No other tenant has a command held or on the device. Holding is then
 * pure cost (a round of the scheduler per command): a lone tenant goes
 * straight to the driver. The price: a tenant that becomes busy waits once
 * behind what the lone one had already queued; from then on both are held
 * and shared fairly.
 */
static int alone(const struct cmx_sched *sc, const struct cmx_tenant *t)
{
	/* A group sharing one context: the driver shares the device between
	 * its queues, and holding a command back would only idle it. */
	return sc->srv->shared_context || sc->busy == (t->inflight ? 1u : 0u);
}

/* The ticket a lone tenant's next launch on l may join: l's newest, while
 * nothing watches it yet (flush_post() closes it once per loop turn) and
 * it stands only for commands that went straight to the driver. */
static struct cmx_ticket *open_ticket(struct runlist *l, const struct cmx_tenant *t)
{
	struct cmx_ticket *g;

	if (!l || !l->in_order || !l->dirty || !l->head)
		return NULL;
	g = (struct cmx_ticket *)((char *)l->tail - offsetof(struct cmx_ticket, next_held));
	if (g->has_cb || g->exposed || g->ph || g->op || g->finished || l->waiter == g || g->t != t)
		return NULL;
	return g;
}

int cmx_sched_begin(struct cmx_call *c, cl_uint nwait, void *const *wait, struct cmx_sched_cmd *cmd)
{
	struct cmx_sched *sc = c->s->srv->sched;
	struct cmx_tenant *t = c->s->tenant;
	struct cmx_obj *q = cmx_session_obj(c->s, cmx_call_queue(c)->id, CMX_K_QUEUE);
	int holdable = !!(c->oi->flags & CMX_OPF_HOLDABLE), after_held = 0, open;
	uint64_t now;
	struct cmx_ticket *g;
	struct runlist *l;

	cmd->srv = c->s->srv;
	cmd->nwait = nwait;
	cmd->wait = (const cl_event *)wait;
	cmd->g = NULL;
	cmd->join = NULL;
	cmd->hold = 0;
	if (!sc || !q)
		return CL_SUCCESS;
	if (t->inflight >= t->q.inflight) {
		t->refused++;
		return CL_OUT_OF_RESOURCES;
	}
	now = cmx_now_ns();
	sc->last_work = now;
	/* The front end learns that this worker has work, at most every
	 * CMX_SHARE_BEAT_NS, unless it is in its turn: a lone tenant pays
	 * one packet per beat, a held worker joins the turns. */
	sc->shallow = shallow(t, t->inflight + 1);
	if ((sc->share != CMX_SHARE_TURN || sc->turned) && now - sc->beat >= CMX_SHARE_BEAT_NS) {
		sc->beat = now;
		if (sc->srv->report)
			sc->srv->report->busy(sc->shallow ? CMX_BUSY_SHALLOW : 0);
		cmx_dbg("sched: busy, %" PRIu64 " in flight, %" PRIu64 " us each%s",
			(uint64_t)t->inflight + 1, t->typical_ns / 1000,
			sc->shallow ? ": shallow" : "");
	}
	open = share_open(sc, now, estimate(sc, t));
	/* Alone, uncapped, nothing held and nothing to wait for: straight to
	 * the driver, in the ticket of the launches before it. */
	/* (Not with a kernel-time: the watchdog needs a ticket per command.) */
	if (holdable && !nwait && !t->q.cap && t->q.kernel_time == CMX_UNLIMITED && open &&
	    ((!sc->held && alone(sc, t)) ||
	     (holds_turn(sc, t, now) && room_turn(sc, t, estimate(sc, t)))) &&
	    (cmd->join = open_ticket(sc->runlists ? runlist_find(sc, q->h) : NULL, t)))
		return CL_SUCCESS;
	g = calloc(1, sizeof(*g) + nwait * sizeof(cl_event));
	if (!g)
		return CL_OUT_OF_HOST_MEMORY;
	g->srv = sc->srv;
	g->t = t;
	g->launch = holdable;
	g->waits = nwait > 0;
	g->session = c->s->id;
	g->queue = q->h;
	g->in_order = !(q->flags & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE);
	for (cl_uint i = 0; i < nwait; i++) {
		cl_command_type type = 0;
		cl_int st = CL_COMPLETE;
		struct cmx_ticket *d = ph_find(sc, wait[i]);
		g->wait_buf[i] = wait[i];
		if (d) {
			/* An earlier held command of this tenant: it goes first. */
			after_held |= d->op != NULL;
			continue;
		}
		clGetEventInfo(wait[i], CL_EVENT_COMMAND_TYPE, sizeof(type), &type, NULL);
		if (type != CL_COMMAND_USER || g->ndeps == MAX_DEPS)
			continue;
		clGetEventInfo(wait[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st, NULL);
		if (st > CL_COMPLETE &&
		    clSetEventCallback(wait[i], CL_COMPLETE, dep_cb, sc->srv) == 0) {
			clRetainEvent(wait[i]);
			g->deps[g->ndeps++] = wait[i];
		}
	}
	cmd->g = g;
	/* An in-order queue's commands keep their order: after a held one,
	 * every command of the queue is held. */
	l = sc->held ? runlist_find(sc, g->queue) : NULL;
	after_held |= l && l->held;
	/* The device has room and nobody waits, or the tenant is alone with
	 * work (nobody to be fair to) and uncapped, or it holds the turn and
	 * has nothing held: straight on. */
	if (!after_held && !g->ndeps && open && cap_ok(t, now) &&
	    ((!sc->held && turn_mine(sc, t, now) &&
	      ((!t->q.cap && alone(sc, t)) || room_turn(sc, t, estimate(sc, t)))) ||
	     (holds_turn(sc, t, now) && room_turn(sc, t, estimate(sc, t)))))
		return CL_SUCCESS;
	/* Out-of-order queues are not held (see docs/architecture.md): their
	 * markers and barriers wait for everything before them natively. */
	if (holdable && g->in_order) {
		cmd->hold = 1;
		return CL_SUCCESS;
	}
	if (!after_held)
		return CL_SUCCESS;
	/* Straight to the driver, behind placeholders it waits for natively:
	 * those complete with their commands, and this one is not counted on
	 * the device (it would take the room the held ones need to go). */
	for (cl_uint i = 0; i < nwait; i++) {
		struct cmx_ticket *d = ph_find(sc, wait[i]);
		if (d)
			d->exposed = 1;
	}
	cmd->g = NULL;
	ticket_abandon(g);
	return CL_SUCCESS;
}

int cmx_sched_hold(struct cmx_sched_cmd *cmd, struct cmx_call *c, const struct cmx_ref *ev,
		   struct cmx_sched_op *op)
{
	struct cmx_sched *sc = c->s->srv->sched;
	struct cmx_ticket *g = cmd->g;
	struct cmx_tenant *t = g->t;
	struct cmx_obj *q = cmx_session_obj(c->s, cmx_call_queue(c)->id, CMX_K_QUEUE);
	struct runlist *l = runlist_get(sc, g);
	cl_int e = CL_OUT_OF_HOST_MEMORY;

	cmd->g = NULL;
	if (l && !(op->kernel && k_hold(sc, op->kernel)))
		g->ph = clCreateUserEvent(q->ctx, &e);
	if (!g->ph) {
		if (l && op->kernel)
			k_unhold(sc, op->kernel);
		if (l)
			runlist_put(sc, l);
		op->destroy(op);
		ticket_abandon(g);
		return e ? e : CL_OUT_OF_RESOURCES;
	}
	g->op = op;
	g->runlist = l;
	g->event_id = ev->id;
	g->queue_id = q->id;
	clRetainCommandQueue(g->queue);
	g->nwait = cmd->nwait;
	for (cl_uint i = 0; i < g->nwait; i++)
		clRetainEvent(g->wait_buf[i]);
	ph_add(sc, g);
	if (l->held_last)
		l->held_last->next_q = g;
	else
		l->held = g;
	l->held_last = g;
	inflight_inc(sc, t);
	t->launched++;
	g->next_held = NULL;
	sc->held++;
	*t->held_tail = g;
	t->held_tail = &g->next_held;
	/* A tenant back from idle starts at the present, less half a window
	 * (not with the credit of its idle time): owed that much, it cuts
	 * the turn short (see TURN_LEN). */
	if (t->inflight == 1) {
		uint64_t present =
		    sc->vclock > sc->window_ns / 2 ? sc->vclock - sc->window_ns / 2 : 0;
		if (t->vtime < present)
			t->vtime = present;
		t->fresh = sc->turn != t;
	}
	ready_add(sc, t);
	/* The guest's event and the queue's last command: the placeholder
	 * (its own reference), until the release names the real event. */
	clRetainEvent(g->ph);
	cmx_dbg("sched: hold ticket %p ph %p ndeps %u", (void *)g, (void *)g->ph, g->ndeps);
	cmx_event_bind(c, ev, g->ph);
	kick(sc);
	return CL_SUCCESS;
}

void cmx_sched_end(struct cmx_sched_cmd *cmd, cl_int err, cl_event ev)
{
	struct cmx_sched *sc = cmd->srv->sched;
	struct cmx_ticket *g = cmd->g;
	struct cmx_tenant *t;
	uint64_t est;

	if (cmd->join && !err) {
		/* Its ticket now ends with it (see struct cmx_ticket). */
		g = cmd->join;
		t = g->t;
		clRetainEvent(ev);
		clReleaseEvent(g->done);
		g->done = ev;
		est = estimate(sc, t);
		g->n++;
		g->est += est;
		sc->running++;
		t->running++;
		sc->running_est += est;
		sc->vclock = t->vtime;
		t->vtime += est / t->q.weight;
		inflight_inc(sc, t);
		t->launched++;
		return;
	}
	if (!g)
		return;
	t = g->t;
	if (err) {
		ticket_abandon(g);
		return;
	}
	/* Its guest user events are the driver's business now. */
	while (g->ndeps)
		clReleaseEvent(g->deps[--g->ndeps]);
	clRetainEvent(ev);
	g->done = ev;
	inflight_inc(sc, t);
	t->launched++;
	charge_start(sc, g, cmx_now_ns());
}

/*
 * The arbiter's side in this worker: once the turn is over (its time, or
 * nothing launched for share_idle_ns()) and what it let onto the device has
 * finished, TURNED; the front end's timer, not this one, decides what a
 * worker that never says so costs the others. Called after every kick
 * while not free.
 */
static void share_check(struct cmx_sched *sc)
{
	/* Idle since its last launch or, if that came before, its turn's
	 * start: launches held before the turn say nothing of the time since
	 * (a tenant waiting for their completions lost its turns at once). */
	uint64_t now = cmx_now_ns(),
		 idle_at = (sc->last_work > sc->share_since ? sc->last_work : sc->share_since) +
			   share_idle_ns(sc->srv);

	if (sc->share == CMX_SHARE_TURN && !sc->turned) {
		if (sc->running && now >= sc->share_end && !sc->turn_late) {
			sc->turn_late = 1;
			cmx_dbg("sched: turn %" PRIu64 " ended with %u commands on the device, "
				"estimated at %" PRIu64 " us",
				sc->share_seq, sc->running, sc->running_est / 1000);
		}
		if (!sc->running && (now >= sc->share_end || (!sc->held && now >= idle_at))) {
			sc->turned = 1;
			cmx_dbg("sched: turn %" PRIu64 " over after %" PRIu64 " us (%" PRIu64
				" us past its end): %" PRIu64 " commands, %" PRIu64
				" us of device time",
				sc->share_seq, (now - sc->share_since) / 1000,
				now > sc->share_end ? (now - sc->share_end) / 1000 : 0,
				sc->turn_done, sc->turn_dev_ns / 1000);
			sc->share_since = now;
			if (sc->srv->report)
				sc->srv->report->turned(sc->share_seq, sc->held || now < idle_at,
							sc->shallow ? CMX_BUSY_SHALLOW : 0);
		} else if (!sc->running) {
			timer_arm(sc,
				  (sc->held || idle_at > sc->share_end ? sc->share_end : idle_at) -
				      now);
		}
		if (!sc->turned)
			return;
	}
	if (!sc->held)
		return;
	if (now - sc->share_since >= SHARE_HOLD_MAX_NS) {
		cmx_warn("sched: held %" PRIu64 " ms with no word from the front end: launching "
			 "at will",
			 (now - sc->share_since) / 1000000);
		cmx_sched_share(sc->srv, CMX_SHARE_FREE, 0, 0);
		return;
	}
	timer_arm(sc, sc->share_since + SHARE_HOLD_MAX_NS - now);
}

void cmx_sched_share(struct cmx_server *srv, unsigned mode, uint64_t turn_ns, uint64_t seq)
{
	struct cmx_sched *sc = srv->sched;

	if (!sc)
		return;
	sc->share = mode;
	sc->share_since = cmx_now_ns();
	sc->turned = 0;
	sc->share_seq = seq;
	sc->share_end = sc->share_since + turn_ns;
	sc->turn_done = sc->turn_dev_ns = 0;
	sc->turn_late = 0;
	/* The next command out of a turn says BUSY at once. */
	sc->beat = 0;
	kick(sc);
}

void cmx_sched_release_queue(struct cmx_call *c)
{
	struct cmx_sched *sc = c->s->srv->sched;
	struct runlist *l;

	if (!sc || !sc->held)
		return;
	l = runlist_find(sc, cmx_call_queue(c)->h);
	if (l && l->held_last)
		release_upto(sc, l->held_last);
}

int cmx_sched_resolve(struct cmx_call *c)
{
	struct cmx_sched *sc = c->s->srv->sched;
	const struct cmx_msgdesc *d = c->oi->in;
	struct runlist *l = NULL;
	int enqueue = 0;

	/* Held commands of this session, hence placeholders, exist only while
	 * something is held; kernels sort theirs out in cmx_sched_begin(). */
	if (!sc || !sc->held || (c->oi->flags & CMX_OPF_HOLDABLE))
		return 0;
	if (c->oi->queue >= 0)
		l = runlist_find(sc, cmx_call_queue(c)->h);
	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		void *p = (char *)c->in + f->offset;
		/* An event only looked at (GetEventInfo) keeps its command held. */
		if (f->flags & CMX_F_PEEK)
			continue;
		if (f->type == CMX_T_ID && f->kind == CMX_K_EVENT) {
			struct cmx_ticket *g = ph_find(sc, ((struct cmx_ref *)p)->h);
			if (g)
				g->exposed = 1;
		} else if (f->type == CMX_T_IDS && f->kind == CMX_K_EVENT) {
			struct cmx_refs *r = p;
			for (uint64_t k = 0; k < r->n; k++) {
				struct cmx_ticket *g = ph_find(sc, r->h[k]);
				if (g)
					g->exposed = 1;
			}
			enqueue |= !!(f->flags & CMX_F_WAITLIST);
		}
	}
	if (!l || !l->held_last)
		return 0;
	/* clFinish waits for the queue's last command: the newest held one's
	 * placeholder. Any other command on the queue would go to the driver
	 * ahead of the held ones, which could then never run before it: they
	 * go first, out of turn. */
	if (enqueue)
		release_upto(sc, l->held_last);
	else if (c->oi->queue_use == CMX_QUEUE_FINISH)
		l->held_last->exposed = 1;
	return 0;
}

void cmx_sched_kernel_arg(struct cmx_call *c, uint64_t id, cl_kernel *k)
{
	struct cmx_sched *sc = c->s->srv->sched;
	struct cmx_obj *o = cmx_session_obj(c->s, id, CMX_K_KERNEL);
	cl_kernel clone = NULL;
	cl_int e = CL_INVALID_OPERATION;

	if (!sc || !sc->held || !*k_slot(sc, *k) || !o || o->h != *k)
		return;
	/* Held launches keep the native kernel as it is, with the arguments
	 * they were enqueued with; the session goes on with a copy. */
	if (c->s->srv->platform_version >= 210)
		clone = clCloneKernel(*k, &e);
	if (!clone || e) {
		struct cmx_ticket *last = NULL;
		cmx_dbg("sched: no clone of kernel %p (%d): its launches go now", (void *)*k, e);
		for (struct cmx_ticket *g = c->s->tenant->held; g; g = g->next_held)
			if (g->op->kernel == *k)
				last = g;
		if (last)
			release_upto(sc, last);
		return;
	}
	cmx_dbg("sched: kernel %p cloned for its held launches", (void *)*k);
	o->h = clone;
	clReleaseKernel(*k);
	*k = clone;
}

void cmx_sched_finished(struct cmx_server *srv, cl_command_queue q)
{
	struct cmx_sched *sc = srv->sched;
	struct runlist *l = sc && sc->runlists ? runlist_find(sc, q) : NULL;

	/* Its newest command on the device, if it has completed: a later one
	 * (another thread's, since the wait) is left to its reports. */
	if (l && l->in_order && l->head)
		report_done((struct cmx_ticket *)((char *)l->tail -
						  offsetof(struct cmx_ticket, next_held)));
}

void cmx_sched_poke(struct cmx_server *srv)
{
	if (srv->sched && srv->sched->held)
		kick(srv->sched);
}

int cmx_sched_is_held(const struct cmx_server *srv, cl_event e)
{
	struct cmx_sched *sc = srv->sched;
	struct cmx_ticket *g = sc ? ph_find(sc, e) : NULL;

	return g && g->op;
}

void cmx_sched_drop(struct cmx_session *s)
{
	struct cmx_sched *sc = s->srv->sched;
	struct cmx_tenant *t = s->tenant;
	struct cmx_ticket **pp = &t->held;

	if (!sc)
		return;
	/* Never enqueued: the driver has nothing of them; the charges go. */
	while (*pp) {
		struct cmx_ticket *g = *pp;
		struct runlist *l = g->runlist;
		if (g->session != s->id) {
			pp = &g->next_held;
			continue;
		}
		*pp = g->next_held;
		unhold(sc, g);
		ph_complete(sc, g, CL_OUT_OF_RESOURCES);
		inflight_dec(sc, g->t);
		g->t->completed++;
		g->runlist = NULL;
		runlist_put(sc, l);
		ticket_free(g);
	}
	t->held_tail = &t->held;
	while (*t->held_tail)
		t->held_tail = &(*t->held_tail)->next_held;
	kept_put(sc, s->id);
	kick(sc);
}
