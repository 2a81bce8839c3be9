// SPDX-License-Identifier: MIT
// The admin socket and the metrics endpoint, both served on the loop: one
// request per connection, answered, then closed.
#define _GNU_SOURCE
#include "admin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "activation.h"
#include "addr.h"
#include "checkpoint.h"
#include "conffile.h"
#include "conn.h"
#include "front.h"
#include "libvirt.h"
#include "listener.h"
#include "log.h"
#include "server.h"
#include "session.h"
#include "tenant.h"
#include "text.h"

#define REQ_MAX 4096

struct endpoint {
	struct cmx_io io;
	int fd;
	int metrics;
	char path[108]; /* unix: unlinked at close */
};

struct client {
	struct cmx_io io;
	int fd;
	int metrics;
	int sending;
	char req[REQ_MAX];
	size_t len;
	struct cmx_text out;
	size_t sent;
};

static struct endpoint admin_ep = {.fd = -1}, metrics_ep = {.fd = -1, .metrics = 1};
/* --admin PATH,group=NAME: that group's members may use the admin socket
 * too (-1: root only). */
static long admin_gid = -1;

/* Root, or a member of the admin group (primary or supplementary, as the
 * kernel saw the peer's credentials at connect). */
static int admin_peer_ok(int fd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[256];

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len))
		return 0;
	if (cred.uid == 0)
		return 1;
	if (admin_gid < 0)
		return 0;
	if (cred.gid == (gid_t)admin_gid)
		return 1;
	len = sizeof(groups);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len))
		return 0;
	for (size_t i = 0; i < len / sizeof(gid_t); i++)
		if (groups[i] == (gid_t)admin_gid)
			return 1;
	return 0;
}

/* ---- requests ---- */

static unsigned split_words(char *line, char **w, unsigned max)
{
	unsigned n = 0;

	for (char *tok = strtok(line, " \t\r\n"); tok && n < max; tok = strtok(NULL, " \t\r\n"))
		w[n++] = tok;
	return n;
}

static void fmt_bytes(uint64_t v, char *out, size_t len)
{
	static const char *const units[] = {"B", "K", "M", "G", "T"};
	double d = (double)v;
	int u = 0;

	if (v == CMX_UNLIMITED) {
		snprintf(out, len, "-");
		return;
	}
	while (d >= 1024 && u < 4) {
		d /= 1024;
		u++;
	}
	snprintf(out, len, u ? "%.1f%s" : "%.0f%s", d, units[u]);
}

static void fmt_count(uint64_t v, char *out, size_t len)
{
	if (v == CMX_UNLIMITED)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%" PRIu64, v);
}

static uint64_t json_limit(uint64_t v)
{
	return v == CMX_UNLIMITED ? 0 : v;
}

static void tenants_table(struct cmx_server *srv, int json, struct cmx_text *out)
{
	uint64_t now = cmx_now_ns(), total = 0;
	const char *sep = "";

	for (struct cmx_tenant *t = srv->tenants.list; t; t = t->next)
		total += cmx_tenant_minute_ns(t, now);
	if (json)
		cmx_text_add(out, "[");
	else
		cmx_text_add(out, "%-16s %8s %21s %15s %15s %6s %7s\n", "TENANT", "SESSIONS",
			     "MEMORY", "OBJECTS", "INFLIGHT", "WEIGHT", "SHARE1M");
	for (struct cmx_tenant *t = srv->tenants.list; t; t = t->next) {
		uint64_t m = cmx_tenant_minute_ns(t, now);
		double share = total ? 100.0 * (double)m / (double)total : 0;
		if (json) {
			cmx_text_add(out,
				     "%s{\"name\":\"%s\",\"sessions\":%" PRIu64 ",\"mem\":%" PRIu64
				     ",\"mem_quota\":%" PRIu64 ",\"objects\":%" PRIu64
				     ",\"objects_quota\":%" PRIu64 ",\"inflight\":%" PRIu64
				     ",\"inflight_quota\":%" PRIu64 ",\"weight\":%" PRIu64
				     ",\"cap\":%" PRIu64 ",\"device_ns_1m\":%" PRIu64
				     ",\"share_1m\":%.4f,\"completed\":%" PRIu64
				     ",\"sessions_quota\":%" PRIu64 ",\"output\":%" PRIu64
				     ",\"backlogged\":%" PRIu64 "}",
				     sep, t->name, t->sessions, t->bytes, json_limit(t->q.mem),
				     t->objects, json_limit(t->q.objects), t->inflight,
				     json_limit(t->q.inflight), t->q.weight, t->q.cap, m,
				     share / 100.0, t->completed, json_limit(t->q.sessions),
				     t->output, t->backlogged);
			sep = ",";
			continue;
		}
		char mu[24], mq[24], oq[24], iq[24], mem[56], obj[56], inf[56];
		fmt_bytes(t->bytes, mu, sizeof(mu));
		fmt_bytes(t->q.mem, mq, sizeof(mq));
		fmt_count(t->q.objects, oq, sizeof(oq));
		fmt_count(t->q.inflight, iq, sizeof(iq));
		snprintf(mem, sizeof(mem), "%s/%s", mu, mq);
		snprintf(obj, sizeof(obj), "%" PRIu64 "/%s", t->objects, oq);
		snprintf(inf, sizeof(inf), "%" PRIu64 "/%s", t->inflight, iq);
		cmx_text_add(out, "%-16s %8" PRIu64 " %21s %15s %15s %6" PRIu64 " %6.1f%%\n",
			     t->name, t->sessions, mem, obj, inf, t->q.weight, share);
	}
	if (json)
		cmx_text_add(out, "]\n");
}

static void quota_show(const struct cmx_tenant *t, int json, struct cmx_text *out)
{
	char v[64];

	if (json)
		cmx_text_add(out, "{\"name\":\"%s\"", t->name);
	for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++) {
		cmx_quota_format(&t->q, cmx_quota_keys[k], v, sizeof(v));
		if (json)
			cmx_text_add(out, ",\"%s\":\"%s\"", cmx_quota_keys[k], v);
		else
			cmx_text_add(out, "%-9s %s\n", cmx_quota_keys[k], v);
	}
	if (json)
		cmx_text_add(out, "}\n");
}

static void stats_show(struct cmx_server *srv, int json, struct cmx_text *out)
{
	uint64_t launched = 0, completed = 0, refused = 0, ns = 0, inflight = 0;
	double up = (double)(cmx_now_ns() - srv->started_ns) / 1e9;

	uint64_t sessions = srv->nsessions, objects = srv->objects, bytes = srv->bytes;

	if (srv->front) {
		/* The workers' figures, as they last reported them. */
		sessions = objects = bytes = 0;
		for (struct cmx_tenant *t = srv->tenants.list; t; t = t->next) {
			sessions += t->sessions;
			objects += t->objects;
			bytes += t->bytes;
		}
	}
	for (struct cmx_tenant *t = srv->tenants.list; t; t = t->next) {
		launched += t->launched;
		completed += t->completed;
		refused += t->refused;
		ns += t->device_ns;
		inflight += t->inflight;
	}
	if (json) {
		cmx_text_add(out,
			     "{\"uptime_s\":%.1f,\"tenants\":%u,\"sessions\":%" PRIu64
			     ",\"objects\":%" PRIu64 ",\"mem\":%" PRIu64 ",\"inflight\":%" PRIu64
			     ",\"launched\":%" PRIu64 ",\"completed\":%" PRIu64
			     ",\"refused\":%" PRIu64 ",\"device_s\":%.3f}\n",
			     up, srv->tenants.count, sessions, objects, bytes, inflight, launched,
			     completed, refused, (double)ns / 1e9);
		return;
	}
	cmx_text_add(out,
		     "uptime      %.1f s\ntenants     %u\nsessions    %" PRIu64
		     "\nobjects     %" PRIu64 "\nmemory      %" PRIu64
		     " bytes\ninflight    %" PRIu64 "\nlaunched    %" PRIu64
		     "\ncompleted   %" PRIu64 "\nrefused     %" PRIu64 "\ndevice time %.3f s\n",
		     up, srv->tenants.count, sessions, objects, bytes, inflight, launched,
		     completed, refused, (double)ns / 1e9);
}

/* Unix paths may hold any byte but NUL: quoted for JSON. */
static void json_string(struct cmx_text *out, const char *s)
{
	cmx_text_add(out, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			cmx_text_add(out, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			cmx_text_add(out, "\\u%04x", (unsigned char)*s);
		else
			cmx_text_add(out, "%c", *s);
	}
	cmx_text_add(out, "\"");
}

/*
 * Each --listen address with its tenant (tenant=, else "-"): what clmuxctl
 * cdi generate makes container devices of. The address comes last on its
 * line, so that a path with spaces still parses.
 */
static void listeners_table(struct cmx_server *srv, int json, struct cmx_text *out)
{
	static const char *const kinds[] = {
	    [CMX_ADDR_UNIX] = "unix",
	    [CMX_ADDR_VSOCK] = "vsock",
	    [CMX_ADDR_VSOCK_UDS] = "vsock-uds",
	    [CMX_ADDR_TCP] = "tcp",
	};
	const char *sep = "";
	char buf[160];

	cmx_text_add(out, json ? "[" : "%-10s %-16s %s\n", "KIND", "TENANT", "ADDRESS");
	for (unsigned i = 0; i < srv->nlisteners; i++) {
		const struct cmx_listener *l = &srv->listeners[i];
		const char *kind = l->addr.tls ? "tls" : kinds[l->addr.type];
		const char *addr =
		    l->addr.path[0] ? l->addr.path : cmx_addr_str(&l->addr, buf, sizeof(buf));
		if (!json) {
			cmx_text_add(out, "%-10s %-16s %s\n", kind, l->tenant[0] ? l->tenant : "-",
				     addr);
			continue;
		}
		cmx_text_add(out, "%s{\"kind\":\"%s\",\"tenant\":\"%s\",\"address\":", sep, kind,
			     l->tenant);
		json_string(out, addr);
		cmx_text_add(out, "}");
		sep = ",";
	}
	if (json)
		cmx_text_add(out, "]\n");
}

unsigned cmx_admin_evict(struct cmx_server *srv, struct cmx_tenant *t)
{
	unsigned n = 0;

	/* Killing a connection can free its session: walk again each time. */
	for (;;) {
		struct cmx_session *s = srv->sessions;
		while (s && (s->closed || s->tenant != t || !s->conn))
			s = s->next;
		if (!s)
			return n;
		cmx_conn_kill(s->conn, "evicted by the administrator");
		n++;
	}
}

static void quota_set(struct cmx_server *srv, const char *name, char **kv, unsigned n,
		      struct cmx_text *out)
{
	struct cmx_tenant *t;
	struct cmx_quota q;
	char why[160];

	if (!cmx_tenant_name_ok(name)) {
		cmx_text_add(out, "error: bad tenant name '%s'\n", name);
		return;
	}
	t = cmx_tenant_find(&srv->tenants, name);
	q = t ? t->q : srv->tenants.defaults;
	if (!n) {
		cmx_text_add(out, "error: nothing to set (mem= objects= inflight= weight= cap= "
				  "rate= sessions=)\n");
		return;
	}
	/* All or nothing: every setting is checked before any applies. */
	for (unsigned i = 0; i < n; i++) {
		char *eq = strchr(kv[i], '=');
		if (!eq) {
			cmx_text_add(out, "error: expected key=value, got '%s'\n", kv[i]);
			return;
		}
		*eq = '\0';
		if (cmx_quota_set(&q, kv[i], eq + 1, why, sizeof(why))) {
			cmx_text_add(out, "error: %s\n", why);
			return;
		}
	}
	if (!t && !(t = cmx_tenant_get(&srv->tenants, name))) {
		cmx_text_add(out, "error: out of memory\n");
		return;
	}
	t->q = q;
	cmx_info("tenant %s: quotas changed by the administrator", t->name);
	if (srv->front)
		cmx_front_quota(t);
	if (srv->config_path) {
		int e = cmx_config_save(srv->config_path, t->name, &q);
		if (e) {
			cmx_text_add(out, "error: applied, but %s not written: %s\n",
				     srv->config_path, strerror(-e));
			return;
		}
	}
	cmx_text_add(out, "ok\n");
}

/* Every session to --state-dir: written here without workers; each
 * worker writes its own (and logs it) with them. */
static void checkpoint(struct cmx_server *srv, int json, struct cmx_text *out)
{
	struct cmx_checkpoint_stats st;

	if (!cmx_checkpoint_enabled()) {
		cmx_text_add(out, "error: no state directory (clmuxd --state-dir)\n");
		return;
	}
	if (srv->front) {
		unsigned k = cmx_front_checkpoint();
		cmx_text_add(out, "ok\n");
		cmx_text_add(out, json ? "{\"workers\":%u}\n" : "%u workers asked\n", k);
		return;
	}
	cmx_checkpoint_all(srv, &st);
	cmx_text_add(out, "ok\n");
	if (json)
		cmx_text_add(out,
			     "{\"sessions\":%u,\"failed\":%u,\"records\":%llu,\"bytes\":%llu,"
			     "\"ms\":%.3f}\n",
			     st.sessions, st.failed, (unsigned long long)st.records,
			     (unsigned long long)st.bytes, (double)st.ns / 1e6);
	else
		cmx_text_add(out, "%u sessions written (%llu buffer bytes) in %.1f ms, %u failed\n",
			     st.sessions, (unsigned long long)st.bytes, (double)st.ns / 1e6,
			     st.failed);
}

void cmx_admin_exec(struct cmx_server *srv, char *line, struct cmx_text *out)
{
	char *w[24];
	unsigned n = split_words(line, w, 24), i = 0;
	int json = 0;
	struct cmx_tenant *t;

	if (n && !strcmp(w[0], "json")) {
		json = 1;
		i = 1;
	}
	if (i >= n) {
		cmx_text_add(out, "error: empty request\n");
	} else if (!strcmp(w[i], "tenants") && n == i + 1) {
		cmx_text_add(out, "ok\n");
		tenants_table(srv, json, out);
	} else if (!strcmp(w[i], "workers") && n == i + 1) {
		if (!srv->front) {
			cmx_text_add(out, "error: no worker processes (clmuxd --workers off)\n");
			return;
		}
		cmx_text_add(out, "ok\n");
		cmx_front_workers(json, out);
	} else if (!strcmp(w[i], "listeners") && n == i + 1) {
		cmx_text_add(out, "ok\n");
		listeners_table(srv, json, out);
	} else if (!strcmp(w[i], "stats") && n == i + 1) {
		cmx_text_add(out, "ok\n");
		stats_show(srv, json, out);
	} else if (!strcmp(w[i], "quota") && n >= i + 3 && !strcmp(w[i + 1], "get")) {
		if (n != i + 3 || !(t = cmx_tenant_find(&srv->tenants, w[i + 2]))) {
			cmx_text_add(out, "error: no tenant '%s'\n", w[i + 2]);
			return;
		}
		cmx_text_add(out, "ok\n");
		quota_show(t, json, out);
	} else if (!strcmp(w[i], "quota") && n >= i + 3 && !strcmp(w[i + 1], "set")) {
		quota_set(srv, w[i + 2], w + i + 3, n - i - 3, out);
	} else if (!strcmp(w[i], "evict") && n == i + 2) {
		if (!(t = cmx_tenant_find(&srv->tenants, w[i + 1]))) {
			cmx_text_add(out, "error: no tenant '%s'\n", w[i + 1]);
			return;
		}
		unsigned k = srv->front ? cmx_front_evict(t) : cmx_admin_evict(srv, t);
		cmx_text_add(out, "ok\n");
		if (json)
			cmx_text_add(out, "{\"evicted\":%u}\n", k);
		else
			cmx_text_add(out, "%u session%s of %s closed\n", k, k == 1 ? "" : "s",
				     t->name);
	} else if (!strcmp(w[i], "checkpoint") && n == i + 1) {
		checkpoint(srv, json, out);
	} else if (cmx_libvirt_admin(srv, w + i, n - i, out)) {
		/* domain-xml, domain-prepare: host/libvirt.c */
	} else {
		cmx_text_add(out,
			     "error: unknown request '%s' (tenants, workers, listeners, stats, "
			     "quota get|set, evict, checkpoint, domain-xml, domain-prepare)\n",
			     w[i]);
	}
}

static void metric(struct cmx_server *srv, struct cmx_text *out, const char *name, const char *type,
		   const char *help, size_t off, double scale)
{
	cmx_text_add(out, "# HELP clmux_tenant_%s %s\n# TYPE clmux_tenant_%s %s\n", name, help,
		     name, type);
	for (struct cmx_tenant *t = srv->tenants.list; t; t = t->next) {
		uint64_t v = *(const uint64_t *)((const char *)t + off);
		if (v == CMX_UNLIMITED)
			continue;
		cmx_text_add(out, "clmux_tenant_%s{tenant=\"%s\"} %.9g\n", name, t->name,
			     (double)v * scale);
	}
}

#define M(name, type, help, field, scale)                                                          \
	metric(srv, out, name, type, help, offsetof(struct cmx_tenant, field), scale)

void cmx_metrics_write(struct cmx_server *srv, struct cmx_text *out)
{
	M("sessions", "gauge", "Open sessions.", sessions, 1);
	M("memory_bytes", "gauge", "Device memory charged.", bytes, 1);
	M("memory_quota_bytes", "gauge", "Device memory quota.", q.mem, 1);
	M("objects", "gauge", "Live objects.", objects, 1);
	M("objects_quota", "gauge", "Object quota.", q.objects, 1);
	M("inflight", "gauge", "Commands held or on the device.", inflight, 1);
	M("inflight_quota", "gauge", "Commands-in-flight quota.", q.inflight, 1);
	M("weight", "gauge", "Scheduling weight.", q.weight, 1);
	M("commands_launched_total", "counter", "Commands scheduled.", launched, 1);
	M("commands_completed_total", "counter", "Commands completed.", completed, 1);
	M("refused_total", "counter", "Commands refused by the in-flight quota.", refused, 1);
	M("throttled_total", "counter", "Times its rate quota paused a connection.", throttled, 1);
	M("capped_total", "counter", "Times its cap held a command back.", capped, 1);
	M("device_seconds_total", "counter", "Measured device time.", device_ns, 1e-9);
	M("received_bytes_total", "counter", "Bytes received from its sessions.", rx_bytes, 1);
}

/* ---- serving ---- */

static void client_end(struct client *c)
{
	close(c->fd);
	cmx_text_fini(&c->out);
	free(c);
}

static void client_io(struct cmx_io *io, int res, unsigned flags);

static void client_send(struct client *c)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(cmx_srv->loop, &c->io);

	c->sending = 1;
	io_uring_prep_send(sqe, c->fd, c->out.s + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);
}

static void client_recv(struct client *c)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(cmx_srv->loop, &c->io);

	io_uring_prep_recv(sqe, c->fd, c->req + c->len, sizeof(c->req) - 1 - c->len, 0);
}

static void client_answer(struct client *c)
{
	if (c->metrics) {
		struct cmx_text body = {0};
		cmx_metrics_write(cmx_srv, &body);
		/* Plain text for a unix socket reader; HTTP for a scraper. */
		if (!strncmp(c->req, "GET ", 4))
			cmx_text_add(
			    &c->out,
			    "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
			    "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			    body.len);
		cmx_text_put(&c->out, body.s ? body.s : "", body.len);
		cmx_text_fini(&body);
	} else {
		/* The request is the first line; a NUL ends it sooner. */
		*(char *)memchr(c->req, '\n', c->len) = '\0';
		cmx_admin_exec(cmx_srv, c->req, &c->out);
	}
	if (c->out.oom || !c->out.len) {
		client_end(c);
		return;
	}
	client_send(c);
}

static void client_io(struct cmx_io *io, int res, unsigned flags)
{
	struct client *c = (struct client *)io;

	if (c->sending) {
		if (res <= 0) {
			client_end(c);
			return;
		}
		c->sent += (size_t)res;
		if (c->sent < c->out.len)
			client_send(c);
		else
			client_end(c);
		return;
	}
	if (res <= 0) {
		client_end(c);
		return;
	}
	c->len += res > 0 ? (size_t)res : 0;
	c->req[c->len] = '\0';
	/* Admin: one line. Metrics: whatever arrives first (a scrape's GET). */
	if (c->metrics || memchr(c->req, '\n', c->len)) {
		/* The front end answers from the workers' latest figures. */
		if (cmx_srv->front)
			cmx_front_refresh((void (*)(void *))client_answer, c);
		else
			client_answer(c);
	} else if (c->len >= sizeof(c->req) - 1) {
		client_end(c);
	} else {
		client_recv(c);
	}
}

static void endpoint_accept(struct endpoint *ep);

static void accept_done(struct cmx_io *io, int res, unsigned flags)
{
	struct endpoint *ep = (struct endpoint *)io;
	struct client *c;

	if (res >= 0) {
		struct ucred cred = {.uid = ~0u};
		socklen_t len = sizeof(cred);
		static const char refused[] =
		    "error: permission denied: the admin socket is root's (and its group's)\n";

		/* The admin socket answers root and the admin group only,
		 * whatever its file mode. */
		if (!ep->metrics && !admin_peer_ok(res)) {
			getsockopt(res, SOL_SOCKET, SO_PEERCRED, &cred, &len);
			cmx_warn("admin: refused a peer with uid %u", cred.uid);
			send(res, refused, sizeof(refused) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			close(res);
		} else if ((c = calloc(1, sizeof(*c)))) {
			c->fd = res;
			c->metrics = ep->metrics;
			c->io.cb = client_io;
			client_recv(c);
		} else {
			close(res);
		}
	}
	if (!(flags & IORING_CQE_F_MORE) && ep->fd >= 0 && !cmx_srv->draining)
		endpoint_accept(ep);
}

static void endpoint_accept(struct endpoint *ep)
{
	ep->io.cb = accept_done;
	io_uring_prep_multishot_accept(cmx_loop_sqe(cmx_srv->loop, &ep->io), ep->fd, NULL, NULL,
				       SOCK_CLOEXEC);
}

int cmx_admin_listen(struct cmx_server *srv, const char *spec)
{
	/* Root's alone from the start: mode is set before it listens. */
	struct cmx_addr a = {.type = CMX_ADDR_UNIX, .opts = ",mode=0600"};
	const char *comma = strchr(spec, ',');
	size_t n = comma ? (size_t)(comma - spec) : strlen(spec);
	struct cmx_addr_perm perm;
	int fd;

	if (n >= sizeof(a.path))
		return -ENAMETOOLONG;
	memcpy(a.path, spec, n);
	a.path[n] = '\0';
	if (comma) {
		/* PATH,group=NAME: the group's members connect too (0660). */
		if (strncmp(comma, ",group=", 7) || strchr(comma + 1, ',') ||
		    strlen(comma) + sizeof(",mode=0660") > sizeof(a.opts))
			return -EINVAL;
		snprintf(a.opts, sizeof(a.opts), ",mode=0660%s", comma);
		if (cmx_addr_perm(&a, &perm, NULL, 0) || perm.gid < 0)
			return -EINVAL;
		admin_gid = perm.gid;
	}
	/* The service manager's socket (its file is the manager's), or one
	 * of our own; another daemon's live socket is left alone. */
	fd = cmx_activation_take(&a);
	if (fd >= 0) {
		admin_ep.fd = fd;
		endpoint_accept(&admin_ep);
		return 0;
	}
	fd = cmx_addr_connect(&a);
	if (fd >= 0) {
		close(fd);
		return -EADDRINUSE;
	}
	fd = cmx_addr_listen(&a);
	if (fd < 0)
		return fd;
	admin_ep.fd = fd;
	strcpy(admin_ep.path, a.path);
	endpoint_accept(&admin_ep);
	return 0;
}

int cmx_metrics_listen(struct cmx_server *srv, const char *spec, char *why, size_t whylen)
{
	int fd;

	if (!strncmp(spec, "tcp:", 4)) {
		struct sockaddr_in sin = {.sin_family = AF_INET};
		char host[64];
		const char *colon = strrchr(spec + 4, ':'), *comma = strchr(spec + 4, ',');
		size_t n = colon ? (size_t)(colon - spec - 4) : 0;
		int one = 1, public = comma && !strcmp(comma, ",public");
		if (!colon || !n || n >= sizeof(host) || !atoi(colon + 1) ||
		    atoi(colon + 1) > 65535 || (comma && !public)) {
			snprintf(why, whylen, "expected tcp:HOST:PORT[,public]");
			return -EINVAL;
		}
		memcpy(host, spec + 4, n);
		host[n] = '\0';
		if (inet_pton(AF_INET, host, &sin.sin_addr) != 1) {
			snprintf(why, whylen, "'%s' is not an IPv4 address", host);
			return -EINVAL;
		}
		/* The endpoint asks nobody for a token: off the host only when
		 * the admin says so. */
		if (!public && ntohl(sin.sin_addr.s_addr) >> 24 != 127) {
			snprintf(
			    why, whylen,
			    "%s is not a loopback address, and metrics need no token: use "
			    "127.0.0.1 or unix:PATH, or add ,public to serve them to the network",
			    host);
			return -EACCES;
		}
		sin.sin_port = htons((uint16_t)atoi(colon + 1));
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -errno;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) || listen(fd, 16)) {
			int e = -errno;
			close(fd);
			snprintf(why, whylen, "%s", strerror(-e));
			return e;
		}
	} else {
		struct cmx_addr_perm perm;
		struct cmx_addr a;
		if (cmx_addr_parse(spec, &a, why, whylen) || cmx_addr_perm(&a, &perm, why, whylen))
			return -EINVAL;
		/* The owner's alone unless mode= (and group=) say otherwise. */
		if (perm.mode < 0) {
			if (strlen(a.opts) + sizeof(",mode=0600") > sizeof(a.opts)) {
				snprintf(why, whylen, "options too long");
				return -EINVAL;
			}
			strcat(a.opts, ",mode=0600");
		}
		fd = cmx_activation_take(&a);
		if (fd < 0) {
			fd = cmx_addr_listen(&a);
			if (fd < 0) {
				snprintf(why, whylen, "%s", strerror(-fd));
				return fd;
			}
			strcpy(metrics_ep.path, a.path);
		}
	}
	metrics_ep.fd = fd;
	endpoint_accept(&metrics_ep);
	return 0;
}

void cmx_admin_close(struct cmx_server *srv)
{
	struct endpoint *eps[2] = {&admin_ep, &metrics_ep};

	for (int i = 0; i < 2; i++) {
		if (eps[i]->fd < 0)
			continue;
		io_uring_prep_cancel_fd(cmx_loop_sqe(srv->loop, NULL), eps[i]->fd, 0);
		close(eps[i]->fd);
		eps[i]->fd = -1;
		if (eps[i]->path[0])
			unlink(eps[i]->path);
	}
}
