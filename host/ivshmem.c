// SPDX-License-Identifier: MIT
// ivshmem regions on the loop: one io_uring timeout per region polls every
// slot (ivshmem-plain has no doorbell), waiting an eighth of the time since
// the last call or reply (at least 10 us, at most poll=); a slot's session is a ring session (host/shm.c's pump, host/conn.c's
// ring paths) whose call and notification connections have no socket.
#define _GNU_SOURCE
#include "ivshmem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "addr.h"
#include "area.h"
#include "conn.h"
#include "ivshmem_layout.h"
#include "log.h"
#include "peer.h"
#include "ring.h"
#include "session.h"
#include "shm.h"

#define MAX_REGIONS 16
#define MIN_SLEEP_NS 10000ull /* the shortest wait, right after a call or reply */
#define DEF_SLEEP_US 1000u    /* the longest wait, poll= */
#define MIN_SIZE (4ull << 20)
#define MAX_SIZE (64ull << 30)
#define BEAT_NS (100 * 1000000L) /* the daemon's beat in every slot */
/* At most one new session per slot in this time: a guest that keeps
 * writing new generations costs the daemon little. */
#define REOPEN_NS 10000000ull

struct region;

/* One guest session's place in the region. */
struct slot {
	struct region *r;
	unsigned idx;
	uint64_t off;		   /* in the file */
	struct cmx_ivs_slot *ctl;  /* in the region's mapping */
	uint32_t served;	   /* the generation last taken (our copy) */
	struct cmx_area *area;	   /* that generation's area; the session holds its own ref */
	struct cmx_ring cmd, rep, ntf;
	struct cmx_conn *conn, *nconn; /* NULL once ended */
	int attached;		   /* the session has its notification channel and area */
	uint32_t rep_seen;	   /* the reply ring's head at the last turn */
	uint64_t beat, beat_ns;	   /* the guest's counter as last seen, and when it moved */
	uint64_t opened_ns;	   /* when the last generation was taken */
	char name[64];
};

struct region {
	struct cmx_io io;
	struct __kernel_timespec ts;
	char path[256];
	char tenant[64];
	int fd;
	int mode; /* mode=, default 0600 */
	long gid; /* group=, or -1 */
	uint8_t *map;
	uint64_t size, slot_size, sleep_ns, max_sleep_ns;
	uint64_t busy_ns; /* when a call came in or a reply went out, last */
	unsigned nslots;
	int stopped;
	struct cmx_server *srv;
	struct slot slot[CMX_IVS_MAX_SLOTS];
};

/* The server's regions (srv->ivshmem), made at the first listen. The beat
 * thread reads them until the process ends: never freed. */
struct cmx_ivshmem {
	struct region r[MAX_REGIONS];
	unsigned n; /* written by the loop, read by the beat thread */
	pthread_t beat;
};

int cmx_ivshmem_is_spec(const char *spec)
{
	return !strncmp(spec, "ivshmem:", 8);
}

static void host_word(struct slot *sl, uint32_t state)
{
	/* Release pairs with the guest's acquire load of `host`: the rings
	 * and the area header it announces are written before it. */
	__atomic_store_n(&sl->ctl->host, CMX_IVS_WORD(state, sl->served), __ATOMIC_RELEASE);
}

static long mover_write(void *ctx, const struct iovec *iov, int n)
{
	/* Output goes to the rings from the start (tx_ring is set). */
	return -EPIPE;
}

static void call_closed(void *ctx)
{
	struct slot *sl = ctx;

	sl->conn = NULL;
	host_word(sl, CMX_IVS_CLOSED);
	/* Before Hello the notification connection belongs to nobody else. */
	if (sl->nconn && !sl->attached)
		cmx_conn_kill(sl->nconn, NULL);
}

static void ntf_closed(void *ctx)
{
	struct slot *sl = ctx;

	sl->nconn = NULL;
}

static const struct cmx_conn_mover call_mover = { mover_write, call_closed };
static const struct cmx_conn_mover ntf_mover = { mover_write, ntf_closed };

static struct cmx_conn *slot_chan(void *arg, int ntf)
{
	struct slot *sl = arg;

	return ntf ? sl->nconn : sl->conn;
}

static struct cmx_conn *conn_for(struct slot *sl, const struct cmx_conn_mover *m)
{
	struct cmx_conn *c = cmx_conn_create_moved(sl->r->srv, m, sl, CMX_PEER_CID_NONE,
						   sl->r->tenant[0] ? sl->r->tenant : NULL);

	if (c)
		snprintf(c->peer.name, sizeof(c->peer.name), "%s", sl->name);
	return c;
}

/* A new generation: a fresh area with reset rings, two connections, and
 * READY. 0 or -errno (tried again on the next turn). */
static int slot_open(struct slot *sl, uint32_t gen, uint64_t now)
{
	struct cmx_ring *r[CMX_RING_COUNT] = { &sl->cmd, &sl->rep, &sl->ntf };
	struct cmx_area *a;
	int e = cmx_area_open(sl->r->fd, sl->off + CMX_IVS_AREA_AT,
			      sl->r->slot_size - CMX_IVS_AREA_AT, CMX_AREA_RINGS, &a);

	if (e)
		return e;
	for (int i = 0; i < CMX_RING_COUNT; i++)
		cmx_ring_init(r[i], a->base + a->hdr.ring_off[i], a->hdr.ring_len[i], 1);
	sl->attached = 0;
	sl->conn = conn_for(sl, &call_mover);
	sl->nconn = conn_for(sl, &ntf_mover);
	if (!sl->conn || !sl->nconn) {
		if (sl->conn)
			cmx_conn_kill(sl->conn, NULL);
		if (sl->nconn)
			cmx_conn_kill(sl->nconn, NULL);
		cmx_area_put(a);
		return -ENOMEM;
	}
	sl->conn->rx_ring = &sl->cmd;
	sl->conn->tx_ring = &sl->rep;
	sl->nconn->tx_ring = &sl->ntf;
	sl->rep_seen = 0;
	sl->area = a;
	sl->served = gen;
	sl->beat = __atomic_load_n(&sl->ctl->guest_beat, __ATOMIC_RELAXED);
	sl->beat_ns = now;
	sl->opened_ns = now;
	host_word(sl, CMX_IVS_READY);
	cmx_dbg("%s: generation %u ready", sl->name, gen);
	return 0;
}

/* Hello made a session on the call connection: it gets the notification
 * connection and the area, as a Hello on a second socket and OpenArea
 * would have given it. */
static void slot_attach(struct slot *sl)
{
	struct cmx_session *s = sl->conn->sess;

	sl->attached = 1;
	if (!sl->nconn) {
		cmx_conn_kill(sl->conn, "no notification channel");
		return;
	}
	sl->nconn->role = CMX_ROLE_NOTIFY;
	sl->nconn->sess = s;
	s->nconn = sl->nconn;
	cmx_session_ref(s);
	cmx_area_ref(sl->area);
	s->area = sl->area;
}

/* One slot's turn. Returns 1 when a call came in or a reply went out since
 * the last turn: a guest that just got its reply often calls again. */
static int slot_turn(struct slot *sl, uint64_t now)
{
	/* Acquire pairs with the guest's release store of its generation:
	 * nothing of the new session is read before it. */
	uint32_t gen = __atomic_load_n(&sl->ctl->guest_gen, __ATOMIC_ACQUIRE);
	uint64_t beat;
	int took = 0;

	if (!gen && sl->conn)
		cmx_conn_kill(sl->conn, "the guest closed its session");
	if (gen && gen != sl->served) {
		if (now - sl->opened_ns < REOPEN_NS)
			return 0;
		if (sl->conn)
			cmx_conn_kill(sl->conn, "the guest asked for a new session");
		/* The old session's blocks may still be written by commands in
		 * flight: the area is rewritten only once they are all back. */
		if (sl->area && cmx_area_shared(sl->area))
			return 0;
		cmx_area_put(sl->area);
		sl->area = NULL;
		if (slot_open(sl, gen, now))
			return 0;
	}
	if (!sl->conn)
		return 0;
	if (cmx_shm_pump(sl->r->srv, slot_chan, sl, &took) == -EAGAIN)
		took = 1;
	if (sl->rep.pos != sl->rep_seen) {
		sl->rep_seen = sl->rep.pos;
		took = 1;
	}
	if (sl->conn && !sl->attached && sl->conn->sess)
		slot_attach(sl);
	beat = __atomic_load_n(&sl->ctl->guest_beat, __ATOMIC_RELAXED);
	if (beat != sl->beat || took) {
		sl->beat = beat;
		sl->beat_ns = now;
	} else if (sl->conn && now - sl->beat_ns > CMX_IVS_DEAD_MS * 1000000ull) {
		struct cmx_session *s = sl->conn->sess;
		uint64_t objs = s ? s->objs.count : 0, bytes = s ? s->bytes : 0;

		cmx_conn_kill(sl->conn, NULL);
		cmx_info("%s: gone: the guest stopped polling for %u ms (VM killed?); returned "
			 "%llu objects, %llu bytes; daemon holds %llu objects, %llu bytes",
			 sl->name, CMX_IVS_DEAD_MS, (unsigned long long)objs,
			 (unsigned long long)bytes, (unsigned long long)sl->r->srv->objects,
			 (unsigned long long)sl->r->srv->bytes);
	}
	return took;
}

static void region_arm(struct region *r)
{
	r->ts.tv_sec = (long long)(r->sleep_ns / 1000000000ull);
	r->ts.tv_nsec = (long long)(r->sleep_ns % 1000000000ull);
	io_uring_prep_timeout(cmx_loop_sqe(r->srv->loop, &r->io), &r->ts, 0, 0);
}

static void region_tick(struct cmx_io *io, int res, unsigned flags)
{
	struct region *r = (struct region *)io;
	uint64_t now = cmx_now_ns();
	int busy = 0;

	if (r->stopped)
		return;
	for (unsigned i = 0; i < r->nslots; i++)
		busy |= slot_turn(&r->slot[i], now);
	/* A wait of an eighth of the quiet time so far: a guest in a burst of
	 * calls is seen within microseconds, an idle one costs a wake-up per
	 * poll= at most. */
	if (busy)
		r->busy_ns = now;
	r->sleep_ns = (now - r->busy_ns) / 8;
	if (r->sleep_ns < MIN_SLEEP_NS)
		r->sleep_ns = MIN_SLEEP_NS;
	if (r->sleep_ns > r->max_sleep_ns)
		r->sleep_ns = r->max_sleep_ns;
	region_arm(r);
}

/* The daemon's beat, on a thread of its own: it says the process lives,
 * which is what a guest must know (a socket's hang-up tells the same), so
 * a loop held up by the driver for a while does not look like a death. */
static void *beat_main(void *arg)
{
	struct cmx_ivshmem *iv = arg;
	struct timespec ts = { 0, BEAT_NS };

	for (;;) {
		unsigned n = __atomic_load_n(&iv->n, __ATOMIC_ACQUIRE);
		uint64_t now = cmx_now_ns();

		for (unsigned i = 0; i < n; i++) {
			struct region *r = &iv->r[i];
			if (__atomic_load_n(&r->stopped, __ATOMIC_RELAXED))
				continue;
			for (unsigned k = 0; k < r->nslots; k++)
				__atomic_store_n(&r->slot[k].ctl->host_beat, now, __ATOMIC_RELAXED);
		}
		nanosleep(&ts, NULL);
	}
	return arg;
}

static int parse(struct region *r, struct cmx_server *srv, const char *spec, char *err,
		 size_t errlen)
{
	struct cmx_addr a;
	struct cmx_addr_perm perm;
	char val[64], unix_spec[300];

	/* The path and options parse as a Unix address's. */
	snprintf(unix_spec, sizeof(unix_spec), "unix:%s", spec + 8);
	if (cmx_addr_parse(unix_spec, &a, err, errlen))
		return -EINVAL;
	for (const char *p = a.opts; (p = strchr(p, ','));) {
		size_t n = strcspn(++p, "=,");
		if (!((n == 4 && !strncmp(p, "size", 4)) || (n == 5 && !strncmp(p, "slots", 5)) ||
		      (n == 4 && !strncmp(p, "poll", 4)) || (n == 6 && !strncmp(p, "tenant", 6)) ||
		      (n == 4 && !strncmp(p, "mode", 4)) || (n == 5 && !strncmp(p, "group", 5)))) {
			snprintf(err, errlen,
				 "unknown option '%.*s' (size, slots, poll, tenant, mode, group)",
				 (int)n, p);
			return -EINVAL;
		}
	}
	if (cmx_addr_perm(&a, &perm, err, errlen))
		return -EINVAL;
	r->mode = perm.mode >= 0 ? perm.mode : 0600;
	r->gid = perm.gid;
	strcpy(r->path, a.path);
	/* QEMU maps the file as a PCI BAR: a power of two. */
	if (cmx_addr_opt(&a, "size", val, sizeof(val)) || cmx_size_parse(val, &r->size) ||
	    r->size < MIN_SIZE || r->size > MAX_SIZE || (r->size & (r->size - 1))) {
		snprintf(err, errlen, "needs size=SIZE, a power of two from 4M (64M, 1G): %s", spec);
		return -EINVAL;
	}
	r->nslots = 4;
	if (!cmx_addr_opt(&a, "slots", val, sizeof(val))) {
		uint64_t n;
		if (cmx_uint_parse(val, 1, CMX_IVS_MAX_SLOTS, &n) ||
		    r->size / n < 2 * MIN_SIZE / 4) {
			snprintf(err, errlen, "slots=%s: 1 to %u, each at least 2M", val,
				 CMX_IVS_MAX_SLOTS);
			return -EINVAL;
		}
		r->nslots = (unsigned)n;
	}
	r->max_sleep_ns = DEF_SLEEP_US * 1000ull;
	if (!cmx_addr_opt(&a, "poll", val, sizeof(val))) {
		uint64_t us;
		if (cmx_uint_parse(val, 1, 1000000, &us)) {
			snprintf(err, errlen, "poll=%s: the longest wait in microseconds, 1 to 1000000",
				 val);
			return -EINVAL;
		}
		r->max_sleep_ns = us * 1000ull;
	}
	if (cmx_addr_opt(&a, "tenant", r->tenant, sizeof(r->tenant)))
		r->tenant[0] = '\0';
	else if (!cmx_tenant_get(&srv->tenants, r->tenant)) {
		snprintf(err, errlen, "bad tenant name in %s", spec);
		return -EINVAL;
	}
	return 0;
}

/* A region file that exists already is taken only when nobody but this
 * daemon's user could have made or changed it: a local user who created it
 * first could read every session in it, or shrink it and fault the daemon.
 * NULL when it may be used, else why not. */
static const char *region_refused(const struct region *r, const struct stat *st)
{
	if (!S_ISREG(st->st_mode))
		return "not a regular file";
	if (st->st_uid != geteuid())
		return "owned by another user";
	if (st->st_nlink != 1)
		return "has other hard links";
	/* Group and others may write only where mode= says they may. */
	if (st->st_mode & (S_IWGRP | S_IWOTH) & ~(mode_t)r->mode)
		return "writable by its group or by others";
	return NULL;
}

/* Creates the file (mode=, 0600 by default), or opens one that passes
 * region_refused(); gives it mode= and group=, its size, and maps it. */
static int region_open(struct region *r, char *err, size_t errlen)
{
	const char *why = NULL;
	struct stat st;

	r->fd = open(r->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (r->fd < 0 && errno == EEXIST)
		r->fd = open(r->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (r->fd < 0) {
		int e = -errno;
		snprintf(err, errlen, "%s: %s", r->path,
			 errno == ELOOP ? "a symbolic link: remove it, clmuxd creates the file"
					: strerror(errno));
		return e;
	}
	if (fstat(r->fd, &st))
		why = strerror(errno);
	else
		why = region_refused(r, &st);
	if (why) {
		snprintf(err, errlen,
			 "%s: %s; remove it (clmuxd creates it, mode=%04o), or chown it to uid %u "
			 "and chmod go-w",
			 r->path, why, (unsigned)r->mode, (unsigned)geteuid());
		close(r->fd);
		return -EPERM;
	}
	/* The umask does not narrow mode=, and a file kept from an earlier
	 * run gets today's mode and group. */
	if ((r->gid >= 0 && fchown(r->fd, (uid_t)-1, (gid_t)r->gid)) ||
	    fchmod(r->fd, (mode_t)r->mode)) {
		snprintf(err, errlen, "%s: mode=%04o group=%ld: %s", r->path, (unsigned)r->mode,
			 r->gid, strerror(errno));
		close(r->fd);
		return -EPERM;
	}
	/* A file a running QEMU maps keeps its size: shrinking it would fault
	 * the VM. */
	if ((uint64_t)st.st_size != r->size) {
		if (st.st_size)
			cmx_warn("%s: %lld bytes, resizing to size=%llu", r->path,
				 (long long)st.st_size, (unsigned long long)r->size);
		if (ftruncate(r->fd, (off_t)r->size)) {
			snprintf(err, errlen, "%s: %s", r->path, strerror(errno));
			close(r->fd);
			return -EIO;
		}
	}
	r->map = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED, r->fd, 0);
	if (r->map == MAP_FAILED) {
		snprintf(err, errlen, "%s: mmap: %s", r->path, strerror(errno));
		close(r->fd);
		return -EIO;
	}
	return 0;
}

int cmx_ivshmem_create(struct cmx_server *srv, const char *spec, char *err, size_t errlen)
{
	struct region r = { 0 };
	int e = parse(&r, srv, spec, err, errlen);

	if (!e)
		e = region_open(&r, err, errlen);
	if (e)
		return e;
	munmap(r.map, r.size);
	close(r.fd);
	return 0;
}

int cmx_ivshmem_listen(struct cmx_server *srv, const char *spec, char *err, size_t errlen)
{
	struct cmx_ivshmem *iv = srv->ivshmem ? srv->ivshmem : calloc(1, sizeof(*iv));
	struct region *r;
	struct cmx_ivs_hdr *h;
	uint64_t slot_size;
	int e;

	if (!iv) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	srv->ivshmem = iv;
	r = &iv->r[iv->n];
	if (iv->n == MAX_REGIONS) {
		snprintf(err, errlen, "too many ivshmem regions");
		return -EINVAL;
	}
	memset(r, 0, sizeof(*r));
	e = parse(r, srv, spec, err, errlen);
	if (!e)
		e = region_open(r, err, errlen);
	if (e)
		return e;
	slot_size = (r->size - CMX_IVS_PAGE) / r->nslots / CMX_IVS_PAGE * CMX_IVS_PAGE;
	h = (struct cmx_ivs_hdr *)r->map;
	h->size = r->size;
	h->nslots = r->nslots;
	h->slot_off = CMX_IVS_PAGE;
	h->slot_size = slot_size;
	h->version = CMX_IVS_VERSION;
	for (unsigned i = 0; i < r->nslots; i++) {
		struct slot *sl = &r->slot[i];
		sl->r = r;
		sl->idx = i;
		sl->off = CMX_IVS_PAGE + i * slot_size;
		sl->ctl = (struct cmx_ivs_slot *)(r->map + sl->off);
		snprintf(sl->name, sizeof(sl->name), "ivshmem %.40s slot %u", r->path, i);
		/* What a guest asked of an earlier daemon is stale: only a new
		 * generation opens a session. */
		sl->served = __atomic_load_n(&sl->ctl->guest_gen, __ATOMIC_RELAXED);
		host_word(sl, CMX_IVS_CLOSED);
	}
	/* The magic last: a guest checks it before anything else. */
	__atomic_store_n(&h->magic, CMX_IVS_MAGIC, __ATOMIC_RELEASE);
	r->slot_size = slot_size;
	r->srv = srv;
	r->io.cb = region_tick;
	r->sleep_ns = r->max_sleep_ns;
	/* Release pairs with the beat thread's acquire: the region is set up. */
	__atomic_store_n(&iv->n, iv->n + 1, __ATOMIC_RELEASE);
	if (iv->n == 1 && pthread_create(&iv->beat, NULL, beat_main, iv)) {
		snprintf(err, errlen, "cannot start the beat thread");
		return -EAGAIN;
	}
	region_arm(r);
	cmx_info("serving ivshmem:%s (%llu MiB, %u slots, polled every %llu us at most)", r->path,
		 (unsigned long long)(h->size >> 20), r->nslots,
		 (unsigned long long)(r->max_sleep_ns / 1000));
	return 0;
}

void cmx_ivshmem_drain(struct cmx_server *srv)
{
	for (unsigned i = 0; srv->ivshmem && i < srv->ivshmem->n; i++) {
		struct region *r = &srv->ivshmem->r[i];
		__atomic_store_n(&r->stopped, 1, __ATOMIC_RELAXED);
		for (unsigned k = 0; k < r->nslots; k++) {
			struct slot *sl = &r->slot[k];
			if (sl->conn)
				cmx_conn_kill(sl->conn, "daemon stopping");
			host_word(sl, CMX_IVS_CLOSED);
			cmx_area_put(sl->area);
			sl->area = NULL;
		}
	}
}
