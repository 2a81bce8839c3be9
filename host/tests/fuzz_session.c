// SPDX-License-Identifier: MIT
// libFuzzer harness for a worker's core: each input is a guest session, its
// messages run through the daemon's own loop, connection and handlers on PoCL.
//
// The daemon's objects are the real ones (host/*.c but main.c): a loop thread
// runs the io_uring loop, the executor and the scheduler, as a worker does.
// Each input opens a fresh connection on a socket pair (cmx_conn_accept(), as
// a unix listener does), speaks for a guest, closes, and waits until the
// daemon has ended the session and finished its jobs, so no state but the
// driver's caches outlives an input.
//
// Input: one mode byte, then records.
//   mode bit 0   no automatic Hello: the records' own Auth/Hello speak first
//   mode bit 1   the listener asks for a token (Auth before Hello)
//   record 0x00  a message: op u16, flags u8 (bit 0 SYNC, 1 AREA, 2 LZ4,
//                3 the offset below is the raw `area_off`, 4 no payload
//                bytes: an area block's room for a read, 5 no wait for a
//                sync call's reply), words u8, then
//                words * 8 bytes of encoded arguments, payload length u16,
//                the payload, and with AREA an offset u16 (in 64-byte
//                blocks of the data region; raw with bit 3)
//   record 0x01  a flip (fuzz_area only): where u8 (0: from the next area
//                payload's start, 1: the command ring, 2: the mapping),
//                offset u16, length u8, bytes: a second thread rewrites
//                those bytes with these and back, without end, as a hostile
//                guest's other thread would, from the next message on
//   record 0x02  repeat the last message count u8 times
//   other        ends the input
// Headers get this harness's sequence numbers and the true sizes. Programs
// are built from a fixed set of sources (the first source byte picks one),
// and launches are clamped to a few thousand work-items: a guest kernel that
// faults or runs for ever is the worker's fault domain (docs/security.md),
// not a bug of the daemon's code, which is what this looks for.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "area_layout.h"
#include "dispatch.h"
#include "conn.h"
#include "exec.h"
#include "executor.h"
#include "kprintf.h"
#include "listener.h"
#include "log.h"
#include "pinned.h"
#include "proto.gen.h"
#include "restore.h"
#include "ring.h"
#include "scheduler.h"
#include "server.h"

#ifndef CMX_FUZZ_FLIP
#define CMX_FUZZ_FLIP 0
#endif

/* The server this program runs. */
static struct cmx_server fsrv;

#define MAX_MSG_PAYLOAD 65535u
#define REPLY_WAIT_MS	8000   /* a sync call's reply; longer: the input is cut short */
#define INPUT_BUDGET_MS 15000  /* every sync wait of one input together */
#define QUIET_WAIT_MS	280000 /* the daemon's end of a session, jobs (builds) included */

static sem_t ready;
static int verbose; /* CLMUX_LOG set: the harness tells why an input ended */
static struct cmx_listener auth_l;
static int have_auth_l;
static char base_dir[256], tmp_dir[400];
static char token[] = "fuzz-token-0123456789";

/* Sources a guest may build (the first byte of its source picks one). Every
 * store stays inside one byte of its buffer, whatever the arguments; a
 * buffer argument may be NULL (clSetKernelArg with a NULL value), so each
 * store tests its pointer first. */
static const char *const sources[] = {
    "kernel void k(global char *o, int n) { if (get_global_id(0) == 0 && o) o[0] = (char)n; }\n"
    "kernel void k2(global char *o, local char *l, long v) { l[0] = (char)v; "
    "barrier(CLK_LOCAL_MEM_FENCE); if (get_global_id(0) == 0 && o) o[0] = l[0]; }\n",
    "kernel void p(int v, float f) { if (get_global_id(0) == 0) printf(\"v=%d f=%f\\n\", v, f); "
    "}\n",
    "kernel void im(read_only image2d_t i, sampler_t s, global char *o) {\n"
    "  float4 v = read_imagef(i, s, (int2)(0, 0)); if (get_global_id(0) == 0 && o) o[0] = (char)v.x; }\n"
    "kernel void iw(write_only image2d_t i) { if (get_global_id(0) == 0) "
    "write_imagef(i, (int2)(0, 0), (float4)(1.0f)); }\n",
    "#include \"a/h.h\"\n"
    "kernel void inc(global char *o) { if (get_global_id(0) == 0 && o) o[0] = H; }\n",
    "kernel void bad(global char *o) { o[0] = undefined_name; }\n",
    "typedef struct { int a; float b; } s_t;\n"
    "kernel void st(s_t s, global char *o, uchar16 u) { if (get_global_id(0) == 0 && o) o[0] = "
    "(char)(s.a + u.s3); }\n",
    "#define H 3\n", /* a header */
};
#define NSOURCES (sizeof(sources) / sizeof(sources[0]))

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the daemon's side ---- */

static void *loop_main(void *arg)
{
	int e = cmx_loop_create(&fsrv.loop, (int)fsrv.tune.uring_coop);

	if (!e) {
		cmx_exec_init(&fsrv);
		cmx_dispatch_attach(&fsrv);
		cmx_restore_attach(&fsrv);
	}
	if (e || cmx_executor_create(fsrv.loop, 16, &fsrv.exec) ||
	    cmx_sched_create(&fsrv, CMX_SCHED_WINDOW_US)) {
		fprintf(stderr, "fuzz: no loop\n");
		abort();
	}
	if (cmx_kprintf_init(&fsrv))
		fprintf(stderr, "fuzz: kernel printf stays on stdout\n");
	cmx_pinned_start(fsrv.devices[0], &fsrv.tune);
	sem_post(&ready);
	cmx_loop_run(fsrv.loop);
	return NULL;
}

struct accept_job {
	int fd, auth;
};

static void accept_on_loop(void *arg)
{
	struct accept_job *j = arg;

	if (cmx_conn_accept(&fsrv, j->fd, j->auth ? &auth_l : NULL))
		fprintf(stderr, "fuzz: accept failed\n");
	free(j);
}

static atomic_int quiet_answer;
static uint64_t busy_sessions;
static int busy_exec, busy_sched;

static void quiet_on_loop(void *arg)
{
	busy_sessions = fsrv.nsessions;
	busy_exec = cmx_executor_busy(fsrv.exec);
	busy_sched = cmx_sched_busy(&fsrv);
	atomic_store(&quiet_answer, !busy_sessions && !busy_exec && !busy_sched ? 1 : 2);
	sem_post(&ready);
}

/* Whether the daemon has ended every session and has no job left. */
static int daemon_quiet(void)
{
	atomic_store(&quiet_answer, 0);
	cmx_loop_post(fsrv.loop, quiet_on_loop, NULL);
	sem_wait(&ready);
	return atomic_load(&quiet_answer) == 1;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	remove(path);
	return 0;
}

static void base_remove(void)
{
	nftw(base_dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkdirs(const char *p)
{
	char b[512];

	snprintf(b, sizeof(b), "%s", p);
	for (char *s = b + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		mkdir(b, 0700);
		*s = '/';
	}
	mkdir(b, 0700);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char spec[600], why[200];
	pthread_t t;
	FILE *f;

	signal(SIGPIPE, SIG_IGN);
	setenv("CLMUX_DISABLE", "1", 1);
	verbose = !!getenv("CLMUX_LOG");
	cmx_log_init("fuzz", verbose ? CMX_LOG_INFO : CMX_LOG_ERR);
	/* The daemon's include trees go below a private directory whose every
	 * level is checked after each input: a file the daemon wrote outside
	 * its tree lands in one of them. */
	snprintf(base_dir, sizeof(base_dir), "%s/cmxfuzz.XXXXXX",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
	if (!mkdtemp(base_dir))
		abort();
	atexit(base_remove);
	snprintf(tmp_dir, sizeof(tmp_dir), "%s/a/b/c/d/e/f/g/h/t", base_dir);
	mkdirs(tmp_dir);
	setenv("TMPDIR", tmp_dir, 1);

	/* A worker's tenant: bounded, so that a guest's huge buffer is
	 * refused by the quota rather than by the allocator. */
	cmx_staging_init(&fsrv.staging);
	cmx_quota_unlimited(&fsrv.tenants.defaults);
	cmx_tuning_defaults(&fsrv.tune);
	fsrv.tenants.defaults.mem = 64ull << 20;
	fsrv.tenants.defaults.objects = 4096;
	fsrv.tenants.defaults.inflight = 256;
	strcpy(fsrv.tenants.fallback, "default");
	cmx_tenant_get(&fsrv.tenants, "default");
	fsrv.started_ns = cmx_now_ns();

	/* A listener that asks for a token (never bound: only its checks). */
	snprintf(spec, sizeof(spec), "%s/tokens", base_dir);
	f = fopen(spec, "w");
	if (f && !fchmod(fileno(f), 0600)) {
		fprintf(f, "default %s\n", token);
		fclose(f);
		snprintf(spec, sizeof(spec), "unix:%s/sock,tokens=%s/tokens", base_dir, base_dir);
		have_auth_l = !cmx_listener_init(&auth_l, spec, why, sizeof(why));
		if (!have_auth_l)
			fprintf(stderr, "fuzz: no token listener: %s\n", why);
	}

	if (cmx_device_open(&fsrv, getenv("CLMUX_FUZZ_DEVICE")))
		abort();
	sem_init(&ready, 0, 0);
	if (pthread_create(&t, NULL, loop_main, NULL))
		abort();
	sem_wait(&ready);
	return 0;
}

/* ---- the guest's side ---- */

struct guest {
	int fd;
	uint32_t seq;
	uint64_t deadline;
	/* Replies read so far (a partial message stays at the front). */
	uint8_t *rx;
	size_t rx_len, rx_cap;
	int fds[4];
	unsigned nfds;
	/* The shared area once OpenArea has answered. */
	uint8_t *area;
	size_t area_size;
	struct cmx_area_hdr ahdr;
	int dead;
	/* The shm transport once OpenArea granted rings: calls go to cmd,
	 * replies come from rep; bell is the host's doorbell. */
	int rings, bell;
	struct cmx_ring cmd, rep;
	/* The last message, for repeats. */
	uint8_t *last;
	size_t last_len;
	uint16_t last_op;
	int last_sync;
};

static void guest_take_fds(struct guest *g, struct msghdr *mh)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int n = (int)((cm->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *fds = (int *)CMSG_DATA(cm);
		for (int i = 0; i < n; i++) {
			if (g->nfds < 4)
				g->fds[g->nfds++] = fds[i];
			else
				close(fds[i]);
		}
	}
}

/* The area fd came with OpenArea's reply: map it as the guest does. */
static void guest_map_area(struct guest *g)
{
	struct stat st;

	if (g->area || !g->nfds || fstat(g->fds[0], &st) || st.st_size < (off_t)sizeof(g->ahdr))
		return;
	g->area = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, g->fds[0], 0);
	if (g->area == MAP_FAILED) {
		g->area = NULL;
		return;
	}
	g->area_size = (size_t)st.st_size;
	memcpy(&g->ahdr, g->area, sizeof(g->ahdr));
	if (g->ahdr.data_off + g->ahdr.data_len > g->area_size ||
	    g->ahdr.data_len < 2 * CMX_AREA_BLK)
		g->ahdr.data_len = 0;
	/* Rings granted: the doorbell came too, and calls go there now. */
	if (g->nfds >= 2 && g->ahdr.ring_len[CMX_RING_CMD] &&
	    g->ahdr.ring_off[CMX_RING_REPLY] + g->ahdr.ring_len[CMX_RING_REPLY] <= g->area_size &&
	    g->ahdr.ring_off[CMX_RING_CMD] + g->ahdr.ring_len[CMX_RING_CMD] <= g->area_size &&
	    !cmx_ring_init(&g->cmd, g->area + g->ahdr.ring_off[CMX_RING_CMD],
			   g->ahdr.ring_len[CMX_RING_CMD], 0) &&
	    !cmx_ring_init(&g->rep, g->area + g->ahdr.ring_off[CMX_RING_REPLY],
			   g->ahdr.ring_len[CMX_RING_REPLY], 0)) {
		g->bell = g->fds[1];
		g->rings = 1;
	}
}

static void rx_room(struct guest *g)
{
	if (g->rx_cap - g->rx_len < 65536) {
		size_t cap = g->rx_cap ? g->rx_cap * 2 : 1 << 20;
		uint8_t *n = realloc(g->rx, cap);
		if (!n)
			abort();
		g->rx = n;
		g->rx_cap = cap;
	}
}

static int rx_parse(struct guest *g, uint32_t seq);

/* The reply ring's bytes, as the socket's would be. */
static int guest_read_ring(struct guest *g, uint32_t seq)
{
	long k;
	uint64_t one = 1;

	while ((k = cmx_ring_readable(&g->rep)) > 0) {
		rx_room(g);
		if ((size_t)k > g->rx_cap - g->rx_len)
			k = (long)(g->rx_cap - g->rx_len);
		g->rx_len += cmx_ring_read(&g->rep, g->rx + g->rx_len, (size_t)k);
		if (cmx_ring_consume(&g->rep) && write(g->bell, &one, sizeof(one)) < 0)
			g->dead = 1;
	}
	if (k < 0)
		g->dead = 1;
	return rx_parse(g, seq);
}

/* Reads what has come; returns 1 when the reply to `seq` is among it. */
static int guest_read(struct guest *g, uint32_t seq)
{
	uint64_t cbuf[8];

	for (;;) {
		struct iovec iov;
		struct msghdr mh = {0};
		ssize_t k;

		rx_room(g);
		iov.iov_base = g->rx + g->rx_len;
		iov.iov_len = g->rx_cap - g->rx_len;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cbuf;
		mh.msg_controllen = sizeof(cbuf);
		k = recvmsg(g->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
			g->dead = 1;
			break;
		}
		if (k < 0)
			break;
		guest_take_fds(g, &mh);
		g->rx_len += (size_t)k;
	}
	/* After the upgrade the socket only tells that the daemon lives. */
	return g->rings ? guest_read_ring(g, seq) : rx_parse(g, seq);
}

/* Takes whole messages off the front; 1 when the reply to seq was one. */
static int rx_parse(struct guest *g, uint32_t seq)
{
	int found = 0;

	for (;;) {
		struct cmx_hdr h;
		uint64_t need;

		if (g->rx_len < CMX_HDR_SIZE)
			break;
		memcpy(&h, g->rx, CMX_HDR_SIZE);
		need = CMX_HDR_SIZE + (uint64_t)h.size + ((h.flags & CMX_HDR_AREA) ? 0 : h.bulk);
		if (need > g->rx_len)
			break;
		if (h.op == CMX_OP_REPLY && h.seq == seq)
			found = 1;
		memmove(g->rx, g->rx + need, g->rx_len - need);
		g->rx_len -= need;
	}
	return found;
}

/* Sends n bytes, reading meanwhile; with `sync`, waits for the reply to seq.
 * 0, or -1 when the daemon ended the connection or the input's time is up. */
static int guest_send_ring(struct guest *g, const uint8_t *p, size_t n, int sync, uint32_t seq,
			   uint64_t until)
{
	uint64_t one = 1;

	while (n || sync) {
		struct pollfd pf = {.fd = g->fd, .events = POLLIN};
		long k = 0;

		if (g->dead || now_ms() >= until) {
			if (verbose)
				fprintf(stderr, "fuzz: seq %u: %s (rings)\n", seq,
					g->dead ? "the daemon hung up" : "no reply in time");
			return -1;
		}
		if (n) {
			k = cmx_ring_write(&g->cmd, p, n);
			if (k < 0)
				return -1;
			p += k;
			n -= (size_t)k;
			/* Always rung: cheaper to write than to reason about. */
			cmx_ring_publish(&g->cmd);
			if (write(g->bell, &one, sizeof(one)) < 0)
				return -1;
		}
		if (guest_read_ring(g, seq) && sync)
			sync = 0;
		if (poll(&pf, 1, 0) > 0)
			guest_read(g, seq);
		if (!k && (n || sync))
			usleep(50);
	}
	return 0;
}

static int guest_send(struct guest *g, const uint8_t *p, size_t n, int sync, uint32_t seq)
{
	uint64_t until = now_ms() + REPLY_WAIT_MS;

	if (until > g->deadline)
		until = g->deadline;
	if (g->rings)
		return guest_send_ring(g, p, n, sync, seq, until);
	while (n || sync) {
		struct pollfd pf = {.fd = g->fd, .events = POLLIN | (n ? POLLOUT : 0)};
		uint64_t t = now_ms();

		if (g->dead || t >= until) {
			if (verbose)
				fprintf(stderr, "fuzz: seq %u: %s\n", seq,
					g->dead ? "the daemon hung up" : "no reply in time");
			return -1;
		}
		if (poll(&pf, 1, (int)(until - t)) < 0 && errno != EINTR)
			return -1;
		if (pf.revents & (POLLIN | POLLHUP | POLLERR)) {
			if (guest_read(g, seq) && sync)
				sync = 0;
		}
		if (n && (pf.revents & POLLOUT)) {
			ssize_t k = send(g->fd, p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (k < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			if (k > 0) {
				p += k;
				n -= (size_t)k;
			}
		}
	}
	return 0;
}

/* ---- the flipping thread (fuzz_area) ---- */

#define MAX_FLIPS 8

struct flip {
	int where;
	uint32_t off;
	uint8_t len;
	uint8_t b[255], a[255];
	uint8_t *at; /* in the area once armed */
};

static struct flip flips[MAX_FLIPS];
static unsigned nflips;
static atomic_uint armed;
static atomic_int flipping;
static pthread_t flipper;

static void *flip_main(void *arg)
{
	unsigned k = 0;

	while (atomic_load(&flipping)) {
		unsigned n = atomic_load(&armed);
		if (!n) {
			sched_yield();
			continue;
		}
		/* Volatile byte stores: the compiler may not merge or drop them. */
		for (unsigned i = 0; i < n; i++) {
			volatile uint8_t *d = flips[i].at;
			const uint8_t *s = (k & 1) ? flips[i].a : flips[i].b;
			for (unsigned j = 0; j < flips[i].len; j++)
				d[j] = s[j];
		}
		/* Each state held a while, for a time that varies: a window
		 * between two looks of any length is hit now and then. */
		for (volatile unsigned spin = (k * 2654435761u) >> 29; spin; spin--)
			;
		k++;
	}
	return NULL;
}

/* Arms the flips waiting for an area payload at off (or the ring's, or the
 * mapping's): their "before" bytes are what is there now. */
static void flips_arm(struct guest *g, uint64_t payload_off)
{
	unsigned n = atomic_load(&armed);

	if (!g->area)
		return;
	for (unsigned i = n; i < nflips; i++) {
		struct flip *f = &flips[i];
		uint64_t at;

		if (f->where == 0 && payload_off)
			at = payload_off + f->off;
		else if (f->where == 1 && g->ahdr.ring_len[CMX_RING_CMD])
			at = g->ahdr.ring_off[CMX_RING_CMD] + f->off;
		else if (f->where == 2)
			at = f->off;
		else
			break;
		if (at + f->len > g->area_size)
			at = g->area_size - f->len;
		f->at = g->area + at;
		memcpy(f->a, f->at, f->len);
		atomic_store(&armed, i + 1);
	}
}

static void flips_stop(void)
{
	if (!atomic_load(&flipping))
		return;
	atomic_store(&flipping, 0);
	pthread_join(flipper, NULL);
	atomic_store(&armed, 0);
	nflips = 0;
}

/* ---- inputs ---- */

struct in {
	const uint8_t *p;
	size_t left;
	int bad;
};

static uint64_t in_take(struct in *r, unsigned n)
{
	uint64_t v = 0;

	if (r->left < n) {
		r->bad = 1;
		r->left = 0;
		return 0;
	}
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	r->left -= n;
	return v;
}

static const uint8_t *in_bytes(struct in *r, size_t n)
{
	const uint8_t *p = r->p;

	if (r->left < n) {
		r->bad = 1;
		r->left = 0;
		return NULL;
	}
	r->p += n;
	r->left -= n;
	return p;
}

/* The arguments a guest may send, but with programs from `sources` and
 * launches of a bounded size. args is 8-aligned, *len its size; may
 * replace it with a re-encoded copy (*owned). */
_Static_assert(offsetof(struct cmx_EnqueueKernel_in, event) ==
		   offsetof(struct cmx_EnqueueKernelPrintf_in, event),
	       "launch arguments' layout");

static uint8_t *tame(uint16_t op, uint8_t *args, size_t *len, int *owned)
{
	const struct cmx_opinfo *oi = cmx_op_info(op);
	uint64_t dec[512];
	uint64_t g[3], l[3];
	uint8_t *out;

	*owned = 0;
	if (!oi || oi->in->size > sizeof(dec) || cmx_codec_decode(oi->in, args, *len, dec))
		return args; /* refused by the daemon's decoder as well */
	if (op == CMX_OP_CreateProgramWithSource) {
		struct cmx_CreateProgramWithSource_in *in = (void *)dec;
		const uint8_t *s = in->source.ptr;
		const char *src = sources[(in->source.len ? s[0] : 0) % NSOURCES];
		in->source.ptr = src;
		in->source.len = strlen(src);
	} else if (op == CMX_OP_CreateProgramWithBinary || op == CMX_OP_CreateProgramWithIL) {
		/* A driver's loader of binaries is not the daemon's code. */
		return NULL;
	} else if (op == CMX_OP_EnqueueKernel || op == CMX_OP_EnqueueKernelPrintf) {
		/* The two share their first fields' layout. */
		struct cmx_EnqueueKernel_in *in = (void *)dec;
		uint64_t items = 1;
		for (uint64_t i = 0; i < in->global.n && i < 3; i++)
			items *= in->global.v[i] ? in->global.v[i] : 1;
		if (items > 4096 && in->global.n <= 3) {
			for (uint64_t i = 0; i < in->global.n; i++)
				g[i] = in->global.v[i] % 16 + 1;
			in->global.v = g;
			if (in->local.n == in->global.n) {
				for (uint64_t i = 0; i < in->local.n; i++)
					l[i] = in->local.v[i] ? in->local.v[i] % 16 + 1 : 0;
				in->local.v = l;
			}
		}
		if (items > 4096 && in->global.n > 3)
			return args;
	} else {
		return args;
	}
	*len = cmx_codec_size(oi->in, dec);
	out = aligned_alloc(8, (*len + 7) & ~(size_t)7);
	if (!out)
		abort();
	cmx_codec_encode(oi->in, dec, out);
	*owned = 1;
	return out;
}

/* Builds and sends one message record; 0, 1 at the input's end, -1 when the
 * connection is over. */
static int run_msg(struct guest *g, struct in *r)
{
	uint16_t op = (uint16_t)in_take(r, 2);
	unsigned fl = (unsigned)in_take(r, 1), words = (unsigned)in_take(r, 1);
	const uint8_t *a = in_bytes(r, (size_t)words * 8);
	unsigned plen = (unsigned)in_take(r, 2);
	/* Bit 4: only the room for a read's data (an area block's length). */
	const uint8_t *payload = (fl & 0x10) ? NULL : in_bytes(r, plen);
	uint64_t aoff = (fl & 2) ? in_take(r, 2) : 0;
	struct cmx_hdr h = {0};
	size_t alen = (size_t)words * 8, total;
	uint8_t *args, *msg, *targs;
	int owned, e;

	if (r->bad)
		return 1;
	args = aligned_alloc(8, alen ? alen : 8);
	if (!args)
		abort();
	memcpy(args, a, alen);
	targs = tame(op, args, &alen, &owned);
	if (!targs) {
		free(args);
		return 0;
	}
	h.size = (uint32_t)alen;
	h.op = op;
	h.flags = (uint16_t)(fl & (CMX_HDR_SYNC | CMX_HDR_AREA | CMX_HDR_LZ4));
	h.seq = ++g->seq;
	h.bulk = plen;
	total = CMX_HDR_SIZE + alen;
	if (fl & 2) {
		/* The payload goes into the area, where the guest placed it. */
		uint64_t dl = g->ahdr.data_len;
		uint64_t off =
		    (fl & 8) ? aoff
			     : (dl > CMX_AREA_BLK + plen
				    ? g->ahdr.data_off + CMX_AREA_BLK +
					  (aoff * CMX_AREA_BLK) % (dl - CMX_AREA_BLK - plen + 1)
				    : aoff);
		off &= ~(uint64_t)((fl & 8) ? 0 : 7);
		h.area_off = (uint32_t)off;
		if (payload && g->area && off + plen <= g->area_size && off >= CMX_AREA_BLK) {
			memcpy(g->area + off, payload, plen);
			if (CMX_FUZZ_FLIP)
				flips_arm(g, off);
		}
	} else {
		total += plen;
	}
	msg = malloc(total);
	if (!msg)
		abort();
	memcpy(msg, &h, CMX_HDR_SIZE);
	memcpy(msg + CMX_HDR_SIZE, targs, alen);
	if (!(fl & 2) && payload)
		memcpy(msg + CMX_HDR_SIZE + alen, payload, plen);
	else if (!(fl & 2))
		memset(msg + CMX_HDR_SIZE + alen, 0, plen);
	if (owned)
		free(targs);
	free(args);
	free(g->last);
	g->last = msg;
	g->last_len = total;
	g->last_op = op;
	/* Bit 5: sent sync, but the next message goes without waiting for its
	 * reply (another guest thread's call, or a release, meanwhile). */
	g->last_sync = (fl & 1) && !(fl & 0x20);
	e = guest_send(g, msg, total, g->last_sync, h.seq);
	if (!e && op == CMX_OP_OpenArea && g->last_sync) {
		guest_map_area(g);
		if (CMX_FUZZ_FLIP)
			flips_arm(g, 0);
	}
	return e;
}

static int run_repeat(struct guest *g, struct in *r)
{
	unsigned n = (unsigned)in_take(r, 1) % 64;

	if (r->bad || !g->last)
		return r->bad;
	for (unsigned i = 0; i < n; i++) {
		struct cmx_hdr h;
		memcpy(&h, g->last, CMX_HDR_SIZE);
		h.seq = ++g->seq;
		memcpy(g->last, &h, CMX_HDR_SIZE);
		if (guest_send(g, g->last, g->last_len, g->last_sync, h.seq))
			return -1;
	}
	return 0;
}

static int run_flip(struct guest *g, struct in *r)
{
	int where = (int)in_take(r, 1) % 3;
	uint32_t off = (uint32_t)in_take(r, 2);
	unsigned len = (unsigned)in_take(r, 1);
	const uint8_t *b = in_bytes(r, len);

	if (r->bad)
		return 1;
	if (!CMX_FUZZ_FLIP || !len || nflips == MAX_FLIPS)
		return 0;
	flips[nflips].where = where;
	flips[nflips].off = off;
	flips[nflips].len = (uint8_t)len;
	memcpy(flips[nflips].b, b, len);
	nflips++;
	if (!atomic_load(&flipping)) {
		atomic_store(&flipping, 1);
		if (pthread_create(&flipper, NULL, flip_main, NULL))
			abort();
	}
	flips_arm(g, 0);
	return 0;
}

static int hello(struct guest *g)
{
	struct cmx_Hello_in in = {
	    .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION, .role = CMX_ROLE_CALL};
	const struct cmx_msgdesc *d = cmx_op_info(CMX_OP_Hello)->in;
	uint8_t msg[CMX_HDR_SIZE + 64];
	struct cmx_hdr h = {.op = CMX_OP_Hello, .flags = CMX_HDR_SYNC};

	h.size = (uint32_t)cmx_codec_size(d, &in);
	h.seq = ++g->seq;
	memcpy(msg, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, &in, msg + CMX_HDR_SIZE);
	return guest_send(g, msg, CMX_HDR_SIZE + h.size, 1, h.seq);
}

static int auth(struct guest *g)
{
	struct cmx_Auth_in in = {.token = {token, strlen(token)}};
	const struct cmx_msgdesc *d = cmx_op_info(CMX_OP_Auth)->in;
	uint8_t msg[CMX_HDR_SIZE + 64];
	struct cmx_hdr h = {.op = CMX_OP_Auth, .flags = CMX_HDR_SYNC};

	h.size = (uint32_t)cmx_codec_size(d, &in);
	h.seq = ++g->seq;
	memcpy(msg, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, &in, msg + CMX_HDR_SIZE);
	return guest_send(g, msg, CMX_HDR_SIZE + h.size, 1, h.seq);
}

/* ---- after each input: nothing outside the daemon's tree ---- */

static int dir_entries(const char *path, const char *allowed_prefix)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    (!allowed_prefix ||
		     strncmp(e->d_name, allowed_prefix, strlen(allowed_prefix)))) {
			fprintf(stderr, "fuzz: unexpected %s/%s\n", path, e->d_name);
			n++;
		}
	closedir(d);
	return n;
}

/* Every session has ended, so every include tree is gone: the daemon's
 * root (TMPDIR/clmuxd.*) is empty, and each level above it holds only the
 * next. A file anywhere else was written by a guest's name. */
static void check_tree(void)
{
	static const char *const chain[] = {"a", "b", "c", "d", "e", "f", "g", "h", "t"};
	char p[600], root[700];
	int bad = 0;
	DIR *d;
	struct dirent *e;

	snprintf(p, sizeof(p), "%s", base_dir);
	for (unsigned i = 0; i < sizeof(chain) / sizeof(chain[0]); i++) {
		DIR *dd = opendir(p);
		if (!dd)
			break;
		while ((e = readdir(dd)))
			if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
			    strcmp(e->d_name, chain[i]) &&
			    !(i == 0 &&
			      (!strcmp(e->d_name, "tokens") || !strcmp(e->d_name, "sock")))) {
				fprintf(stderr, "fuzz: unexpected %s/%s\n", p, e->d_name);
				bad++;
			}
		closedir(dd);
		strncat(p, "/", sizeof(p) - strlen(p) - 1);
		strncat(p, chain[i], sizeof(p) - strlen(p) - 1);
	}
	bad += dir_entries(tmp_dir, "clmuxd.");
	d = opendir(tmp_dir);
	while (d && (e = readdir(d))) {
		if (strncmp(e->d_name, "clmuxd.", 7))
			continue;
		snprintf(root, sizeof(root), "%s/%s", tmp_dir, e->d_name);
		bad += dir_entries(root, NULL);
	}
	if (d)
		closedir(d);
	if (bad) {
		fprintf(stderr, "fuzz: the daemon wrote outside a live session's include tree\n");
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct guest g = {.fd = -1};
	struct in r = {data, size, 0};
	struct accept_job *j;
	unsigned mode;
	int sv[2], e = 0, use_auth;
	uint64_t t;

	if (!size)
		return 0;
	mode = (unsigned)in_take(&r, 1);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		abort();
	j = malloc(sizeof(*j));
	j->fd = sv[1];
	j->auth = (mode & 2) && have_auth_l;
	use_auth = j->auth;
	g.fd = sv[0];
	g.deadline = now_ms() + INPUT_BUDGET_MS;
	cmx_loop_post(fsrv.loop, accept_on_loop, j);
	if (use_auth && !(mode & 1))
		e = auth(&g);
	if (!e && !(mode & 1))
		e = hello(&g);
	while (!e && r.left) {
		unsigned kind = (unsigned)in_take(&r, 1);
		if (kind == 0)
			e = run_msg(&g, &r);
		else if (kind == 1)
			e = run_flip(&g, &r);
		else if (kind == 2)
			e = run_repeat(&g, &r);
		else
			break;
	}
	/* A last round trip, so that what was sent is taken in before the
	 * hang-up (a closed socket's unread bytes are dropped). */
	if (!e && !g.dead) {
		struct cmx_hdr h = {.op = CMX_OP_Ping, .flags = CMX_HDR_SYNC, .seq = ++g.seq};
		guest_send(&g, (const uint8_t *)&h, CMX_HDR_SIZE, 1, h.seq);
	}
	close(g.fd);
	/* The session ends; its jobs finish; its objects go. */
	t = now_ms();
	while (!daemon_quiet()) {
		if (now_ms() - t > QUIET_WAIT_MS) {
			/* Kept for a rerun: libFuzzer writes no artifact for an
			 * abort from here. */
			FILE *f = fopen("stuck-input", "wb");
			if (f) {
				fwrite(data, 1, size, f);
				fclose(f);
			}
			fprintf(stderr,
				"fuzz: the daemon still holds the session or its jobs "
				"after %d ms (sessions %llu, executor %s, scheduler %s; "
				"input in ./stuck-input)\n",
				QUIET_WAIT_MS, (unsigned long long)busy_sessions,
				busy_exec ? "busy" : "idle", busy_sched ? "busy" : "idle");
			abort();
		}
		usleep(1000);
	}
	if (CMX_FUZZ_FLIP)
		flips_stop();
	if (g.area)
		munmap(g.area, g.area_size);
	for (unsigned i = 0; i < g.nfds; i++)
		close(g.fds[i]);
	free(g.rx);
	free(g.last);
	check_tree();
	return 0;
}
