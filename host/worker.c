// SPDX-License-Identifier: MIT
// The worker's end of the control channel: a thread reads the front end's
// packets and posts them to the loop, where connections are adopted, quotas
// applied, tenants evicted and usage reported.
#define _GNU_SOURCE
#include "worker.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "session.h"
#include "checkpoint.h"
#include "conn.h"
#include "ctl.h"
#include "log.h"
#include "migrate.h"
#include "release.h"
#include "restore.h"
#include "scheduler.h"
#include "server.h"

static struct {
	struct cmx_server *srv;
	int ctl;
	char key[CMX_TENANT_KEY];
	pthread_t reader;
	int reading;	   /* reader started */
	atomic_int stopping; /* the loop is going away: post nothing more */
	atomic_int poisoned;
	void (*retire)(struct cmx_server *srv);
} wk = { .ctl = -1 };

struct packet {
	int fd;
	size_t len;
	uint8_t buf[]; /* CMX_CTL_MAX at most */
};

int cmx_worker_is(void)
{
	return wk.ctl >= 0;
}

/* Whether t is served by this worker: its group, or itself ("t:NAME"); a
 * TLS listener's or a VM device's worker serves whoever its peers are.
 * Which state files a worker restores is the files' key's affair
 * (cmx_checkpoint_file_ours()). */
static int mine(const struct cmx_tenant *t)
{
	char key[CMX_TENANT_KEY];

	return !strcmp(cmx_tenant_key(t, key), wk.key) || !strncmp(wk.key, "l:", 2) ||
	       !strncmp(wk.key, "v:", 2);
}

int cmx_worker_serves(const struct cmx_tenant *t)
{
	return wk.ctl < 0 || mine(t);
}

static void send_usage(uint64_t seq)
{
	struct cmx_ctl_hdr end = { .op = CMX_CTL_USAGE, .len = sizeof(end), .seq = seq };

	for (struct cmx_tenant *t = wk.srv->tenants.list; t; t = t->next) {
		struct cmx_ctl_usage u;
		if (!mine(t))
			continue;
		cmx_ctl_usage_pack(t, &u);
		u.h.seq = seq;
		cmx_ctl_send(wk.ctl, &u, sizeof(u), -1, 1);
	}
	cmx_ctl_send(wk.ctl, &end, sizeof(end), -1, 1);
}

static void apply_quota(struct cmx_tenant *t, const char *line)
{
	char copy[sizeof(((struct cmx_ctl_quota *)0)->line)], *save = NULL, *kv;
	struct cmx_quota q = t->q;

	snprintf(copy, sizeof(copy), "%s", line);
	for (kv = strtok_r(copy, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
		char why[160], *eq = strchr(kv, '=');
		if (!eq)
			continue;
		*eq = '\0';
		if (cmx_quota_set(&q, kv, eq + 1, why, sizeof(why)))
			cmx_warn("worker %s: quota of %s from the front end: %s", wk.key, t->name,
				 why);
	}
	t->q = q;
}

/* A restore the front end asked for is over (CMX_CTL_RESTORED). */
static void restored(void *arg, int err)
{
	struct cmx_ctl_migrated m = { .h = { .op = CMX_CTL_RESTORED, .len = sizeof(m),
					     .seq = (uint64_t)(uintptr_t)arg },
				      .err = err };

	cmx_ctl_send(wk.ctl, &m, sizeof(m), -1, 0);
}

/* A move's end, for the front end (CMX_CTL_MIGRATED). */
static void migrated(void *arg, int err, const struct cmx_migrate_stats *st)
{
	struct cmx_ctl_migrated m = { .h = { .op = CMX_CTL_MIGRATED, .len = sizeof(m),
					     .seq = (uint64_t)(uintptr_t)arg },
				      .err = err, .sessions = st->sessions, .bytes = st->bytes,
				      .ns = st->ns };

	memcpy(m.why, st->why, sizeof(m.why));
	cmx_ctl_send(wk.ctl, &m, sizeof(m), -1, 0);
}

static void on_packet(void *arg)
{
	struct packet *p = arg;
	struct cmx_ctl_hdr *h = (void *)p->buf;
	struct cmx_tenant *t = NULL;

	h->tenant[sizeof(h->tenant) - 1] = '\0';
	if (h->tenant[0])
		t = cmx_tenant_get(&wk.srv->tenants, h->tenant);
	switch (h->op) {
	case CMX_CTL_CONN: {
		struct cmx_ctl_conn *m = (void *)p->buf;
		if (p->fd < 0 || !t || p->len < offsetof(struct cmx_ctl_conn, bytes) ||
		    m->nbytes != p->len - offsetof(struct cmx_ctl_conn, bytes))
			break;
		if (atomic_load(&wk.poisoned) || wk.srv->draining) {
			/* Too late for this process: the front end sends the
			 * next one elsewhere; this one is ended. */
			break;
		}
		cmx_conn_adopt(wk.srv, p->fd, &m->peer, (int)m->authed, t->name, m->bytes,
			       m->nbytes);
		p->fd = -1;
		break;
	}
	case CMX_CTL_QUOTA:
		if (t && p->len == sizeof(struct cmx_ctl_quota)) {
			struct cmx_ctl_quota *q = (void *)p->buf;
			q->line[sizeof(q->line) - 1] = '\0';
			apply_quota(t, q->line);
		}
		break;
	case CMX_CTL_EVICT:
		if (t)
			cmx_release_tenant(wk.srv, t);
		break;
	case CMX_CTL_USAGE:
		send_usage(h->seq);
		break;
	case CMX_CTL_CHECKPOINT: {
		struct cmx_checkpoint_stats st;
		cmx_checkpoint_all(wk.srv, &st);
		break;
	}
	case CMX_CTL_MIGRATE: {
		struct cmx_migrate_stats st = {.why = "out of memory"};
		if (!t || p->fd < 0)
			break;
		if (cmx_migrate_out(wk.srv, t, p->fd, migrated, (void *)(uintptr_t)h->seq))
			migrated((void *)(uintptr_t)h->seq, -ENOMEM, &st);
		p->fd = -1;
		break;
	}
	case CMX_CTL_RESTORE: {
		struct cmx_ctl_restore *m = (void *)p->buf;
		if (!t || p->len != sizeof(*m))
			break;
		m->name[sizeof(m->name) - 1] = '\0';
		/* A name in the state directory, nothing else. */
		if (!m->name[0] || strchr(m->name, '/') || m->name[0] == '.') {
			restored((void *)(uintptr_t)h->seq, -EINVAL);
			break;
		}
		cmx_restore_file(wk.srv, m->name);
		cmx_migrate_session_restored(wk.srv, m->session, restored,
					     (void *)(uintptr_t)h->seq);
		break;
	}
	case CMX_CTL_SHARE: {
		const struct cmx_ctl_share *m = (const void *)p->buf;
		if (p->len == sizeof(*m) && m->mode <= CMX_SHARE_TURN &&
		    m->turn_ns <= CMX_SHARE_ROUND_NS)
			cmx_sched_share(wk.srv, m->mode, m->turn_ns, m->h.seq);
		break;
	}
	default:
		break;
	}
	if (p->fd >= 0)
		close(p->fd);
	free(p);
}

/* The front end is gone: this worker drains and ends like on SIGTERM. */
static void on_hangup(void *arg)
{
	(void)arg;
	if (!wk.srv->draining) {
		cmx_warn("worker %s: the front end is gone: stopping", wk.key);
		kill(getpid(), SIGTERM);
	}
}

static void *reader_main(void *arg)
{
	uint8_t *buf = malloc(CMX_CTL_MAX);

	(void)arg;
	for (;;) {
		struct packet *p;
		int fd;
		long n = buf ? cmx_ctl_recv(wk.ctl, buf, &fd) : -ENOMEM;
		if (n == -EBADMSG)
			continue;
		if (n <= 0 || atomic_load(&wk.stopping)) {
			if (n > 0 && fd >= 0)
				close(fd);
			break;
		}
		p = malloc(sizeof(*p) + (size_t)n);
		if (!p) {
			if (fd >= 0)
				close(fd);
			continue;
		}
		p->fd = fd;
		p->len = (size_t)n;
		memcpy(p->buf, buf, (size_t)n);
		cmx_loop_post(wk.srv->loop, on_packet, p);
	}
	free(buf);
	if (!atomic_load(&wk.stopping))
		cmx_loop_post(wk.srv->loop, on_hangup, NULL);
	return NULL;
}

static const struct cmx_report_ops reports;

int cmx_worker_start(struct cmx_server *srv, int ctl, const char *key,
		     void (*retire)(struct cmx_server *srv))
{
	struct cmx_ctl_ready ready = { .h = { .op = CMX_CTL_READY, .len = sizeof(ready) } };
	int turns = srv->tune.equal_turns == CMX_TUNE_AUTO ? srv->slices_contexts
							   : (int)srv->tune.equal_turns;
	int e;

	if (turns)
		ready.flags = CMX_READY_SLICES;

	wk.srv = srv;
	wk.ctl = ctl;
	wk.retire = retire;
	snprintf(wk.key, sizeof(wk.key), "%s", key);
	e = pthread_create(&wk.reader, NULL, reader_main, NULL);
	if (e)
		return -e;
	wk.reading = 1;
	srv->report = &reports;
	return cmx_ctl_send(ctl, &ready, sizeof(ready), -1, 0);
}

void cmx_worker_stop(void)
{
	if (!wk.reading)
		return;
	/* The reader posts to the loop: it ends before the loop does. */
	atomic_store(&wk.stopping, 1);
	shutdown(wk.ctl, SHUT_RDWR);
	pthread_join(wk.reader, NULL);
	wk.reading = 0;
}

static void retire(void *arg)
{
	wk.retire(arg);
}

static int overtime(const char *tenant, const char *why)
{
	struct cmx_ctl_poisoned p = { .h = { .op = CMX_CTL_OVERTIME, .len = sizeof(p) } };

	if (wk.ctl < 0)
		return -ENOTSUP;
	snprintf(p.h.tenant, sizeof(p.h.tenant), "%s", tenant);
	snprintf(p.why, sizeof(p.why), "%s", why);
	return cmx_ctl_send(wk.ctl, &p, sizeof(p), -1, 1);
}

static void busy(unsigned flags)
{
	struct cmx_ctl_busy m = { .h = { .op = CMX_CTL_BUSY, .len = sizeof(m) }, .flags = flags };

	if (wk.ctl >= 0)
		cmx_ctl_send(wk.ctl, &m, sizeof(m), -1, 1);
}

static void turned(uint64_t seq, int has_work, unsigned flags)
{
	struct cmx_ctl_turned m = { .h = { .op = CMX_CTL_TURNED, .len = sizeof(m), .seq = seq },
				    .has_work = !!has_work,
				    .flags = flags };

	if (wk.ctl >= 0)
		cmx_ctl_send(wk.ctl, &m, sizeof(m), -1, 1);
}

static void poisoned(const char *why)
{
	struct cmx_ctl_poisoned p = { .h = { .op = CMX_CTL_POISONED, .len = sizeof(p) } };

	if (wk.ctl < 0 || atomic_exchange(&wk.poisoned, 1))
		return;
	cmx_err("worker %s: the driver's state is lost: %s", wk.key, why);
	snprintf(p.why, sizeof(p.why), "%s", why);
	cmx_ctl_send(wk.ctl, &p, sizeof(p), -1, 1);
	cmx_loop_post(wk.srv->loop, retire, wk.srv);
}

static const struct cmx_report_ops reports = {
	.poisoned = poisoned, .overtime = overtime, .busy = busy, .turned = turned
};
