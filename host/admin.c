// SPDX-License-Identifier: MIT
// The admin socket and the metrics endpoint, both served on the loop: one
// request per connection, answered, then closed.
#define _GNU_SOURCE
#include "admin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <json.h>
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
#include "jsonline.h"
#include "libvirt.h"
#include "listener.h"
#include "log.h"
#include "migrate.h"
#include "release.h"
#include "server.h"
#include "session.h"
#include "tenant.h"
#include "text.h"

#define REQ_MAX 4096

struct endpoint {
	struct cmx_io io;
	struct cmx_server *srv;
	int fd;
	int metrics;
	char path[108]; /* unix: unlinked at close */
};

/* The server's admin socket and metrics endpoint (srv->admin): made at the
 * first listen, freed once the loop is gone (cmx_admin_destroy()). */
struct cmx_admin {
	struct endpoint admin, metrics;
	/* --admin PATH,group=NAME: that group's members may use the admin
	 * socket too (-1: root only). */
	long gid;
};

struct client {
	struct cmx_io io;
	struct cmx_server *srv;
	int fd;
	int metrics;
	int sending;
	int json; /* a migrate request's answer */
	char req[REQ_MAX];
	size_t len;
	struct cmx_text out;
	size_t sent;
};

static struct cmx_admin *admin_get(struct cmx_server *srv)
{
	struct cmx_admin *a = srv->admin;

	if (a || !(a = calloc(1, sizeof(*a))))
		return a;
	a->admin = (struct endpoint){.srv = srv, .fd = -1};
	a->metrics = (struct endpoint){.srv = srv, .fd = -1, .metrics = 1};
	a->gid = -1;
	srv->admin = a;
	return a;
}

void cmx_admin_destroy(struct cmx_server *srv)
{
	free(srv->admin);
	srv->admin = NULL;
}

/* Root, or a member of the admin group (primary or supplementary, as the
 * kernel saw the peer's credentials at connect). */
static int admin_peer_ok(long admin_gid, int fd)
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

static void add_u64(struct json_object *o, const char *key, uint64_t v)
{
	cmx_json_add(o, key, json_object_new_uint64(v));
}

/* A number with `digits` decimals (json-c alone would write 17 digits). */
static void add_fixed(struct json_object *o, const char *key, int digits, double v)
{
	char s[48];

	snprintf(s, sizeof(s), "%.*f", digits, v);
	cmx_json_add(o, key, json_object_new_double_s(v, s));
}

static void tenants_table(struct cmx_server *srv, int json, struct cmx_text *out)
{
	uint64_t now = cmx_now_ns(), total = 0;
	struct json_object *arr = NULL;

	for (struct cmx_tenant *t = srv->tenants.list; t; t = t->next)
		total += cmx_tenant_minute_ns(t, now);
	if (json)
		arr = json_object_new_array();
	else
		cmx_text_add(out, "%-16s %8s %21s %15s %15s %6s %7s\n", "TENANT", "SESSIONS",
			     "MEMORY", "OBJECTS", "INFLIGHT", "WEIGHT", "SHARE1M");
	for (struct cmx_tenant *t = srv->tenants.list; t; t = t->next) {
		uint64_t m = cmx_tenant_minute_ns(t, now);
		double share = total ? 100.0 * (double)m / (double)total : 0;
		if (json) {
			struct json_object *o = json_object_new_object();
			cmx_json_add(o, "name", json_object_new_string(t->name));
			add_u64(o, "sessions", t->sessions);
			add_u64(o, "mem", t->bytes);
			add_u64(o, "mem_quota", json_limit(t->q.mem));
			add_u64(o, "objects", t->objects);
			add_u64(o, "objects_quota", json_limit(t->q.objects));
			add_u64(o, "inflight", t->inflight);
			add_u64(o, "inflight_quota", json_limit(t->q.inflight));
			add_u64(o, "weight", t->q.weight);
			add_u64(o, "cap", t->q.cap);
			add_u64(o, "device_ns_1m", m);
			add_fixed(o, "share_1m", 4, share / 100.0);
			add_u64(o, "completed", t->completed);
			add_u64(o, "sessions_quota", json_limit(t->q.sessions));
			add_u64(o, "output", t->output);
			add_u64(o, "backlogged", t->backlogged);
			if (!arr || json_object_array_add(arr, o))
				json_object_put(o);
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
		cmx_json_line(out, arr);
}

static void quota_show(const struct cmx_tenant *t, int json, struct cmx_text *out)
{
	struct json_object *o = json ? json_object_new_object() : NULL;
	char v[64];

	cmx_json_add(o, "name", json_object_new_string(t->name));
	for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++) {
		cmx_quota_format(&t->q, cmx_quota_keys[k].name, v, sizeof(v));
		if (json)
			cmx_json_add(o, cmx_quota_keys[k].name, json_object_new_string(v));
		else
			cmx_text_add(out, "%-9s %s\n", cmx_quota_keys[k].name, v);
	}
	if (json)
		cmx_json_line(out, o);
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
		struct json_object *o = json_object_new_object();
		add_fixed(o, "uptime_s", 1, up);
		add_u64(o, "tenants", srv->tenants.count);
		add_u64(o, "sessions", sessions);
		add_u64(o, "objects", objects);
		add_u64(o, "mem", bytes);
		add_u64(o, "inflight", inflight);
		add_u64(o, "launched", launched);
		add_u64(o, "completed", completed);
		add_u64(o, "refused", refused);
		add_fixed(o, "device_s", 3, (double)ns / 1e9);
		cmx_json_line(out, o);
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
	struct json_object *arr = NULL, *o;
	char buf[160];

	if (json)
		arr = json_object_new_array();
	else
		cmx_text_add(out, "%-10s %-16s %s\n", "KIND", "TENANT", "ADDRESS");
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
		/* Unix paths may hold any byte but NUL. */
		o = json_object_new_object();
		cmx_json_add(o, "kind", json_object_new_string(kind));
		cmx_json_add(o, "tenant", json_object_new_string(l->tenant));
		cmx_json_add(o, "address", json_object_new_string(addr));
		if (!arr || json_object_array_add(arr, o))
			json_object_put(o);
	}
	if (json)
		cmx_json_line(out, arr);
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

	if (!cmx_checkpoint_enabled(srv)) {
		cmx_text_add(out, "error: no state directory (clmuxd --state-dir)\n");
		return;
	}
	if (srv->front) {
		unsigned k = cmx_front_checkpoint();
		cmx_text_add(out, "ok\n");
		if (json) {
			struct json_object *o = json_object_new_object();
			add_u64(o, "workers", k);
			cmx_json_line(out, o);
		} else {
			cmx_text_add(out, "%u workers asked\n", k);
		}
		return;
	}
	cmx_checkpoint_all(srv, &st);
	cmx_text_add(out, "ok\n");
	if (json) {
		struct json_object *o = json_object_new_object();
		add_u64(o, "sessions", st.sessions);
		add_u64(o, "failed", st.failed);
		add_u64(o, "records", st.records);
		add_u64(o, "bytes", st.bytes);
		add_u64(o, "image_bytes", st.images);
		add_fixed(o, "ms", 3, (double)st.ns / 1e6);
		cmx_json_line(out, o);
	} else {
		cmx_text_add(
		    out,
		    "%u sessions written (%llu image bytes, %llu buffer bytes) in %.1f ms, "
		    "%u failed\n",
		    st.sessions, (unsigned long long)st.images, (unsigned long long)st.bytes,
		    (double)st.ns / 1e6, st.failed);
	}
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
		if (json) {
			struct json_object *arr = json_object_new_array();
			cmx_front_workers(arr, out);
			cmx_json_line(out, arr);
		} else {
			cmx_front_workers(NULL, out);
		}
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
		unsigned k = srv->front ? cmx_front_evict(t) : cmx_release_tenant(srv, t);
		cmx_text_add(out, "ok\n");
		if (json) {
			struct json_object *o = json_object_new_object();
			add_u64(o, "evicted", k);
			cmx_json_line(out, o);
		} else
			cmx_text_add(out, "%u session%s of %s closed\n", k, k == 1 ? "" : "s",
				     t->name);
	} else if (!strcmp(w[i], "checkpoint") && n == i + 1) {
		checkpoint(srv, json, out);
	} else if (cmx_libvirt_admin(srv, w + i, n - i, out)) {
		/* domain-xml, domain-prepare: host/libvirt.c */
	} else {
		cmx_text_add(out,
			     "error: unknown request '%s' (tenants, workers, listeners, stats, "
			     "quota get|set, evict, checkpoint, migrate, domain-xml, "
			     "domain-prepare)\n",
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
	struct io_uring_sqe *sqe = cmx_loop_sqe(c->srv->loop, &c->io);

	c->sending = 1;
	io_uring_prep_send(sqe, c->fd, c->out.s + c->sent, c->out.len - c->sent, MSG_NOSIGNAL);
}

static void client_recv(struct client *c)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(c->srv->loop, &c->io);

	io_uring_prep_recv(sqe, c->fd, c->req + c->len, sizeof(c->req) - 1 - c->len, 0);
}

static void client_answer(struct client *c)
{
	if (c->metrics) {
		struct cmx_text body = {0};
		cmx_metrics_write(c->srv, &body);
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
		cmx_admin_exec(c->srv, c->req, &c->out);
	}
	if (c->out.oom || !c->out.len) {
		client_end(c);
		return;
	}
	client_send(c);
}

static void migrate_write(struct cmx_text *out, int json, int err,
			  const struct cmx_migrate_stats *st)
{
	if (err) {
		cmx_text_add(out, "error: %s\n", st->why[0] ? st->why : strerror(-err));
		return;
	}
	cmx_text_add(out, "ok\n");
	if (json) {
		struct json_object *o = json_object_new_object();
		add_u64(o, "sessions", st->sessions);
		add_u64(o, "bytes", st->bytes);
		add_fixed(o, "ms", 3, (double)st->ns / 1e6);
		cmx_json_line(out, o);
	} else {
		cmx_text_add(out, "%u session%s moved (%llu state bytes) in %.1f ms\n",
			     st->sessions, st->sessions == 1 ? "" : "s",
			     (unsigned long long)st->bytes, (double)st->ns / 1e6);
	}
}

/* An answer written into c->out: sent, then c ends. */
static void client_answered(void *arg)
{
	struct client *c = arg;

	if (c->out.oom || !c->out.len)
		client_end(c);
	else
		client_send(c);
}

static void migrate_done(void *arg, int err, const struct cmx_migrate_stats *st)
{
	struct client *c = arg;

	migrate_write(&c->out, c->json, err, st);
	if (c->out.oom)
		client_end(c);
	else
		client_send(c);
}

/*
 * The requests that are not one line answered at once: "state-in" (a
 * migration's state files follow the line) and "migrate --tenant T --to
 * ADMIN" (answered once the tenant's sessions are at the destination).
 * 1 when c was taken.
 */
static int client_special(struct client *c, char *nl)
{
	char line[512], *w[8];
	size_t n = (size_t)(nl - c->req);
	unsigned k, i = 0;
	struct cmx_tenant *t;
	struct cmx_migrate_stats st = {0};
	int fd;

	if (n == strlen(CMX_MIGRATE_REQUEST) && !memcmp(c->req, CMX_MIGRATE_REQUEST, n)) {
		if (!cmx_migrate_in(c->srv, c->fd, (const uint8_t *)nl + 1, c->len - n - 1,
				    &c->out, client_answered, c))
			client_answered(c);
		return 1;
	}
	if (n >= sizeof(line))
		return 0;
	memcpy(line, c->req, n);
	line[n] = '\0';
	k = split_words(line, w, 8);
	if (k && !strcmp(w[0], "json"))
		c->json = i = 1;
	if (i >= k || strcmp(w[i], "migrate"))
		return 0;
	if (k != i + 5 || strcmp(w[i + 1], "--tenant") || strcmp(w[i + 3], "--to")) {
		cmx_text_add(&c->out, "error: migrate --tenant TENANT --to ADMIN-SOCKET\n");
	} else if (!(t = cmx_tenant_find(&c->srv->tenants, w[i + 2]))) {
		cmx_text_add(&c->out, "error: no tenant '%s'\n", w[i + 2]);
	} else if (c->srv->front) {
		int e = cmx_front_migrate(t, w[i + 4], migrate_done, c);
		if (!e)
			return 1;
		migrate_write(&c->out, c->json, e, &st);
	} else if ((fd = cmx_migrate_connect(w[i + 4])) < 0) {
		snprintf(st.why, sizeof(st.why), "%s: %s", w[i + 4], strerror(-fd));
		migrate_write(&c->out, c->json, fd, &st);
	} else {
		if (!cmx_migrate_out(c->srv, t, fd, migrate_done, c))
			return 1;
		migrate_write(&c->out, c->json, -ENOMEM, &st);
	}
	if (c->out.oom)
		client_end(c);
	else
		client_send(c);
	return 1;
}

static void client_io(struct cmx_io *io, int res, unsigned flags)
{
	struct client *c = (struct client *)io;
	char *nl;

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
	nl = c->metrics ? NULL : memchr(c->req, '\n', c->len);
	if (nl && client_special(c, nl))
		return;
	/* Admin: one line. Metrics: whatever arrives first (a scrape's GET). */
	if (c->metrics || nl) {
		/* The front end answers from the workers' latest figures. */
		if (c->srv->front)
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
		if (!ep->metrics && !admin_peer_ok(ep->srv->admin->gid, res)) {
			getsockopt(res, SOL_SOCKET, SO_PEERCRED, &cred, &len);
			cmx_warn("admin: refused a peer with uid %u", cred.uid);
			send(res, refused, sizeof(refused) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			close(res);
		} else if ((c = calloc(1, sizeof(*c)))) {
			c->srv = ep->srv;
			c->fd = res;
			c->metrics = ep->metrics;
			c->io.cb = client_io;
			client_recv(c);
		} else {
			close(res);
		}
	}
	if (!(flags & IORING_CQE_F_MORE) && ep->fd >= 0 && !ep->srv->draining)
		endpoint_accept(ep);
}

static void endpoint_accept(struct endpoint *ep)
{
	ep->io.cb = accept_done;
	io_uring_prep_multishot_accept(cmx_loop_sqe(ep->srv->loop, &ep->io), ep->fd, NULL, NULL,
				       SOCK_CLOEXEC);
}

int cmx_admin_listen(struct cmx_server *srv, const char *spec)
{
	/* Root's alone from the start: mode is set before it listens. */
	struct cmx_addr a = {.type = CMX_ADDR_UNIX, .opts = ",mode=0600"};
	const char *comma = strchr(spec, ',');
	size_t n = comma ? (size_t)(comma - spec) : strlen(spec);
	struct cmx_admin *adm = admin_get(srv);
	struct cmx_addr_perm perm;
	int fd;

	if (!adm)
		return -ENOMEM;
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
		adm->gid = perm.gid;
	}
	/* The service manager's socket (its file is the manager's), or one
	 * of our own; another daemon's live socket is left alone. */
	fd = cmx_activation_take(&a);
	if (fd >= 0) {
		adm->admin.fd = fd;
		endpoint_accept(&adm->admin);
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
	adm->admin.fd = fd;
	strcpy(adm->admin.path, a.path);
	endpoint_accept(&adm->admin);
	return 0;
}

int cmx_metrics_listen(struct cmx_server *srv, const char *spec, char *why, size_t whylen)
{
	struct cmx_admin *adm = admin_get(srv);
	int fd;

	if (!adm) {
		snprintf(why, whylen, "out of memory");
		return -ENOMEM;
	}

	if (!strncmp(spec, "tcp:", 4)) {
		struct sockaddr_in sin = {.sin_family = AF_INET};
		char host[64];
		const char *colon = strrchr(spec + 4, ':'), *comma = strchr(spec + 4, ',');
		size_t n = colon ? (size_t)(colon - spec - 4) : 0;
		int one = 1, public = comma && !strcmp(comma, ",public");
		/* The port runs to the comma of ",public", if any. */
		const char *port_end = comma ? comma : spec + strlen(spec);
		char port_s[8] = "";
		uint64_t port = 0;
		if (colon && port_end > colon && (size_t)(port_end - colon - 1) < sizeof(port_s))
			memcpy(port_s, colon + 1, (size_t)(port_end - colon - 1));
		if (!colon || !n || n >= sizeof(host) || cmx_uint_parse(port_s, 1, 65535, &port) ||
		    (comma && !public)) {
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
		sin.sin_port = htons((uint16_t)port);
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
			strcpy(adm->metrics.path, a.path);
		}
	}
	adm->metrics.fd = fd;
	endpoint_accept(&adm->metrics);
	return 0;
}

void cmx_admin_close(struct cmx_server *srv)
{
	struct cmx_admin *adm = srv->admin;
	struct endpoint *eps[2] = {adm ? &adm->admin : NULL, adm ? &adm->metrics : NULL};

	if (!adm)
		return;
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
