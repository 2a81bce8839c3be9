// SPDX-License-Identifier: MIT
// shm sessions: the loop reads the command ring when the guest rings the
// doorbell, spins on it for a bounded time while calls keep coming, then
// marks itself idle and sleeps until the next doorbell.
#include "shm.h"

#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "area.h"
#include "conn.h"
#include "log.h"
#include "server.h"
#include "session.h"

#define SPIN_NS	  10000	  /* spin this long after the last call before sleeping */
#define BUDGET_NS 1000000 /* at most this long in one turn: other sessions wait */
/* After a sync call, on a machine with cores to spare: the guest's next
 * call usually comes within microseconds of its reply, and a daemon
 * still looking takes it without a doorbell and a loop wake-up. */
#define SYNC_SPIN_NS	50000
#define SYNC_SPIN_CORES 8

/* How long to look after a sync call: 0 on a small machine, where the
 * spinning would take the core that produces the reply (the driver's
 * threads), SYNC_SPIN_NS with SYNC_SPIN_CORES or more; the
 * shm-sync-spin-us key overrides. */
static uint64_t sync_spin_ns(const struct cmx_server *srv)
{
	static int64_t ns = -1;

	if (ns < 0) {
		int64_t us = srv->tune.shm_sync_spin_us;
		if (us != CMX_TUNE_AUTO)
			ns = us * 1000;
		else
			ns = sysconf(_SC_NPROCESSORS_ONLN) >= SYNC_SPIN_CORES ? SYNC_SPIN_NS : 0;
	}
	return (uint64_t)ns;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void bell_arm(struct cmx_shm *m)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(m->srv->loop, &m->bell_io);

	io_uring_prep_read(sqe, m->bell, &m->bell_val, sizeof(m->bell_val), 0);
}

static void bell_self(struct cmx_shm *m)
{
	uint64_t one = 1;

	if (write(m->bell, &one, sizeof(one)) < 0)
		cmx_err("doorbell write: %m");
}

int cmx_shm_pump(struct cmx_server *srv, struct cmx_conn *(*chan)(void *arg, int ntf), void *arg,
		 int *took)
{
	uint64_t start = now_ns(), until = start + SPIN_NS;

	for (unsigned i = 0;; i++) {
		struct cmx_conn *c = chan(arg, 0), *nc;
		int sync;
		long n;

		if (!c)
			return 0;
		/* Held back (its tenant's rate, its unread output): nothing to
		 * take until it is let go (ring_resume() for the doorbell
		 * rings; an ivshmem slot's next turn). */
		if (cmx_conn_held(c))
			return 1;
		cmx_loop_turn_mark(srv->loop);
		n = cmx_conn_ring_input(c);
		if (!(c = chan(arg, 0)))
			return 0; /* the session ended on a bad message */
		sync = c->last_sync;
		cmx_conn_kick(c);
		if ((nc = chan(arg, 1)))
			cmx_conn_kick(nc);
		if (!chan(arg, 0))
			return 0; /* ended on an impossible ring tail */
		if (n > 0) {
			*took = 1;
			/* A guest that just made a sync call sends nothing more
			 * until it has the reply: spinning would only take the
			 * CPU from the threads that produce that reply, unless
			 * there are cores to spare. A reply still to come posts
			 * to the loop, which ends the spin. */
			if (sync && !sync_spin_ns(srv))
				return 1;
			until = now_ns() + (sync ? sync_spin_ns(srv) : SPIN_NS);
			continue;
		}
		if ((i & 31) == 0) {
			uint64_t t = now_ns();
			if (t >= until || cmx_loop_busy(srv->loop))
				break;
			if (t - start >= BUDGET_NS)
				return -EAGAIN; /* come back on the next turn, after the others */
		}
		sched_yield(); /* lets a runnable thread of this core (the driver's) go first */
	}
	return 1;
}

/* The connections of an shm session, NULL once it has closed. */
static struct cmx_conn *shm_chan(void *arg, int ntf)
{
	struct cmx_shm *m = arg;

	if (!m->s)
		return NULL;
	return ntf ? m->s->nconn : m->s->conn;
}

/* One turn for a doorbell session. Returns 1 when it may sleep. */
static int pump(struct cmx_shm *m)
{
	int took = 0, r = cmx_shm_pump(m->srv, shm_chan, m, &took);

	if (r == -EAGAIN)
		bell_self(m);
	return r == 1;
}

static void bell_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_shm *m = (struct cmx_shm *)((char *)io - offsetof(struct cmx_shm, bell_io));

	if (!m->s) {
		close(m->bell);
		cmx_area_put(m->area);
		free(m);
		return;
	}
	/* Awake: the guest need not ring while we look. */
	cmx_ring_wake_consumer(&m->cmd);
	/* Sleep only with the idle flag up and no call slipped in before it;
	 * a session held back sleeps with the flag down (the guest need not
	 * ring): ring_resume() wakes it. */
	while (pump(m) && !(m->s && m->s->conn && cmx_conn_held(m->s->conn)) &&
	       !cmx_ring_sleep_consumer(&m->cmd))
		;
	/* Armed in every case: a closed session's own bell frees m. */
	bell_arm(m);
}

/* The session's call channel takes input again (conn_resume(),
 * host/conn.c): the doorbell is rung, and the pump reads what waits. */
static void ring_resume(struct cmx_conn *c)
{
	if (c->sess && c->sess->shm)
		bell_self(c->sess->shm);
}

int cmx_shm_create(struct cmx_session *s, int *guest_bell)
{
	struct cmx_shm *m = calloc(1, sizeof(*m));
	const struct cmx_area_hdr *h = &s->area->hdr;
	struct cmx_ring *r[CMX_RING_COUNT];
	int e = -ENOMEM;

	if (!m)
		return e;
	r[CMX_RING_CMD] = &m->cmd;
	r[CMX_RING_REPLY] = &m->rep;
	r[CMX_RING_NOTIFY] = &m->ntf;
	for (int i = 0; i < CMX_RING_COUNT; i++)
		if ((e = cmx_ring_init(r[i], s->area->base + h->ring_off[i], h->ring_len[i], 1)))
			goto fail;
	/* Asleep until the first doorbell: the guest must ring for its first
	 * call. */
	m->cmd.ctl->idle = 1;
	m->bell = eventfd(0, EFD_CLOEXEC);
	if (m->bell < 0) {
		e = -errno;
		goto fail;
	}
	*guest_bell = dup(m->bell);
	if (*guest_bell < 0) {
		e = -errno;
		close(m->bell);
		goto fail;
	}
	m->srv = s->srv;
	m->s = s;
	m->area = s->area;
	cmx_area_ref(s->area);
	m->bell_io.cb = bell_done;
	s->shm = m;
	s->conn->rx_ring = &m->cmd;
	s->conn->rx_ring_resume = ring_resume;
	s->conn->tx_ring_next = &m->rep;
	if (s->nconn)
		s->nconn->tx_ring_next = &m->ntf;
	bell_arm(m);
	cmx_info("session %llu: upgraded to shm rings", (unsigned long long)s->id);
	return 0;
fail:
	free(m);
	return e;
}

void cmx_shm_close(struct cmx_shm *m)
{
	if (!m)
		return;
	m->s = NULL;
	bell_self(m); /* the armed read returns, and frees m */
}
