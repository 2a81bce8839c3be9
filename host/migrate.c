// SPDX-License-Identifier: MIT
// Moving a tenant's sessions to another clmuxd at run time: state files
// (host/state.h) written by the checkpoint code, streamed over the
// destination's admin socket, restored there at run time.
#define _GNU_SOURCE
#include "migrate.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint.h"
#include "conn.h"
#include "log.h"
#include "loop.h"
#include "release.h"
#include "restore.h"
#include "server.h"
#include "session.h"
#include "state.h"
#include "tenant.h"
#include "text.h"

/* A peer that stops reading or writing for this long ends the move: the
 * source's sessions stay where they are. */
#define MIGRATE_IO_TIMEOUT_S 30
/* A move waits this long for its sessions to be between two calls,
 * looking again every MIGRATE_RETRY_NS. */
#define MIGRATE_QUIET_WAIT_NS (5ull * 1000 * 1000 * 1000)
#define MIGRATE_RETRY_NS      (1000 * 1000)
/* The destination answers once its restores are done, or after this:
 * within the source's MIGRATE_IO_TIMEOUT_S wait for the answer. */
#define MIGRATE_RESTORE_WAIT_NS (25ull * 1000 * 1000 * 1000)
/* The destination copies a file through a buffer of this size. */
#define MIGRATE_CHUNK (1u << 20)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void io_timeouts(int fd)
{
	struct timeval tv = {.tv_sec = MIGRATE_IO_TIMEOUT_S};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

int cmx_migrate_connect(const char *dest)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd;

	if (!strncmp(dest, "unix:", 5))
		dest += 5;
	if (!*dest || strlen(dest) >= sizeof(sun.sun_path))
		return -EINVAL;
	strcpy(sun.sun_path, dest);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sun, sizeof(sun))) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* ---- the source ---- */

static int send_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

static int send_file(int fd, int dfd, const char *name, uint64_t *bytes)
{
	const void *p;
	size_t n;
	int e = cmx_state_map(dfd, name, &p, &n);

	if (e)
		return e;
	e = send_all(fd, p, n);
	cmx_state_unmap(p, n);
	if (!e)
		*bytes += n;
	return e;
}

/* The destination's answer, whole (it closes after it): its first line,
 * "" when none came. */
static int answer_read(int fd, char *buf, size_t len)
{
	size_t got = 0;

	buf[0] = '\0';
	while (got + 1 < len) {
		ssize_t k = recv(fd, buf + got, len - 1 - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		/* What came before a reset is the answer. */
		if (k < 0 && !got)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	buf[got] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* A session of t with a guest, or restored here and waiting for one. */
static int movable(const struct cmx_session *s, const struct cmx_tenant *t)
{
	return !s->closed && s->tenant == t && !s->restore && (s->conn || s->restored);
}

/* The move itself, once every session of t is quiet. */
static int migrate_out(struct cmx_server *srv, struct cmx_tenant *t, int fd,
		       struct cmx_migrate_stats *st)
{
	static const char line[] = CMX_MIGRATE_REQUEST "\n";
	struct cmx_checkpoint_stats cst = {0};
	struct cmx_session **v = NULL;
	char(*names)[CMX_STATE_NAME_MAX] = NULL, answer[256];
	size_t n = 0, written = 0;
	int dfd = cmx_checkpoint_dirfd(srv), e = 0;
	uint64_t t0 = now_ns();

	memset(st, 0, sizeof(*st));
	io_timeouts(fd);
	if (dfd < 0) {
		snprintf(st->why, sizeof(st->why), "no state directory (clmuxd --state-dir)");
		e = -ENOENT;
		goto out;
	}
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		n += movable(s, t);
	v = calloc(n ? n : 1, sizeof(*v));
	names = calloc(n ? n : 1, sizeof(*names));
	if (!v || !names) {
		snprintf(st->why, sizeof(st->why), "out of memory");
		e = -ENOMEM;
		goto out;
	}
	n = 0;
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (movable(s, t))
			v[n++] = s;
	/* Every session is drained and written before any byte goes: a
	 * session that cannot be written (a build still running) leaves
	 * them all here. */
	for (; written < n; written++) {
		e = cmx_checkpoint_session(v[written], names[written], sizeof(names[0]), &cst);
		if (e) {
			snprintf(st->why, sizeof(st->why), "session %" PRIu64 " not written: %s",
				 v[written]->id, strerror(-e));
			goto unlink;
		}
	}
	e = send_all(fd, line, sizeof(line) - 1);
	for (size_t i = 0; i < n && !e; i++)
		e = send_file(fd, dfd, names[i], &st->bytes);
	if (!e && shutdown(fd, SHUT_WR))
		e = -errno;
	/* A destination that refused the first file answered and closed
	 * before taking the rest: its answer says why. */
	if (!e || e == -EPIPE || e == -ECONNRESET) {
		int r = answer_read(fd, answer, sizeof(answer));
		e = !e || answer[0] ? r : e;
	}
	if (e) {
		snprintf(st->why, sizeof(st->why), "to the destination: %s", strerror(-e));
		goto unlink;
	}
	if (strncmp(answer, "ok", 3)) {
		snprintf(st->why, sizeof(st->why), "the destination: %.100s",
			 strncmp(answer, "error: ", 7) ? answer : answer + 7);
		e = -EIO;
		goto unlink;
	}
	/* The destination has them: their guests resume there. Nothing of
	 * theirs ran since they were written (this is the loop's thread). */
	for (size_t i = 0; i < n; i++) {
		if (v[i]->conn)
			cmx_conn_kill(v[i]->conn, "moved to another daemon");
		else
			cmx_release_session(v[i]);
	}
	st->sessions = (unsigned)n;
unlink:
	for (size_t i = 0; i < written; i++)
		(void)unlinkat(dfd, names[i], 0);
out:
	close(fd);
	free(v);
	free(names);
	st->ns = now_ns() - t0;
	if (e)
		cmx_err("tenant %s: not moved: %s", t->name, st->why);
	else
		cmx_info("tenant %s: %u session%s moved (%" PRIu64 " state bytes) in %.1f ms",
			 t->name, st->sessions, st->sessions == 1 ? "" : "s", st->bytes,
			 (double)st->ns / 1e6);
	return e;
}

/* A move waiting for its sessions to be quiet. */
struct move {
	struct cmx_io io;
	struct __kernel_timespec ts;
	struct cmx_server *srv;
	struct cmx_tenant *t;
	int fd;
	int held; /* its sessions' input is held (hold()) */
	uint64_t deadline;
	void (*done)(void *arg, int err, const struct cmx_migrate_stats *st);
	void *arg;
};

/*
 * A session moves between two of its calls, when nothing of it is under
 * way: a command in flight or output still queued for the guest (a
 * non-blocking read's data) would end with the connection, unanswered,
 * and the guest sends again only the calls the daemon had not applied;
 * a native map of an area buffer lives in the driver, not in the state
 * file, so its unmap would be refused at the destination. Such moments
 * come between an application's calls; a session still being restored
 * here has no whole state yet.
 */
static int quiet(const struct cmx_session *s)
{
	int refs = (s->conn != NULL) + (s->nconn != NULL) + (int)s->nlanes;

	if (s->restore)
		return 0;
	if (!s->conn)
		return 1;
	return !s->amaps && s->refs <= refs && !s->conn->tx_bytes_queued &&
	       (!s->nconn || !s->nconn->tx_bytes_queued);
}

static int busy(struct cmx_server *srv, const struct cmx_tenant *t)
{
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (!s->closed && s->tenant == t && !quiet(s))
			return 1;
	return 0;
}

/* The sessions of t take no input while held: what is in flight drains,
 * and no new call comes. Not while an area buffer is mapped: its unmap is
 * input. */
static void hold(struct cmx_server *srv, const struct cmx_tenant *t, int on)
{
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (!s->closed && s->tenant == t && s->conn)
			cmx_conn_hold(s->conn, on);
}

static int maps_open(struct cmx_server *srv, const struct cmx_tenant *t)
{
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (!s->closed && s->tenant == t && s->conn && s->amaps)
			return 1;
	return 0;
}

static void move_try(struct cmx_io *io, int res, unsigned flags)
{
	struct move *m = (struct move *)io;
	struct cmx_migrate_stats st;
	int e;

	(void)res;
	(void)flags;
	if (busy(m->srv, m->t) && now_ns() < m->deadline) {
		/* Held while no map is open, let go while one is. */
		int on = !maps_open(m->srv, m->t);
		if (on != m->held) {
			cmx_dbg("tenant %s: input %s for a move", m->t->name,
				on ? "held" : "let go");
			hold(m->srv, m->t, on);
		}
		m->held = on;
		m->ts = (struct __kernel_timespec){.tv_nsec = MIGRATE_RETRY_NS};
		io_uring_prep_timeout(cmx_loop_sqe(m->srv->loop, &m->io), &m->ts, 0, 0);
		return;
	}
	if (busy(m->srv, m->t)) {
		memset(&st, 0, sizeof(st));
		snprintf(st.why, sizeof(st.why),
			 "a session of the tenant was never between two calls");
		close(m->fd);
		e = -EBUSY;
		cmx_err("tenant %s: not moved: %s", m->t->name, st.why);
	} else {
		e = migrate_out(m->srv, m->t, m->fd, &st);
	}
	/* Moved: the connections are gone, and their unparsed input with
	 * them (the guests send it again). Not moved: they go on. */
	if (m->held && e)
		hold(m->srv, m->t, 0);
	m->done(m->arg, e, &st);
	free(m);
}

int cmx_migrate_out(struct cmx_server *srv, struct cmx_tenant *t, int fd,
		    void (*done)(void *arg, int err, const struct cmx_migrate_stats *st), void *arg)
{
	struct move *m = calloc(1, sizeof(*m));

	if (!m) {
		close(fd);
		return -ENOMEM;
	}
	*m = (struct move){.io.cb = move_try,
			   .srv = srv,
			   .t = t,
			   .fd = fd,
			   .done = done,
			   .arg = arg,
			   .deadline = now_ns() + MIGRATE_QUIET_WAIT_NS};
	move_try(&m->io, 0, 0);
	return 0;
}

/* ---- the destination ---- */

struct in_stream {
	int fd;
	const uint8_t *first;
	size_t nfirst, pos;
};

/* Up to n bytes: those read with the request line first, then the
 * socket's. *got < n at the end of the stream. */
static int in_read(struct in_stream *in, void *buf, size_t n, size_t *got)
{
	size_t done = 0;

	if (in->pos < in->nfirst) {
		done = in->nfirst - in->pos < n ? in->nfirst - in->pos : n;
		memcpy(buf, in->first + in->pos, done);
		in->pos += done;
	}
	while (done < n) {
		ssize_t k = read(in->fd, (uint8_t *)buf + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		if (!k)
			break;
		done += (size_t)k;
	}
	*got = done;
	return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n) {
		ssize_t k = write(fd, b, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		b += k;
		n -= (size_t)k;
	}
	return 0;
}

/* One file: its header says how long it is; it is stored as tmp, then
 * checked whole by the same reader a restore uses. 0, 1 at the end of
 * the stream, or -errno with why set. */
static int in_file(struct in_stream *in, int dfd, const char *tmp, struct cmx_state_head *head,
		   uint8_t *buf, char *why, size_t whylen)
{
	struct cmx_state_reader r;
	uint64_t left;
	size_t got;
	const void *map;
	size_t maplen;
	int fd, e = in_read(in, head, sizeof(*head), &got);

	if (e || !got) {
		if (e)
			snprintf(why, whylen, "reading: %s", strerror(-e));
		return e ? e : 1;
	}
	if (got < sizeof(*head) || memcmp(head->magic, CMX_STATE_MAGIC, 8) ||
	    head->head_size != CMX_STATE_HEAD_SIZE ||
	    head->body > CMX_STATE_FILE_MAX - CMX_STATE_HEAD_SIZE) {
		snprintf(why, whylen, "not a state file");
		return -EBADMSG;
	}
	fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		e = -errno;
		snprintf(why, whylen, "%s: %s", tmp, strerror(-e));
		return e;
	}
	e = write_all(fd, head, sizeof(*head));
	for (left = head->body; left && !e;) {
		size_t want = left < MIGRATE_CHUNK ? (size_t)left : MIGRATE_CHUNK;
		e = in_read(in, buf, want, &got);
		if (!e && got < want)
			e = -EPIPE;
		if (!e)
			e = write_all(fd, buf, got);
		left -= got;
	}
	close(fd);
	if (e) {
		snprintf(why, whylen, "%s", e == -EPIPE ? "a file cut short" : strerror(-e));
		return e;
	}
	e = cmx_state_map(dfd, tmp, &map, &maplen);
	if (!e) {
		e = cmx_state_open(&r, map, maplen);
		cmx_state_unmap(map, maplen);
	}
	if (e)
		snprintf(why, whylen, "%s",
			 e == -EPROTONOSUPPORT ? "another version of the state file or protocol"
			 : e == -EBADMSG       ? "a damaged state file"
					       : strerror(-e));
	return e;
}

/* The tenant a file names, as a restore finds it. */
static struct cmx_tenant *in_tenant(struct cmx_server *srv, const char *name)
{
	struct cmx_tenant *t = cmx_tenant_find(&srv->tenants, name);

	if (!t && srv->tenants.fallback[0] && !strcmp(name, srv->tenants.fallback))
		t = cmx_tenant_get(&srv->tenants, name);
	return t;
}

/*
 * The destination answers once every session it received is restored, so
 * that the source ends the connections only then and the guests' first
 * tries find their sessions whole. A session whose restore failed is
 * closed (host/restore.c): not found any more.
 */
struct cmx_migrate_wait {
	struct cmx_io io;
	struct __kernel_timespec ts;
	struct cmx_server *srv;
	uint64_t seq;	   /* with workers: the CMX_CTL_RESTORE requests' */
	unsigned pending;  /* with workers: restores not yet answered */
	uint64_t *ids;	   /* without: the sessions to look at */
	unsigned n, count; /* ids; sessions received */
	uint64_t bytes, t0, deadline;
	int err;
	struct cmx_text *out;
	void (*answered)(void *arg);
	void *arg;
	struct cmx_migrate_wait *next;
};

/* A restored session that waits for its guest: 1; still restoring: 0;
 * gone (its restore failed): -1. */
static int restored(struct cmx_server *srv, uint64_t id)
{
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (s->id == id && !s->closed && s->from_state)
			return s->restore ? 0 : 1;
	return -1;
}

static void in_answer(struct cmx_migrate_wait *w)
{
	for (struct cmx_migrate_wait **pp = &w->srv->migrate_in.waits; *pp; pp = &(*pp)->next)
		if (*pp == w) {
			*pp = w->next;
			break;
		}
	if (w->err) {
		cmx_err("migration in: %u session%s received, not every one restored%s", w->count,
			w->count == 1 ? "" : "s", w->err == -ETIMEDOUT ? " in time" : "");
		cmx_text_add(w->out, "error: not every session was restored here%s\n",
			     w->err == -ETIMEDOUT ? " in time" : "");
	} else {
		cmx_info("migration in: %u session%s (%" PRIu64
			 " state bytes) received and restored in %.1f ms",
			 w->count, w->count == 1 ? "" : "s", w->bytes,
			 (double)(now_ns() - w->t0) / 1e6);
		cmx_text_add(w->out, "ok\n%u sessions received (%" PRIu64 " bytes)\n", w->count,
			     w->bytes);
	}
	w->answered(w->arg);
	free(w->ids);
	free(w);
}

/* Looks every MIGRATE_RETRY_NS until each session is restored (or the
 * workers said so), up to the deadline. */
static void in_look(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_migrate_wait *w = (struct cmx_migrate_wait *)io;
	int waiting = w->pending > 0;

	(void)res;
	(void)flags;
	for (unsigned i = 0; i < w->n; i++) {
		int r = restored(w->srv, w->ids[i]);
		if (r < 0 && !w->err)
			w->err = -EIO;
		waiting |= !r;
	}
	if (waiting && now_ns() < w->deadline) {
		w->ts = (struct __kernel_timespec){.tv_nsec = MIGRATE_RETRY_NS};
		io_uring_prep_timeout(cmx_loop_sqe(w->srv->loop, &w->io), &w->ts, 0, 0);
		return;
	}
	if (waiting)
		w->err = -ETIMEDOUT;
	in_answer(w);
}

void cmx_migrate_in_restored(struct cmx_server *srv, uint64_t seq, int err)
{
	struct cmx_migrate_wait *w = srv->migrate_in.waits;

	while (w && w->seq != seq)
		w = w->next;
	if (!w || !w->pending)
		return;
	if (err && !w->err)
		w->err = err;
	w->pending--;
}

/* A worker's restore of one session, until it waits for its guest. */
struct restore_one {
	struct cmx_io io;
	struct __kernel_timespec ts;
	struct cmx_server *srv;
	uint64_t id, deadline;
	void (*done)(void *arg, int err);
	void *arg;
};

static void one_look(struct cmx_io *io, int res, unsigned flags)
{
	struct restore_one *r = (struct restore_one *)io;
	int st = restored(r->srv, r->id);

	(void)res;
	(void)flags;
	if (!st && now_ns() < r->deadline) {
		r->ts = (struct __kernel_timespec){.tv_nsec = MIGRATE_RETRY_NS};
		io_uring_prep_timeout(cmx_loop_sqe(r->srv->loop, &r->io), &r->ts, 0, 0);
		return;
	}
	r->done(r->arg, st > 0 ? 0 : st < 0 ? -EIO : -ETIMEDOUT);
	free(r);
}

void cmx_migrate_session_restored(struct cmx_server *srv, uint64_t id,
				  void (*done)(void *arg, int err), void *arg)
{
	struct restore_one *r = calloc(1, sizeof(*r));

	if (!r) {
		done(arg, -ENOMEM);
		return;
	}
	*r = (struct restore_one){.io.cb = one_look,
				  .srv = srv,
				  .id = id,
				  .done = done,
				  .arg = arg,
				  .deadline = now_ns() + MIGRATE_RESTORE_WAIT_NS};
	one_look(&r->io, 0, 0);
}

int cmx_migrate_in(struct cmx_server *srv, int fd, const uint8_t *first, size_t nfirst,
		   struct cmx_text *out, void (*answered)(void *arg), void *arg)
{
	struct cmx_migrate_in *mi = &srv->migrate_in;
	struct in_stream in = {.fd = fd, .first = first, .nfirst = nfirst};
	int dfd = cmx_checkpoint_dirfd(srv), e = 0;
	struct cmx_migrate_wait *w = NULL;
	uint8_t *buf = NULL;
	char why[160] = "", tmp[64], name[CMX_STATE_NAME_MAX];

	if (dfd < 0) {
		cmx_text_add(out, "error: no state directory here (clmuxd --state-dir)\n");
		return 0;
	}
	buf = malloc(MIGRATE_CHUNK);
	w = calloc(1, sizeof(*w));
	if (!buf || !w) {
		free(buf);
		free(w);
		cmx_text_add(out, "error: out of memory\n");
		return 0;
	}
	*w = (struct cmx_migrate_wait){.io.cb = in_look,
				       .srv = srv,
				       .seq = srv->front ? ++mi->seqs : 0,
				       .t0 = now_ns(),
				       .out = out,
				       .answered = answered,
				       .arg = arg};
	io_timeouts(fd);
	/* The admin's connection is blocking: this holds the loop while the
	 * files come, as the source holds its own. */
	for (;;) {
		struct cmx_state_head head;
		struct cmx_tenant *t;
		uint64_t *ids;
		snprintf(tmp, sizeof(tmp), "m%s-%u.tmp", cmx_checkpoint_instance(srv), mi->serial);
		e = in_file(&in, dfd, tmp, &head, buf, why, sizeof(why));
		if (e) {
			if (e < 0)
				(void)unlinkat(dfd, tmp, 0);
			e = e < 0 ? e : 0;
			break;
		}
		head.tenant[sizeof(head.tenant) - 1] = '\0';
		t = in_tenant(srv, head.tenant);
		ids = realloc(w->ids, (w->n + 1) * sizeof(*ids));
		if (!t || !ids) {
			(void)unlinkat(dfd, tmp, 0);
			if (ids)
				w->ids = ids;
			snprintf(why, sizeof(why), t ? "out of memory" : "no tenant '%.64s' here",
				 head.tenant);
			e = t ? -ENOMEM : -ENOENT;
			break;
		}
		w->ids = ids;
		/* Never a name that a worker takes for its own checkpoint's
		 * ("<key>-i<instance>-"): it is restored by the tenant's
		 * worker, whose key it begins with (host/checkpoint.c). This
		 * process's instance, not its pid, keeps it from replacing a
		 * file a predecessor of the same pid (in a container) took in
		 * and did not restore. */
		{
			char tkey[CMX_TENANT_KEY], key[CMX_STATE_KEY_MAX];
			cmx_state_key_name(cmx_tenant_key(t, tkey), key, sizeof(key));
			snprintf(name, sizeof(name), "%s-m%s-%u-%" PRIu64 ".state", key,
				 cmx_checkpoint_instance(srv), mi->serial++, head.session);
		}
		if (renameat(dfd, tmp, dfd, name)) {
			e = -errno;
			(void)unlinkat(dfd, tmp, 0);
			snprintf(why, sizeof(why), "%s: %s", name, strerror(-e));
			break;
		}
		w->count++;
		w->bytes += CMX_STATE_HEAD_SIZE + head.body;
		if (!srv->front) {
			cmx_restore_file(srv, name);
			w->ids[w->n++] = head.session;
		} else if (!srv->restore_in_worker(t, name, head.session, w->seq)) {
			/* Its worker answers CMX_CTL_RESTORED. */
			w->pending++;
		}
	}
	free(buf);
	if (e) {
		cmx_err("migration in: %s (%u session%s taken before it)", why, w->count,
			w->count == 1 ? "" : "s");
		cmx_text_add(out, "error: %s\n", why);
		/* Late answers of workers find no wait. */
		free(w->ids);
		free(w);
		return 0;
	}
	w->deadline = now_ns() + MIGRATE_RESTORE_WAIT_NS;
	w->next = mi->waits;
	mi->waits = w;
	in_look(&w->io, 0, 0);
	return 1;
}
