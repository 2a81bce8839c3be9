// SPDX-License-Identifier: MIT
// The front end: starts and supervises one worker process per tenant (or
// trusted group), hands each connection to its tenant's worker at Hello,
// and keeps the tenants' quotas and usage for the admin socket.
#define _GNU_SOURCE
#include "front.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/close_range.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <json.h>

#include "jsonline.h"
#include "dispatch.h"
#include "conn.h"
#include "checkpoint.h"
#include "ctl.h"
#include "ivshmem.h"
#include "listener.h"
#include "log.h"
#include "migrate.h"
#include "server.h"
#include "state.h"
#include "text.h"
#include "vhost.h"

#define KEY_MAX	   CMX_TENANT_KEY
#define MAX_VSPECS 64
/* A worker that ends within this of its start waits this long before it is
 * started again (a device that fails at once must not spin the daemon). */
#define RESTART_BACKOFF_NS 1000000000ull
/* How long an admin request waits for the workers' usage reports. */
#define REPORT_WAIT_MS 250
/* SIGTERM: how long workers may drain before they are killed. */
#define DRAIN_GRACE_MS 1500
/* With --state-dir a worker first writes its sessions down (a GiB of
 * buffers takes seconds) and sends what the drain finished. */
#define DRAIN_GRACE_CKPT_MS 120000
/*
 * The arbiter between workers (host/ctl.h). A worker that said BUSY within
 * SHARE_TTL_NS has work. A turn is at least SHARE_MIN_TURN_NS. A holder
 * that has not said TURNED SHARE_DRAIN_NS after its turn's end (a kernel
 * that does not end, a worker that does not answer) leaves the arbitration
 * until it does: the others go on, beside it as natively. The arbiter
 * looks at the clock every SHARE_TICK_NS while it arbitrates.
 */
#define SHARE_TTL_NS	  (3 * CMX_SHARE_BEAT_NS)
#define SHARE_MIN_TURN_NS (20ull * 1000 * 1000)
#define SHARE_DRAIN_NS	  (500ull * 1000 * 1000)
#define SHARE_TICK_NS	  (10ull * 1000 * 1000)
#define SHARE_OWED_NS	  (1ull * 1000 * 1000)

/*
 * One running worker process. A link outlives its worker's place in the
 * table: the process is reaped (pid = 0) and the control socket's last
 * receive completes (ctl = -1) in either order; the link is freed when both
 * have happened.
 */
struct link {
	struct cmx_io io;
	struct worker *w; /* NULL once detached (ended or retiring) */
	pid_t pid;
	int ctl;
	int ready;
	uint64_t move_seq; /* the move it owes an answer to (CMX_CTL_MIGRATED), or 0 */
	char key[KEY_MAX]; /* its worker's, for log lines */
	struct link *next; /* every link, for reaping by pid */
	uint8_t buf[CMX_CTL_MAX];
};

struct worker {
	char key[KEY_MAX];
	struct link *link; /* the running process, or NULL */
	int owns;	   /* it serves listeners or VM devices: kept running */
	uint64_t started_ns;
	unsigned starts; /* processes started for it, ever */
	unsigned quick_ends;
	struct cmx_io restart_io;
	struct __kernel_timespec restart_ts;
	int restart_armed;
	/* The arbiter's (share_*()). */
	uint64_t beat_ns;    /* its last BUSY */
	uint64_t vtime;	     /* device time of its turns, over its weight */
	uint64_t turn_start, turn_seq; /* its last turn's start and number */
	unsigned share;	     /* the mode it was last told (enum cmx_share_mode) */
	int member;	     /* it takes turns: it had work at its last word */
	unsigned flags;	     /* its last BUSY's or TURNED's (CMX_BUSY_*) */
	int stuck;	     /* its turn ran SHARE_DRAIN_NS over: out until TURNED */
	struct worker *next;
};

/* An admin request waiting for usage reports. */
struct round {
	uint64_t seq;
	unsigned waiting;
	int done;
	void (*fn)(void *);
	void *arg;
	struct cmx_io tmo_io;
	struct __kernel_timespec ts;
	struct round *next;
};

/* An admin's migrate request waiting for the workers that move the
 * tenant's sessions (CMX_CTL_MIGRATED). */
struct move {
	uint64_t seq;
	unsigned waiting;
	int err;
	struct cmx_migrate_stats st;
	void (*done)(void *arg, int err, const struct cmx_migrate_stats *st);
	void *arg;
	struct move *next;
};

static struct {
	struct cmx_server *srv;
	struct cmx_front_opts o;
	struct cmx_listener *ls;
	const char *const *lspecs;
	unsigned nls;
	struct worker **lowner; /* per listener: its worker, or NULL (served here) */
	const char *vspecs[MAX_VSPECS];
	struct worker *vowner[MAX_VSPECS];
	char *vadded[MAX_VSPECS]; /* cmx_front_device_add()'s copy, freed on removal */
	int vfd[MAX_VSPECS];	  /* and its listening socket, or -1 */
	unsigned nvspecs;
	struct worker *workers;
	struct link *links;
	struct round *rounds;
	struct move *moves;
	uint64_t seq;
	char exe[PATH_MAX];
	unsigned live; /* links whose process has not been reaped */
	int draining;
	struct cmx_io grace_io;
	struct __kernel_timespec grace_ts;
	/* The arbiter: who holds the turn (NULL: nobody arbitrates), since
	 * when, for how long, and its number. */
	struct worker *turn;
	uint64_t turn_seq, turn_len;
	struct cmx_io share_io;
	struct __kernel_timespec share_ts;
	int share_armed;
	/* A worker said its driver time-slices contexts (CMX_READY_SLICES):
	 * busy workers take turns even at equal weights. */
	int slices;
} fe;

static void link_recv(struct link *k);
static int worker_spawn(struct worker *w);
static void reaped(pid_t pid, int st);
static int send_quota(struct link *k, const struct cmx_tenant *t);
static void share_busy(struct worker *w);
static void share_turned(struct worker *w, uint64_t seq, int has_work);
static void share_gone(struct worker *w);

static const char *key_of(const struct cmx_tenant *t, char *out)
{
	return cmx_tenant_key(t, out);
}

static struct worker *worker_find(const char *key)
{
	for (struct worker *w = fe.workers; w; w = w->next)
		if (!strcmp(w->key, key))
			return w;
	return NULL;
}

static struct worker *worker_get(const char *key)
{
	struct worker *w = worker_find(key);

	if (w)
		return w;
	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	snprintf(w->key, sizeof(w->key), "%s", key);
	w->next = fe.workers;
	fe.workers = w;
	return w;
}

/* ---- usage reports and admin rounds ---- */

static void round_finish(struct round *r)
{
	if (r->done)
		return;
	r->done = 1;
	io_uring_prep_timeout_remove(cmx_loop_sqe(fe.srv->loop, NULL), (uint64_t)(uintptr_t)&r->tmo_io,
				     0);
	r->fn(r->arg);
}

static void round_expired(struct cmx_io *io, int res, unsigned flags)
{
	struct round *r = (struct round *)((char *)io - offsetof(struct round, tmo_io));

	if (!r->done) {
		cmx_warn("admin: a worker did not report its usage within %d ms; its last "
			 "figures are shown",
			 REPORT_WAIT_MS);
		r->done = 1;
		r->fn(r->arg);
	}
	for (struct round **p = &fe.rounds; *p; p = &(*p)->next)
		if (*p == r) {
			*p = r->next;
			break;
		}
	free(r);
}

void cmx_front_refresh(void (*fn)(void *), void *arg)
{
	struct round *r = calloc(1, sizeof(*r));
	struct cmx_ctl_hdr h = { .op = CMX_CTL_USAGE, .len = sizeof(h) };

	if (!r) {
		fn(arg);
		return;
	}
	r->seq = h.seq = ++fe.seq;
	r->fn = fn;
	r->arg = arg;
	for (struct worker *w = fe.workers; w; w = w->next)
		if (w->link && w->link->ready && w->link->ctl >= 0 &&
		    !cmx_ctl_send(w->link->ctl, &h, sizeof(h), -1, 1))
			r->waiting++;
	if (!r->waiting) {
		free(r);
		fn(arg);
		return;
	}
	r->ts.tv_nsec = REPORT_WAIT_MS * 1000000ll;
	r->tmo_io.cb = round_expired;
	io_uring_prep_timeout(cmx_loop_sqe(fe.srv->loop, &r->tmo_io), &r->ts, 0, 0);
	r->next = fe.rounds;
	fe.rounds = r;
}

/* A worker's report ended (seq): the rounds that waited for it. */
static void report_end(uint64_t seq)
{
	for (struct round *r = fe.rounds; r; r = r->next)
		if (r->seq == seq && !r->done && !--r->waiting)
			round_finish(r);
}

/* Live figures of the tenants a worker served go with it. */
static void usage_forget(const struct worker *w)
{
	char key[KEY_MAX];

	for (struct cmx_tenant *t = fe.srv->tenants.list; t; t = t->next)
		if (!strcmp(key_of(t, key), w->key))
			t->sessions = t->objects = t->bytes = t->inflight = t->output = 0;
}

/* ---- the arbiter between workers ---- */

/* A worker's weight: its tenants' (a group's together). */
static uint64_t worker_weight(const struct worker *w)
{
	char key[KEY_MAX];
	uint64_t sum = 0;

	for (struct cmx_tenant *t = fe.srv->tenants.list; t; t = t->next)
		if (!strcmp(key_of(t, key), w->key))
			sum += t->q.weight;
	return sum ? sum : 1;
}

static void share_send(struct worker *w, unsigned mode, uint64_t turn_ns, uint64_t seq)
{
	struct cmx_ctl_share m = { .h = { .op = CMX_CTL_SHARE, .len = sizeof(m), .seq = seq },
				   .mode = mode,
				   .turn_ns = turn_ns };

	w->share = mode;
	/* Not sent: a turn is then never answered (the holder is taken for
	 * stuck), a hold never kept, a free never heard (the worker frees
	 * itself): nobody waits for good. */
	if (w->link && w->link->ready && w->link->ctl >= 0)
		cmx_ctl_send(w->link->ctl, &m, sizeof(m), -1, 1);
}

static void share_tick(struct cmx_io *io, int res, unsigned flags);

static void share_arm(void)
{
	if (fe.share_armed)
		return;
	fe.share_armed = 1;
	fe.share_ts.tv_sec = 0;
	fe.share_ts.tv_nsec = (long long)SHARE_TICK_NS;
	fe.share_io.cb = share_tick;
	io_uring_prep_timeout(cmx_loop_sqe(fe.srv->loop, &fe.share_io), &fe.share_ts, 0, 0);
}

/* The holder's turn is over: charged what it had of the device. */
static void share_charge(struct worker *w, uint64_t now)
{
	w->vtime += (now - w->turn_start) / worker_weight(w);
}

/*
 * Whether workers of equal weights take turns: where the driver time-slices
 * contexts (fe.slices), and at least two of them keep shallow queues. A
 * queue that runs dry between a completion and its refill loses the device
 * to another context for a slice: side by side, 8 tenants with 4 short
 * kernels in flight each got 0.43 of 8 native processes on the H200, 0.58
 * to 0.73 in turns. Deep queues (long kernels) keep the device as native
 * processes do, and turns would make every other worker, a latency-bound
 * one above all, wait for them: a probe beside 8 such tenants waited a p99
 * of 103 ms in turns, 20.5 ms side by side (17.1 ms natively).
 */
static int equal_turns(unsigned shallow)
{
	return fe.slices && shallow >= 2;
}

/*
 * The next turn: to the member with the least device time for its weight
 * (the last holder only if it alone is owed), for its weight's part of a
 * round; every other worker holds, members or not (one that gets work
 * says BUSY and becomes a member): the device is one worker's at a time.
 * With fewer than two members the arbitration ends and every worker
 * launches at will. Stuck workers hear nothing until they answer.
 */
static void share_next(void)
{
	struct worker *best = NULL, *last = fe.turn;
	uint64_t wsum = 0, wmin = UINT64_MAX, wmax = 0, now = cmx_now_ns();
	unsigned n = 0, shallow = 0;

	for (struct worker *w = fe.workers; w; w = w->next) {
		uint64_t wt;
		if (!w->member || w->stuck || !w->link)
			continue;
		n++;
		shallow += !!(w->flags & CMX_BUSY_SHALLOW);
		wt = worker_weight(w);
		wsum += wt;
		wmin = wt < wmin ? wt : wmin;
		wmax = wt > wmax ? wt : wmax;
		if (!best || w->vtime < best->vtime || (w->vtime == best->vtime && best == last))
			best = w;
	}
	fe.turn = NULL;
	/* Equal weights are what the driver gives processes side by side
	 * (the kernel's scheduler shares PoCL's threads evenly), and side by
	 * side the device stays full: turns would only cost throughput. Not
	 * between shallow queues on a driver that time-slices contexts. */
	if (n < 2 || (wmin == wmax && !equal_turns(shallow)) || fe.draining)
		best = NULL;
	for (struct worker *w = fe.workers; w; w = w->next) {
		unsigned mode = best ? CMX_SHARE_HOLD : CMX_SHARE_FREE;
		if (w->stuck || w == best || !w->link)
			continue;
		if (!best)
			w->member = 0;
		if (w->share != mode)
			share_send(w, mode, 0, 0);
	}
	if (!best)
		return;
	fe.turn = best;
	fe.turn_len = CMX_SHARE_ROUND_NS * worker_weight(best) / wsum;
	if (fe.turn_len < SHARE_MIN_TURN_NS)
		fe.turn_len = SHARE_MIN_TURN_NS;
	best->turn_start = now;
	best->turn_seq = ++fe.turn_seq;
	cmx_dbg("share: turn %" PRIu64 " to %s for %" PRIu64 " us, %u with work", best->turn_seq,
		best->key, fe.turn_len / 1000, n);
	share_send(best, CMX_SHARE_TURN, fe.turn_len, best->turn_seq);
	share_arm();
}

static void share_tick(struct cmx_io *io, int res, unsigned flags)
{
	struct worker *w = fe.turn;
	uint64_t now = cmx_now_ns();

	fe.share_armed = 0;
	if (!w)
		return;
	if (now > w->turn_start + fe.turn_len + SHARE_DRAIN_NS) {
		cmx_info("worker %s: its turn on the device ran %" PRIu64 " ms over: the others "
			 "take turns without it until it finishes",
			 w->key, (now - w->turn_start - fe.turn_len) / 1000000);
		share_charge(w, now);
		w->stuck = 1;
		w->member = 0;
		share_next();
	}
	if (fe.turn)
		share_arm();
}

/* w has work: with another worker that has, the arbitration starts; while
 * it goes on, w joins it (held until its turn), owed no more than the
 * member owed most. A member's beats while held change nothing. */
static void share_busy(struct worker *w)
{
	uint64_t now = cmx_now_ns(), least = UINT64_MAX, wmin = UINT64_MAX, wmax = 0;
	unsigned n = 0, shallow = 0;

	w->beat_ns = now;
	if (w->stuck || w == fe.turn || fe.draining)
		return;
	if (fe.turn) {
		if (w->member && w->share == CMX_SHARE_HOLD)
			return;
		if (!w->member) {
			for (struct worker *o = fe.workers; o; o = o->next)
				if (o->member && !o->stuck && o->vtime < least)
					least = o->vtime;
			w->member = 1;
			/* Back from idle having used little: next, before the
			 * members (their virtual times lie within a turn of
			 * each other, and a probe charged 0.6 ms more than the
			 * least waited behind up to seven turns of 20 ms). At
			 * most SHARE_OWED_NS gained per return. */
			if (w->vtime <= least + SHARE_OWED_NS)
				w->vtime = least > 0 ? least - 1 : 0;
		}
		share_send(w, CMX_SHARE_HOLD, 0, 0);
		return;
	}
	for (struct worker *o = fe.workers; o; o = o->next)
		if (o->link && !o->stuck && now - o->beat_ns < SHARE_TTL_NS) {
			uint64_t wt = worker_weight(o);
			n++;
			shallow += !!(o->flags & CMX_BUSY_SHALLOW);
			wmin = wt < wmin ? wt : wmin;
			wmax = wt > wmax ? wt : wmax;
		}
	/* Turns only between workers of different weights (share_next()). */
	if (n < 2 || (wmin == wmax && !equal_turns(shallow)))
		return;
	for (struct worker *o = fe.workers; o; o = o->next)
		if (o->link && !o->stuck && now - o->beat_ns < SHARE_TTL_NS) {
			o->member = 1;
			o->vtime = o == w ? 0 : 1; /* the newcomer goes first */
		}
	share_next();
}

/* w's turn seq is over and drained; has_work: it holds launches still. */
static void share_turned(struct worker *w, uint64_t seq, int has_work)
{
	uint64_t now = cmx_now_ns();

	if (w == fe.turn && seq == fe.turn_seq) {
		cmx_dbg("share: turn %" PRIu64 " of %s over after %" PRIu64 " us%s", seq, w->key,
			(now - w->turn_start) / 1000, has_work ? "" : ", no more work");
		share_charge(w, now);
		w->member = has_work;
		share_next();
		return;
	}
	if (!w->stuck || seq != w->turn_seq)
		return;
	/* A stuck holder's late answer: it takes turns again, or is free. */
	w->stuck = 0;
	w->member = fe.turn && has_work;
	share_send(w, fe.turn ? CMX_SHARE_HOLD : CMX_SHARE_FREE, 0, 0);
	if (!fe.turn && has_work)
		share_busy(w);
}

/* w's process is gone (or going): out of the arbitration. */
static void share_gone(struct worker *w)
{
	w->member = 0;
	w->stuck = 0;
	w->beat_ns = 0;
	w->share = CMX_SHARE_FREE;
	if (fe.turn == w)
		share_next();
}

/* ---- one worker's control socket ---- */

static void link_free_if_done(struct link *k)
{
	if (k->pid || k->ctl >= 0)
		return;
	for (struct link **p = &fe.links; *p; p = &(*p)->next)
		if (*p == k) {
			*p = k->next;
			break;
		}
	free(k);
}

/* One worker's part of a move; the admin is answered after the last. A
 * worker that ends first answers with m == NULL. */
static void move_answer(uint64_t seq, const struct cmx_ctl_migrated *m)
{
	struct move **pp = &fe.moves, *mv;

	while (*pp && (*pp)->seq != seq)
		pp = &(*pp)->next;
	if (!(mv = *pp))
		return;
	if (!m) {
		mv->err = mv->err ? mv->err : -ECHILD;
		snprintf(mv->st.why, sizeof(mv->st.why), "a worker ended during the move");
	} else if (m->err < 0 && !mv->err) {
		mv->err = m->err;
		snprintf(mv->st.why, sizeof(mv->st.why), "%.*s", (int)sizeof(m->why), m->why);
	}
	if (m) {
		mv->st.sessions += m->sessions;
		mv->st.bytes += m->bytes;
		mv->st.ns = m->ns > mv->st.ns ? m->ns : mv->st.ns;
	}
	if (--mv->waiting)
		return;
	*pp = mv->next;
	mv->done(mv->arg, mv->err, &mv->st);
	free(mv);
}

static void on_packet(struct link *k, size_t n)
{
	const struct cmx_ctl_hdr *h = (const void *)k->buf;
	struct worker *w = k->w;
	char key[KEY_MAX];

	if (n < sizeof(*h) || h->len != n || !w)
		return;
	switch (h->op) {
	case CMX_CTL_READY:
		k->ready = 1;
		if (n == sizeof(struct cmx_ctl_ready) &&
		    (((const struct cmx_ctl_ready *)k->buf)->flags & CMX_READY_SLICES))
			fe.slices = 1;
		break;
	case CMX_CTL_USAGE: {
		const struct cmx_ctl_usage *u = (const void *)k->buf;
		struct cmx_tenant *t;
		if (n == sizeof(*h) || !h->tenant[0]) {
			report_end(h->seq);
			break;
		}
		/* Only figures of its own tenants are taken from a worker. */
		if (n != sizeof(*u) || !memchr(h->tenant, '\0', sizeof(h->tenant)) ||
		    !(t = cmx_tenant_find(&fe.srv->tenants, h->tenant)) ||
		    strcmp(key_of(t, key), w->key))
			break;
		cmx_ctl_usage_unpack(t, u);
		break;
	}
	case CMX_CTL_BUSY:
		if (n == sizeof(struct cmx_ctl_busy) && k->ready) {
			w->flags = ((const struct cmx_ctl_busy *)k->buf)->flags;
			share_busy(w);
		}
		break;
	case CMX_CTL_TURNED:
		if (n == sizeof(struct cmx_ctl_turned)) {
			const struct cmx_ctl_turned *m = (const void *)k->buf;
			w->flags = m->flags;
			share_turned(w, h->seq, !!m->has_work);
		}
		break;
	case CMX_CTL_MIGRATED:
		if (n == sizeof(struct cmx_ctl_migrated) && k->move_seq == h->seq) {
			k->move_seq = 0;
			move_answer(h->seq, (const struct cmx_ctl_migrated *)k->buf);
		}
		break;
	case CMX_CTL_RESTORED:
		if (n == sizeof(struct cmx_ctl_migrated))
			cmx_migrate_in_restored(
			    fe.srv, h->seq,
			    ((const struct cmx_ctl_migrated *)k->buf)->err < 0 ? -EIO : 0);
		break;
	case CMX_CTL_POISONED: {
		const struct cmx_ctl_poisoned *p = (const void *)k->buf;
		if (n != sizeof(*p))
			break;
		cmx_warn("worker %s (pid %d): the driver's state is lost (%.*s): new sessions "
			 "go to a new worker; this one ends with its last session",
			 w->key, (int)k->pid, (int)sizeof(p->why), p->why);
		k->w = NULL;
		w->link = NULL;
		share_gone(w);
		if (w->owns && !fe.draining)
			worker_spawn(w);
		break;
	}
	case CMX_CTL_OVERTIME: {
		/* Whatever the worker says, it can only end itself. */
		const struct cmx_ctl_poisoned *p = (const void *)k->buf;
		if (n != sizeof(*p) || !memchr(h->tenant, '\0', sizeof(h->tenant)))
			break;
		cmx_warn("tenant %s: %.*s: its worker %s (pid %d) is ended", h->tenant,
			 (int)sizeof(p->why), p->why, w->key, (int)k->pid);
		kill(k->pid, SIGKILL);
		break;
	}
	default:
		break;
	}
}

static void link_done(struct cmx_io *io, int res, unsigned flags)
{
	struct link *k = (struct link *)io;

	if (res > 0) {
		on_packet(k, (size_t)res);
		link_recv(k);
		return;
	}
	/* Hang-up (the worker is ending) or an error: the process is reaped
	 * on SIGCHLD, which also starts its successor. */
	close(k->ctl);
	k->ctl = -1;
	link_free_if_done(k);
}

static void link_recv(struct link *k)
{
	k->io.cb = link_done;
	io_uring_prep_recv(cmx_loop_sqe(fe.srv->loop, &k->io), k->ctl, k->buf, sizeof(k->buf), 0);
}

/* ---- starting workers ---- */

static void arg_add(char **argv, unsigned *n, char *store, size_t *used, size_t cap,
		    const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static void arg_add(char **argv, unsigned *n, char *store, size_t *used, size_t cap,
		    const char *fmt, ...)
{
	va_list ap;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(store + *used, cap - *used, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= cap - *used)
		return; /* the exec then fails on a missing argument */
	argv[(*n)++] = store + *used;
	*used += (size_t)k + 1;
}

#define ARGS_MAX 256

/* A group one of whose tenants says context = shared. */
static int worker_shares_context(const struct worker *w)
{
	char key[KEY_MAX];

	for (struct cmx_tenant *t = fe.srv->tenants.list; t; t = t->next)
		if (t->group[0] && t->shared_context && !strcmp(key_of(t, key), w->key))
			return 1;
	return 0;
}

/*
 * Whether a worker's native queues profile, for its scheduler's device
 * time: only where it holds a tenant to a cap, whose bucket must not count
 * the time the device gives other workers' contexts. The tenants of a
 * group take turns on the device, so the time between completions is
 * theirs, and a worker that profiles pays for it (NVIDIA's enqueue rate:
 * 0.47 of native with every queue profiling, 0.76 without; a group of two
 * busy tenants with short kernels: 13.8k kernels/s against 18.5k).
 */
static int worker_profiles(const struct worker *w)
{
	char key[KEY_MAX];

	if (!fe.o.profile)
		return 0;
	if (strncmp(w->key, "t:", 2))
		return 1; /* a TLS listener's: its tokens may name capped tenants */
	for (struct cmx_tenant *t = fe.srv->tenants.list; t; t = t->next)
		if (!strcmp(key_of(t, key), w->key) && t->q.cap)
			return 1;
	return 0;
}

static int worker_spawn(struct worker *w)
{
	static char store[65536];
	char *argv[ARGS_MAX];
	unsigned n = 0;
	size_t used = 0;
	struct link *k;
	int sv[2];
	pid_t pid, parent = getpid();

#define ADD(...) arg_add(argv, &n, store, &used, sizeof(store), __VA_ARGS__)
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	k = calloc(1, sizeof(*k));
	if (!k) {
		close(sv[0]);
		close(sv[1]);
		return -ENOMEM;
	}
	ADD("%s", fe.exe);
	ADD("--worker");
	ADD("%s", w->key);
	ADD("--ctl");
	ADD("%d", sv[1]);
	ADD("--threads");
	ADD("%u", fe.o.threads);
	ADD("--sched-window");
	ADD("%" PRIu64, fe.o.window_us);
	ADD("--profile");
	ADD("%d", worker_profiles(w));
	if (worker_shares_context(w))
		ADD("--shared-context");
	ADD("--admin");
	ADD("none");
	if (fe.o.device) {
		ADD("--device");
		ADD("%s", fe.o.device);
	}
	if (fe.o.config) {
		ADD("--config");
		ADD("%s", fe.o.config);
	}
	if (fe.o.user) {
		ADD("--user");
		ADD("%s", fe.o.user);
	}
	if (fe.o.sandbox) {
		ADD("--sandbox");
		ADD("%s", fe.o.sandbox);
	}
	if (fe.o.state_dir) {
		ADD("--state-dir");
		ADD("%s", fe.o.state_dir);
	}
	for (unsigned i = 0; i < fe.nls && n + 2 < ARGS_MAX; i++)
		if (fe.lowner[i] == w) {
			ADD("--listen-fd");
			ADD("%d:%s", fe.ls[i].fd, fe.lspecs[i]);
		}
	for (unsigned i = 0; i < fe.nvspecs && n + 2 < ARGS_MAX; i++)
		if (fe.vowner[i] == w) {
			ADD("--listen");
			ADD("%s", fe.vspecs[i]);
		}
	argv[n] = NULL;
#undef ADD

	pid = fork();
	if (pid < 0) {
		int e = -errno;
		close(sv[0]);
		close(sv[1]);
		free(k);
		return e;
	}
	if (pid == 0) {
		/* Only async-signal-safe calls until exec: this process has
		 * threads. The worker ends with the front end. */
		sigset_t none;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* The worker gets its control socket and its listeners, and
		 * nothing else of this process: not other tenants' sockets,
		 * not the front end's io_uring (whose rings a process holding
		 * the fd could map and submit to). */
		syscall(SYS_close_range, 3, ~0u, CLOSE_RANGE_CLOEXEC);
		prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
		fcntl(sv[1], F_SETFD, 0);
		for (unsigned i = 0; i < fe.nls; i++)
			if (fe.lowner[i] == w)
				fcntl(fe.ls[i].fd, F_SETFD, 0);
		for (unsigned i = 0; i < fe.nvspecs; i++)
			if (fe.vowner[i] == w && fe.vadded[i] && fe.vfd[i] >= 0)
				fcntl(fe.vfd[i], F_SETFD, 0);
		execv(fe.exe, argv);
		_exit(127);
	}
	close(sv[1]);
	k->next = fe.links;
	fe.links = k;
	memcpy(k->key, w->key, sizeof(k->key));
	k->w = w;
	k->pid = pid;
	k->ctl = sv[0];
	w->link = k;
	w->share = CMX_SHARE_FREE;
	w->started_ns = cmx_now_ns();
	w->starts++;
	fe.live++;
	link_recv(k);
	cmx_info("worker %s started (pid %d)", w->key, (int)pid);
	/* Quotas set since the config was read (clmuxctl, a domain's
	 * metadata) reach the new process before its first session. */
	{
		char tkey[KEY_MAX];
		for (struct cmx_tenant *t = fe.srv->tenants.list; t; t = t->next)
			if (!strcmp(key_of(t, tkey), w->key))
				send_quota(k, t);
	}
	return 0;
}

static void restart_due(struct cmx_io *io, int res, unsigned flags)
{
	struct worker *w = (struct worker *)((char *)io - offsetof(struct worker, restart_io));

	w->restart_armed = 0;
	if (!fe.draining && !w->link && worker_spawn(w))
		cmx_err("worker %s: cannot start", w->key);
}

/* A worker that serves listeners is started again at once, or after a
 * pause when it keeps ending as soon as it starts. */
static void worker_restart(struct worker *w)
{
	if (fe.draining || w->link || w->restart_armed)
		return;
	if (cmx_now_ns() - w->started_ns > RESTART_BACKOFF_NS)
		w->quick_ends = 0;
	if (w->quick_ends++ < 2) {
		if (worker_spawn(w))
			cmx_err("worker %s: cannot start", w->key);
		return;
	}
	w->restart_ts.tv_sec = 1;
	w->restart_io.cb = restart_due;
	w->restart_armed = 1;
	io_uring_prep_timeout(cmx_loop_sqe(fe.srv->loop, &w->restart_io), &w->restart_ts, 0, 0);
}

/* Waits (before the loop runs) until every started worker says ready, or
 * one ends: the daemon starts only if its device opens. */
static int wait_ready(void)
{
	for (struct worker *w = fe.workers; w; w = w->next) {
		struct link *k = w->link;
		int st;
		while (k && !k->ready) {
			int fd;
			long n = cmx_ctl_recv(k->ctl, k->buf, &fd);
			if (fd >= 0)
				close(fd);
			if (n > 0) {
				on_packet(k, (size_t)n);
				continue;
			}
			waitpid(k->pid, &st, 0);
			cmx_err("worker %s ended before it was ready (%s %d)", w->key,
				WIFSIGNALED(st) ? "signal" : "status",
				WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
			return -ENODEV;
		}
	}
	return 0;
}

/* The front end's connections: Auth as in a worker, and at Hello they go
 * to their worker. */
static const struct cmx_conn_ops front_ops = { .auth = cmx_dispatch_auth,
					       .handoff = cmx_front_handoff };

int cmx_front_start(struct cmx_server *srv, const struct cmx_front_opts *o,
		    struct cmx_listener *ls, const char *const *lspecs, unsigned nls,
		    const char *const *vspecs, unsigned nvspecs)
{
	char key[KEY_MAX];
	ssize_t n;

	fe.srv = srv;
	fe.o = *o;
	srv->conn_ops = &front_ops;
	srv->restore_in_worker = cmx_front_restore;
	fe.ls = ls;
	fe.lspecs = lspecs;
	fe.nls = nls;
	n = readlink("/proc/self/exe", fe.exe, sizeof(fe.exe) - 1);
	if (n <= 0)
		return -errno;
	fe.exe[n] = '\0';
	fe.lowner = calloc(nls ? nls : 1, sizeof(*fe.lowner));
	if (!fe.lowner || nvspecs > MAX_VSPECS)
		return -ENOMEM;
	for (unsigned i = 0; i < nls; i++) {
		struct cmx_listener *l = &ls[i];
		struct cmx_tenant *t = l->tenant[0] ? cmx_tenant_find(&srv->tenants, l->tenant) : NULL;
		if (t)
			fe.lowner[i] = worker_get(key_of(t, key));
		else if (l->tls) {
			/* TLS cannot be handed over: the listener is a worker,
			 * and the tenants its tokens name share it. */
			snprintf(key, sizeof(key), "l:%u", i);
			fe.lowner[i] = worker_get(key);
		}
		if (fe.lowner[i])
			fe.lowner[i]->owns = 1;
	}
	for (unsigned i = 0; i < nvspecs; i++) {
		struct cmx_ident id = { 0 };
		char tenant[CMX_TENANT_NAME] = "", cid[16];
		uint64_t v;
		struct cmx_addr a;
		struct cmx_tenant *t;
		char why[160];
		fe.vspecs[i] = vspecs[i];
		if (!cmx_addr_parse(vspecs[i], &a, why, sizeof(why))) {
			if (!cmx_addr_opt(&a, "tenant", tenant, sizeof(tenant)))
				id.listener_tenant = tenant;
			/* A bad one is refused by the worker's listener. */
			if (!cmx_addr_opt(&a, "cid", cid, sizeof(cid)) &&
			    !cmx_uint_parse(cid, 3, UINT32_MAX, &v)) {
				id.has_cid = 1;
				id.cid = (uint32_t)v;
			}
		}
		t = cmx_tenant_lookup(&srv->tenants, &id);
		if (t)
			key_of(t, key);
		else
			snprintf(key, sizeof(key), "v:%u", i);
		fe.vowner[i] = worker_get(key);
		fe.vowner[i]->owns = 1;
	}
	fe.nvspecs = nvspecs;
	/* The listening sockets are made here, once: a worker that ends and is
	 * started again takes them up, and connections wait in the backlog. */
	for (unsigned i = 0; i < nls; i++) {
		int e = fe.lowner[i] ? cmx_listener_bind(&ls[i]) : cmx_listener_start(fe.srv, &ls[i]);
		if (e)
			return e;
	}
	return 0;
}

int cmx_front_spawn(void)
{
	struct cmx_server *srv = fe.srv;
	char key[KEY_MAX];

	/* The default tenant's worker, or else one: the device is opened at
	 * start, as a daemon without workers would. */
	if (srv->tenants.fallback[0]) {
		struct cmx_tenant *t = cmx_tenant_get(&srv->tenants, srv->tenants.fallback);
		if (t)
			worker_get(key_of(t, key));
	}
	if (!fe.workers && srv->tenants.list)
		worker_get(key_of(srv->tenants.list, key));
	for (struct worker *w = fe.workers; w; w = w->next) {
		int e = worker_spawn(w);
		if (e) {
			cmx_err("cannot start worker %s: %s", w->key, strerror(-e));
			return e;
		}
	}
	return wait_ready();
}

/* The worker that restores state file `name` (cmx_checkpoint_file_ours()):
 * a listener's or a VM device's, named by its key, else its tenant's, named
 * by its header. NULL when there is none here (*why says why, or is NULL
 * when the tenants' workers log the file themselves). */
static struct worker *state_worker(int dfd, const char *name, const char **why)
{
	char fkey[CMX_STATE_KEY_MAX], wkey[CMX_STATE_KEY_MAX], key[KEY_MAX];
	struct cmx_state_head head;
	struct cmx_tenant *t;

	if (cmx_state_name_key(name, fkey, sizeof(fkey)) && fkey[0] != 't') {
		for (struct worker *w = fe.workers; w; w = w->next) {
			cmx_state_key_name(w->key, wkey, sizeof(wkey));
			if (!strcmp(wkey, fkey))
				return w;
		}
		*why = "no such listener or VM device here";
		return NULL;
	}
	if (cmx_state_head_read(dfd, name, &head)) {
		/* A running tenant's worker refuses it with the reason and
		 * sets it aside (NAME.bad). */
		*why = NULL;
		return NULL;
	}
	t = cmx_tenant_find(&fe.srv->tenants, head.tenant);
	if (!t && fe.srv->tenants.fallback[0] && !strcmp(head.tenant, fe.srv->tenants.fallback))
		t = cmx_tenant_get(&fe.srv->tenants, head.tenant);
	if (!t) {
		*why = "no such tenant here";
		return NULL;
	}
	return worker_get(key_of(t, key));
}

void cmx_front_state_workers(void)
{
	int dfd = cmx_checkpoint_dirfd(fe.srv);
	struct dirent *e;
	DIR *d = cmx_checkpoint_dir_list(fe.srv);

	if (!d)
		return;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		const char *why = "";
		struct worker *w;
		int err;
		if (n <= 6 || strcmp(e->d_name + n - 6, ".state"))
			continue;
		w = state_worker(dfd, e->d_name, &why);
		if (!w) {
			if (why)
				cmx_warn("state file %s: not restored: %s; kept", e->d_name, why);
			continue;
		}
		if (w->link)
			continue;
		/* Its restore runs as it starts, before its guests are back.
		 * Like a worker a Hello started, it owns no listener: not
		 * started again should it end. */
		err = worker_spawn(w);
		if (err)
			cmx_err("worker %s: cannot start for state file %s: %s", w->key, e->d_name,
				strerror(-err));
	}
	closedir(d);
}

/* ---- connections ---- */

static void quota_line(const struct cmx_tenant *t, char *out, size_t len)
{
	size_t used = 0;

	out[0] = '\0';
	for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++) {
		char v[64];
		int m;
		cmx_quota_format(&t->q, cmx_quota_keys[k].name, v, sizeof(v));
		m = snprintf(out + used, len - used, "%s%s=%s", used ? " " : "",
			     cmx_quota_keys[k].name, v);
		if (m < 0 || (size_t)m >= len - used)
			break;
		used += (size_t)m;
	}
}

static int send_quota(struct link *k, const struct cmx_tenant *t)
{
	struct cmx_ctl_quota q = { .h = { .op = CMX_CTL_QUOTA, .len = sizeof(q) } };

	snprintf(q.h.tenant, sizeof(q.h.tenant), "%s", t->name);
	quota_line(t, q.line, sizeof(q.line));
	return cmx_ctl_send(k->ctl, &q, sizeof(q), -1, 1);
}

int cmx_front_handoff(struct cmx_conn *c, const uint8_t *from, size_t n)
{
	struct cmx_tenant *t = cmx_tenant_lookup(&fe.srv->tenants, &c->ident);
	struct cmx_ctl_conn *m;
	struct worker *w;
	char key[KEY_MAX];
	int e;

	if (fe.draining)
		return -ESHUTDOWN;
	if (!t) {
		cmx_warn("%s: refused: no tenant for this peer", c->peer.name);
		return -EPERM;
	}
	if (n > CMX_CTL_CONN_BYTES)
		return -EMSGSIZE;
	w = worker_get(key_of(t, key));
	if (!w)
		return -ENOMEM;
	if (w->link && w->link->ctl < 0) {
		/* Ending, not yet reaped: its successor starts now. */
		w->link->w = NULL;
		w->link = NULL;
		usage_forget(w);
		share_gone(w);
	}
	if (!w->link && (e = worker_spawn(w))) {
		cmx_err("worker %s: cannot start: %s", w->key, strerror(-e));
		return e;
	}
	m = malloc(sizeof(*m));
	if (!m)
		return -ENOMEM;
	memset(m, 0, offsetof(struct cmx_ctl_conn, bytes));
	m->h.op = CMX_CTL_CONN;
	m->h.len = (uint32_t)(offsetof(struct cmx_ctl_conn, bytes) + n);
	snprintf(m->h.tenant, sizeof(m->h.tenant), "%s", t->name);
	m->peer = c->peer;
	m->authed = (uint32_t)c->authed;
	m->nbytes = (uint32_t)n;
	memcpy(m->bytes, from, n);
	/* The tenant's quotas go first: they may have changed since the
	 * worker read the config. A worker too busy to take packets (its
	 * socket full) gets no more connections for now. */
	e = send_quota(w->link, t);
	if (!e)
		e = cmx_ctl_send(w->link->ctl, m, m->h.len, c->fd, 1);
	free(m);
	if (e) {
		cmx_warn("%s: refused: worker %s takes no connection now: %s", c->peer.name,
			 w->key, strerror(-e));
		return -EBUSY;
	}
	return 0;
}

/* ---- administration ---- */

void cmx_front_quota(struct cmx_tenant *t)
{
	char key[KEY_MAX];
	struct worker *w = worker_find(key_of(t, key));

	if (w && w->link && w->link->ctl >= 0)
		send_quota(w->link, t);
}

/*
 * Ends w's process at once and waits for it (at most 2 s), so that the
 * device is free when the caller goes on, and no connection of its
 * listeners reaches the dying process: a successor (a worker that owns
 * listeners or devices is started again on reaping) takes them from the
 * backlog.
 */
static void worker_kill(struct worker *w)
{
	pid_t pid = w->link->pid;
	int st;

	kill(pid, SIGKILL);
	for (int i = 0; i < 2000; i++) {
		if (waitpid(pid, &st, WNOHANG) == pid) {
			reaped(pid, st);
			break;
		}
		usleep(1000);
	}
}

/* Whether any listener or VM device is w's to serve. */
static int worker_owns(const struct worker *w)
{
	for (unsigned i = 0; i < fe.nls; i++)
		if (fe.lowner[i] == w)
			return 1;
	for (unsigned i = 0; i < fe.nvspecs; i++)
		if (fe.vowner[i] == w)
			return 1;
	return 0;
}

int cmx_front_device_add(struct cmx_tenant *t, const char *spec, int fd)
{
	char key[KEY_MAX];
	struct worker *w;
	char *copy;

	if (fe.draining)
		return -ESHUTDOWN;
	if (fe.nvspecs == MAX_VSPECS)
		return -ENOSPC;
	w = worker_get(key_of(t, key));
	copy = strdup(spec);
	if (!w || !copy) {
		free(copy);
		return -ENOMEM;
	}
	fe.vspecs[fe.nvspecs] = copy;
	fe.vadded[fe.nvspecs] = copy;
	fe.vfd[fe.nvspecs] = fd;
	fe.vowner[fe.nvspecs++] = w;
	w->owns = 1;
	/* A worker opens its devices at start: a running one (a group's) is
	 * replaced, and its successor, started on reaping, serves them all. */
	if (w->link && w->link->pid) {
		cmx_info("worker %s: restarted to serve %s", w->key, spec);
		worker_kill(w);
		return 0;
	}
	return worker_spawn(w);
}

void cmx_front_device_remove(const char *spec)
{
	struct worker *w = NULL;

	for (unsigned i = 0; i < fe.nvspecs; i++) {
		if (!fe.vadded[i] || strcmp(fe.vspecs[i], spec))
			continue;
		w = fe.vowner[i];
		free(fe.vadded[i]);
		fe.nvspecs--;
		memmove(&fe.vspecs[i], &fe.vspecs[i + 1], (fe.nvspecs - i) * sizeof(fe.vspecs[0]));
		memmove(&fe.vadded[i], &fe.vadded[i + 1], (fe.nvspecs - i) * sizeof(fe.vadded[0]));
		memmove(&fe.vfd[i], &fe.vfd[i + 1], (fe.nvspecs - i) * sizeof(fe.vfd[0]));
		memmove(&fe.vowner[i], &fe.vowner[i + 1], (fe.nvspecs - i) * sizeof(fe.vowner[0]));
		break;
	}
	if (!w)
		return;
	/* Its process holds the device: it ends, and is started again only
	 * for the listeners and devices it still has. */
	w->owns = worker_owns(w);
	if (w->link && w->link->pid)
		worker_kill(w);
}

unsigned cmx_front_evict(struct cmx_tenant *t)
{
	char key[KEY_MAX];
	struct worker *w = worker_find(key_of(t, key));
	unsigned n = (unsigned)t->sessions;
	struct cmx_ctl_hdr h = { .op = CMX_CTL_EVICT, .len = sizeof(h) };

	if (!w || !w->link)
		return 0;
	if (!t->group[0]) {
		/* The worker is the tenant's alone: ending it frees the device
		 * at once, running kernels included (OpenCL stops a context's
		 * kernels only when its process ends). */
		cmx_info("tenant %s evicted: its worker (pid %d) is stopped", t->name,
			 (int)w->link->pid);
		worker_kill(w);
		t->sessions = t->objects = t->bytes = t->inflight = t->output = 0;
		return n;
	}
	snprintf(h.tenant, sizeof(h.tenant), "%s", t->name);
	if (w->link->ctl >= 0)
		cmx_ctl_send(w->link->ctl, &h, sizeof(h), -1, 1);
	return n;
}

int cmx_front_migrate(struct cmx_tenant *t, const char *dest,
		      void (*done)(void *arg, int err, const struct cmx_migrate_stats *st),
		      void *arg)
{
	struct cmx_ctl_hdr h = { .op = CMX_CTL_MIGRATE, .len = sizeof(h) };
	struct move *mv = calloc(1, sizeof(*mv));

	if (!mv)
		return -ENOMEM;
	mv->seq = h.seq = ++fe.seq;
	mv->done = done;
	mv->arg = arg;
	snprintf(h.tenant, sizeof(h.tenant), "%s", t->name);
	/* Every worker moves the tenant's sessions it has (a VM device's
	 * worker serves any tenant), each on a connection of its own made
	 * here: a worker reaches nothing but its own sockets. */
	for (struct link *k = fe.links; k; k = k->next) {
		int fd, e;
		if (!k->pid || k->ctl < 0 || !k->w)
			continue;
		if (k->move_seq) {
			mv->err = -EBUSY;
			snprintf(mv->st.why, sizeof(mv->st.why), "another move is under way");
			break;
		}
		fd = cmx_migrate_connect(dest);
		if (fd < 0) {
			mv->err = fd;
			snprintf(mv->st.why, sizeof(mv->st.why), "%s: %s", dest, strerror(-fd));
			break;
		}
		e = cmx_ctl_send(k->ctl, &h, sizeof(h), fd, 0);
		close(fd);
		if (!e) {
			k->move_seq = h.seq;
			mv->waiting++;
		}
	}
	if (!mv->waiting) {
		done(arg, mv->err, &mv->st);
		free(mv);
		return 0;
	}
	mv->next = fe.moves;
	fe.moves = mv;
	return 0;
}

int cmx_front_restore(struct cmx_tenant *t, const char *name, uint64_t session, uint64_t seq)
{
	struct cmx_ctl_restore m = { .h = { .op = CMX_CTL_RESTORE, .len = sizeof(m), .seq = seq },
				     .session = session };
	char key[KEY_MAX];
	struct worker *w = worker_find(key_of(t, key));

	/* Not running: the worker started for the guest's resume restores
	 * every file of its tenants at its start. */
	if (!w || !w->link || !w->link->pid || w->link->ctl < 0)
		return -ESRCH;
	snprintf(m.h.tenant, sizeof(m.h.tenant), "%s", t->name);
	snprintf(m.name, sizeof(m.name), "%s", name);
	return cmx_ctl_send(w->link->ctl, &m, sizeof(m), -1, 0);
}

unsigned cmx_front_checkpoint(void)
{
	struct cmx_ctl_hdr h = { .op = CMX_CTL_CHECKPOINT, .len = sizeof(h) };
	unsigned n = 0;

	for (struct link *k = fe.links; k; k = k->next)
		if (k->pid && k->ctl >= 0 && !cmx_ctl_send(k->ctl, &h, sizeof(h), -1, 1))
			n++;
	return n;
}

void cmx_front_workers(struct json_object *arr, struct cmx_text *out)
{
	char key[KEY_MAX];

	if (!arr)
		cmx_text_add(out, "%-20s %8s %-9s %6s  %s\n", "WORKER", "PID", "STATE", "STARTS",
			     "TENANTS");
	for (struct link *k = fe.links; k; k = k->next) {
		const char *state = !k->w ? "retiring" : k->ctl < 0 ? "ending"
						     : k->ready ? "running" : "starting";
		struct json_object *o = NULL, *names = NULL;
		const char *tsep = "";
		if (arr) {
			o = json_object_new_object();
			names = json_object_new_array();
			cmx_json_add(o, "worker", json_object_new_string(k->key));
			cmx_json_add(o, "pid", json_object_new_int(k->pid));
			cmx_json_add(o, "state", json_object_new_string(state));
			cmx_json_add(o, "starts", json_object_new_uint64(k->w ? k->w->starts : 0));
		} else {
			cmx_text_add(out, "%-20s %8d %-9s %6u  ", k->key, (int)k->pid, state,
				     k->w ? k->w->starts : 0);
		}
		for (struct cmx_tenant *t = fe.srv->tenants.list; t; t = t->next) {
			if (strcmp(key_of(t, key), k->key))
				continue;
			if (!arr) {
				cmx_text_add(out, "%s%s", tsep, t->name);
				tsep = " ";
			} else if (names) {
				struct json_object *s = json_object_new_string(t->name);
				if (json_object_array_add(names, s))
					json_object_put(s);
			}
		}
		if (!arr) {
			cmx_text_add(out, "\n");
			continue;
		}
		cmx_json_add(o, "tenants", names);
		if (!o || json_object_array_add(arr, o))
			json_object_put(o);
	}
}

/* ---- ends and draining ---- */

static void grace_over(struct cmx_io *io, int res, unsigned flags)
{
	if (res != -ETIME)
		return;
	for (struct link *k = fe.links; k; k = k->next)
		if (k->pid) {
			cmx_warn("worker %s (pid %d) still running: killed", k->key, (int)k->pid);
			kill(k->pid, SIGKILL);
		}
}

static void maybe_stop(void)
{
	if (fe.draining && !fe.live) {
		io_uring_prep_timeout_remove(cmx_loop_sqe(fe.srv->loop, NULL),
					     (uint64_t)(uintptr_t)&fe.grace_io, 0);
		cmx_loop_stop(fe.srv->loop);
	}
}

/* Worker pid ended with status st: its link and, for a listener's worker,
 * its successor. */
static void reaped(pid_t pid, int st)
{
	struct link *k = fe.links;
	struct worker *w;

	while (k && k->pid != pid)
		k = k->next;
	if (!k)
		return;
	w = k->w;
	if (WIFSIGNALED(st))
		cmx_warn("worker %s (pid %d) ended: signal %d (%s)", k->key, (int)pid, WTERMSIG(st),
			 strsignal(WTERMSIG(st)));
	else
		cmx_info("worker %s (pid %d) ended: status %d", k->key, (int)pid, WEXITSTATUS(st));
	fe.live--;
	k->pid = 0;
	k->w = NULL;
	if (k->move_seq) {
		uint64_t seq = k->move_seq;
		k->move_seq = 0;
		move_answer(seq, NULL);
	}
	/* Its control socket's receive completes with the hang-up and frees
	 * the link. */
	if (k->ctl >= 0)
		shutdown(k->ctl, SHUT_RDWR);
	if (w && w->link == k) {
		w->link = NULL;
		usage_forget(w);
		share_gone(w);
		if (w->owns)
			worker_restart(w);
	}
	link_free_if_done(k);
}

void cmx_front_reap(void)
{
	int st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		reaped(pid, st);
	maybe_stop();
}

void cmx_front_drain(void)
{
	unsigned ms = cmx_checkpoint_enabled(fe.srv) ? DRAIN_GRACE_CKPT_MS : DRAIN_GRACE_MS;

	fe.draining = 1;
	for (struct link *k = fe.links; k; k = k->next)
		if (k->pid)
			kill(k->pid, SIGTERM);
	fe.grace_ts.tv_nsec = ms % 1000 * 1000000ll;
	fe.grace_ts.tv_sec = ms / 1000;
	fe.grace_io.cb = grace_over;
	io_uring_prep_timeout(cmx_loop_sqe(fe.srv->loop, &fe.grace_io), &fe.grace_ts, 0, 0);
	maybe_stop();
}
