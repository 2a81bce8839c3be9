// SPDX-License-Identifier: MIT
// Tenants: lookup by identity, quota parsing, quota checks, usage windows.
#include "tenant.h"

#include "log.h"

#include <CL/cl.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "addr.h"
#include "log.h"

#define WIN_SLOTS   6
#define WIN_SLOT_NS (10ull * 1000 * 1000 * 1000)

uint64_t cmx_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cmx_quota_unlimited(struct cmx_quota *q)
{
	q->mem = q->objects = q->inflight = q->rate = q->sessions = CMX_UNLIMITED;
	q->weight = 1;
	q->cap = 0;
	/* No build pre-flight unless asked for: it costs every build of
	 * source a process and a second compile (docs/admin.md); without it a
	 * compile bomb still ends only its tenant's worker. */
	q->build_mem = q->build_time = CMX_UNLIMITED;
	q->builds = 2;
	q->kernel_time = CMX_UNLIMITED;
}

int cmx_tenant_name_ok(const char *name)
{
	size_t n = strlen(name);

	if (!n || n >= CMX_TENANT_NAME)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)name[i]) && !strchr("_.-", name[i]))
			return 0;
	return 1;
}

struct cmx_tenant *cmx_tenant_find(struct cmx_tenants *ts, const char *name)
{
	for (struct cmx_tenant *t = ts->list; t; t = t->next)
		if (!strcmp(t->name, name))
			return t;
	return NULL;
}

const char *cmx_tenant_key(const struct cmx_tenant *t, char *out)
{
	snprintf(out, CMX_TENANT_KEY, "t:%s", t->group[0] ? t->group : t->name);
	return out;
}

struct cmx_tenant *cmx_tenant_get(struct cmx_tenants *ts, const char *name)
{
	struct cmx_tenant *t = cmx_tenant_find(ts, name), **tail;

	if (t || !cmx_tenant_name_ok(name))
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	strcpy(t->name, name);
	t->q = ts->defaults;
	t->held_tail = &t->held;
	t->cap_stamp = t->rate_stamp = cmx_now_ns();
	/* In creation order, so tables list tenants as the config does. */
	for (tail = &ts->list; *tail; tail = &(*tail)->next)
		;
	*tail = t;
	ts->count++;
	return t;
}

void cmx_tenant_remove(struct cmx_tenants *ts, struct cmx_tenant *t)
{
	for (struct cmx_tenant **p = &ts->list; *p; p = &(*p)->next)
		if (*p == t) {
			*p = t->next;
			ts->count--;
			free(t);
			return;
		}
}

static int ids_same(const struct cmx_tenant *a, const struct cmx_tenant *b)
{
	return a->nuids == b->nuids && a->ngids == b->ngids && a->ncids == b->ncids &&
	       !memcmp(a->uids, b->uids, a->nuids * sizeof(a->uids[0])) &&
	       !memcmp(a->gids, b->gids, a->ngids * sizeof(a->gids[0])) &&
	       !memcmp(a->cids, b->cids, a->ncids * sizeof(a->cids[0]));
}

static void ids_copy(struct cmx_tenant *to, const struct cmx_tenant *from)
{
	memcpy(to->uids, from->uids, sizeof(to->uids));
	memcpy(to->gids, from->gids, sizeof(to->gids));
	memcpy(to->cids, from->cids, sizeof(to->cids));
	to->nuids = from->nuids;
	to->ngids = from->ngids;
	to->ncids = from->ncids;
}

unsigned cmx_tenants_reload(struct cmx_tenants *ts, const struct cmx_tenants *nt,
			    void (*changed)(struct cmx_tenant *t))
{
	unsigned n = 0;

	for (const struct cmx_tenant *x = nt->list; x; x = x->next) {
		struct cmx_tenant *t = cmx_tenant_find(ts, x->name);
		int is_new = !t;

		if (is_new) {
			t = cmx_tenant_get(ts, x->name);
			if (!t) {
				cmx_err("reload: tenant %s: out of memory; not added", x->name);
				continue;
			}
			strcpy(t->group, x->group);
			t->shared_context = x->shared_context;
			cmx_info("reload: tenant %s added", t->name);
		} else if (strcmp(t->group, x->group) || t->shared_context != x->shared_context) {
			cmx_warn("reload: tenant %s: its group and context mode change at a restart; "
				 "it keeps group '%s'",
				 t->name, t->group);
		}
		if (!ids_same(t, x)) {
			ids_copy(t, x);
			if (!is_new)
				cmx_info("reload: tenant %s: the peers it serves changed (new "
					 "connections)",
					 t->name);
			n++;
		}
		if (is_new || memcmp(&t->q, &x->q, sizeof(t->q))) {
			t->q = x->q;
			if (!is_new)
				cmx_info("reload: tenant %s: quotas changed", t->name);
			if (changed)
				changed(t);
			n++;
		}
	}
	for (const struct cmx_tenant *t = ts->list; t; t = t->next)
		if (!cmx_tenant_find((struct cmx_tenants *)nt, t->name) &&
		    (t->nuids || t->ngids || t->ncids))
			cmx_warn("reload: tenant %s is not in the file any more: it stays, with "
				 "its quotas and peers, until a restart",
				 t->name);
	if (strcmp(ts->fallback, nt->fallback)) {
		cmx_info("reload: peers of no tenant now go to %s",
			 nt->fallback[0] ? nt->fallback : "no tenant (refused)");
		strcpy(ts->fallback, nt->fallback);
		n++;
	}
	if (memcmp(&ts->defaults, &nt->defaults, sizeof(ts->defaults))) {
		ts->defaults = nt->defaults;
		n++;
	}
	/* The spec is written again after every reload (host/cdikeep.c). */
	if (strcmp(ts->cdi, nt->cdi) || strcmp(ts->cdi_icd, nt->cdi_icd)) {
		strcpy(ts->cdi, nt->cdi);
		strcpy(ts->cdi_icd, nt->cdi_icd);
		n++;
	}
	if (strcmp(ts->libvirt, nt->libvirt) || strcmp(ts->libvirt_group, nt->libvirt_group) ||
	    ts->sandbox != nt->sandbox || memcmp(&ts->tune, &nt->tune, sizeof(ts->tune)))
		cmx_warn("reload: [clmuxd] libvirt, libvirt-group, sandbox and the tuning keys "
			 "change at a restart; they keep their running values");
	return n;
}

void cmx_tenants_fini(struct cmx_tenants *ts)
{
	while (ts->list) {
		struct cmx_tenant *t = ts->list;
		ts->list = t->next;
		free(t);
	}
	ts->count = 0;
}

static int has(const uint32_t *v, unsigned n, uint32_t x)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i] == x)
			return 1;
	return 0;
}

struct cmx_tenant *cmx_tenant_lookup(struct cmx_tenants *ts, const struct cmx_ident *id)
{
	struct cmx_tenant *t;

	if (id->listener_tenant)
		return cmx_tenant_get(ts, id->listener_tenant);
	if (id->token_tenant)
		return cmx_tenant_get(ts, id->token_tenant);
	if (id->has_cid)
		for (t = ts->list; t; t = t->next)
			if (has(t->cids, t->ncids, id->cid))
				return t;
	if (id->has_cred) {
		for (t = ts->list; t; t = t->next)
			if (has(t->uids, t->nuids, id->uid))
				return t;
		for (t = ts->list; t; t = t->next)
			if (has(t->gids, t->ngids, id->gid))
				return t;
	}
	return ts->fallback[0] ? cmx_tenant_get(ts, ts->fallback) : NULL;
}

int cmx_tenant_may_alloc(const struct cmx_tenant *t, uint64_t bytes)
{
	if (t->q.mem != CMX_UNLIMITED && (bytes > t->q.mem || t->bytes > t->q.mem - bytes))
		return CL_MEM_OBJECT_ALLOCATION_FAILURE;
	return CL_SUCCESS;
}

int cmx_tenant_may_create(const struct cmx_tenant *t)
{
	return t->q.objects != CMX_UNLIMITED && t->objects >= t->q.objects ? CL_OUT_OF_RESOURCES
									   : CL_SUCCESS;
}

int cmx_tenant_may_hold(const struct cmx_tenant *t, uint64_t n)
{
	uint64_t limit;

	if (t->q.mem == CMX_UNLIMITED)
		return CL_SUCCESS;
	limit = t->q.mem > CMX_UNLIMITED - CMX_TENANT_OUTPUT_SLACK
		    ? CMX_UNLIMITED
		    : t->q.mem + CMX_TENANT_OUTPUT_SLACK;
	return n > limit || t->bytes + t->output > limit - n ? CL_OUT_OF_HOST_MEMORY : CL_SUCCESS;
}

int cmx_tenant_may_open(const struct cmx_tenant *t)
{
	return t->q.sessions != CMX_UNLIMITED && t->sessions >= t->q.sessions ? CL_OUT_OF_RESOURCES
									      : CL_SUCCESS;
}

/* The window is six 10-second slots, each stamped with the slot it counts. */
void cmx_tenant_account(struct cmx_tenant *t, uint64_t ns, uint64_t now)
{
	uint64_t slot = now / WIN_SLOT_NS;
	unsigned i = (unsigned)(slot % WIN_SLOTS);

	if (t->win_start[i] != slot) {
		t->win_start[i] = slot;
		t->win_ns[i] = 0;
	}
	t->win_ns[i] += ns;
	t->device_ns += ns;
}

uint64_t cmx_tenant_minute_ns(const struct cmx_tenant *t, uint64_t now)
{
	uint64_t slot = now / WIN_SLOT_NS, sum = 0;

	for (unsigned i = 0; i < WIN_SLOTS; i++)
		if (t->win_start[i] + WIN_SLOTS > slot)
			sum += t->win_ns[i];
	return sum;
}

static int parse_uint(const char *s, uint64_t *out)
{
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return errno || *end ? -EINVAL : 0;
}

/*
 * Each quota's parser gets the value with its unit suffix ("/s", "%", "s")
 * already cut where the key has one, and `none` set where the value was
 * "none" or "unlimited"; each formatter writes what its parser reads back.
 */
static int parse_count(char *s, int none, uint64_t *v)
{
	if (none) {
		*v = CMX_UNLIMITED;
		return 0;
	}
	return parse_uint(s, v) || !*v ? -EINVAL : 0;
}

static int parse_size(char *s, int none, uint64_t *v)
{
	if (none) {
		*v = CMX_UNLIMITED;
		return 0;
	}
	return cmx_size_parse(s, v) ? -EINVAL : 0;
}

static int parse_build_mem(char *s, int none, uint64_t *v)
{
	/* Below 64M no driver even loads. */
	return parse_size(s, none, v) || *v < (64ull << 20) ? -EINVAL : 0;
}

static int parse_rate(char *s, int none, uint64_t *v)
{
	return parse_size(s, none, v) || !*v ? -EINVAL : 0;
}

static int parse_weight(char *s, int none, uint64_t *v)
{
	(void)none;
	return parse_uint(s, v) || !*v || *v > 1000 ? -EINVAL : 0;
}

static int parse_cap(char *s, int none, uint64_t *v)
{
	if (none) {
		*v = 0;
		return 0;
	}
	if (parse_uint(s, v) || !*v || *v > 100)
		return -EINVAL;
	if (*v == 100)
		*v = 0;
	return 0;
}

static void format_count(uint64_t v, char *out, size_t len)
{
	if (v == CMX_UNLIMITED)
		snprintf(out, len, "none");
	else
		snprintf(out, len, "%" PRIu64, v);
}

static void format_size(uint64_t v, char *out, size_t len)
{
	static const char units[] = "KMGT";
	int u = -1;

	if (v == CMX_UNLIMITED) {
		snprintf(out, len, "none");
		return;
	}
	while (u < 3 && v && v % 1024 == 0) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(out, len, "%" PRIu64, v);
	else
		snprintf(out, len, "%" PRIu64 "%c", v, units[u]);
}

static void format_rate(uint64_t v, char *out, size_t len)
{
	format_size(v, out, len);
	if (v != CMX_UNLIMITED && strlen(out) + 3 <= len)
		strcat(out, "/s");
}

static void format_weight(uint64_t v, char *out, size_t len)
{
	snprintf(out, len, "%" PRIu64, v);
}

static void format_cap(uint64_t v, char *out, size_t len)
{
	if (v)
		snprintf(out, len, "%" PRIu64 "%%", v);
	else
		snprintf(out, len, "none");
}

#define QUOTA(key, field, suffix, parse, format)                                                   \
	{                                                                                          \
		key, offsetof(struct cmx_quota, field), suffix, parse_##parse, format_##format     \
	}

/* In the order clmuxctl, the admin socket and a saved file list them. */
const struct cmx_quota_key cmx_quota_keys[CMX_QUOTA_KEYS] = {
    QUOTA("mem", mem, NULL, size, size),
    QUOTA("objects", objects, NULL, count, count),
    QUOTA("inflight", inflight, NULL, count, count),
    QUOTA("weight", weight, NULL, weight, weight),
    QUOTA("cap", cap, "%", cap, cap),
    QUOTA("rate", rate, "/s", rate, rate),
    QUOTA("sessions", sessions, NULL, count, count),
    QUOTA("build-mem", build_mem, NULL, build_mem, size),
    QUOTA("build-time", build_time, "s", count, count),
    QUOTA("builds", builds, NULL, count, count),
    QUOTA("kernel-time", kernel_time, "s", count, count),
};

const struct cmx_quota_key *cmx_quota_key_find(const char *key)
{
	for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++)
		if (!strcmp(cmx_quota_keys[k].name, key))
			return &cmx_quota_keys[k];
	return NULL;
}

int cmx_quota_set(struct cmx_quota *q, const char *key, const char *value, char *why, size_t whylen)
{
	const struct cmx_quota_key *k;
	char buf[64];
	uint64_t v;
	size_t n = strlen(value), sn;
	int none = !strcmp(value, "none") || !strcmp(value, "unlimited");

	if (n >= sizeof(buf))
		goto bad;
	k = cmx_quota_key_find(key);
	if (!k) {
		snprintf(why, whylen, "unknown quota '%s' (", key);
		for (unsigned i = 0; i < CMX_QUOTA_KEYS; i++) {
			size_t used = strlen(why);
			snprintf(why + used, whylen - used, "%s%s", i ? ", " : "",
				 cmx_quota_keys[i].name);
		}
		if (strlen(why) + 2 <= whylen)
			strcat(why, ")");
		return -EINVAL;
	}
	strcpy(buf, value);
	sn = k->suffix ? strlen(k->suffix) : 0;
	if (sn && n > sn && !strcmp(buf + n - sn, k->suffix))
		buf[n - sn] = '\0';
	if (k->parse(buf, none, &v))
		goto bad;
	memcpy((char *)q + k->off, &v, sizeof(v));
	return 0;
bad:
	snprintf(why, whylen, "bad value '%s' for %s", value, key);
	return -EINVAL;
}

void cmx_quota_format(const struct cmx_quota *q, const char *key, char *out, size_t len)
{
	const struct cmx_quota_key *k = cmx_quota_key_find(key);
	uint64_t v;

	if (!k) {
		snprintf(out, len, "?");
		return;
	}
	memcpy(&v, (const char *)q + k->off, sizeof(v));
	k->format(v, out, len);
}

uint64_t cmx_tenant_rx_wait(struct cmx_tenant *t, uint64_t now)
{
	double rate = (double)t->q.rate, tokens;

	if (t->q.rate == CMX_UNLIMITED)
		return 0;
	tokens = (double)t->rate_tokens + (double)(now - t->rate_stamp) / 1e9 * rate;
	return tokens >= 0 ? 0 : (uint64_t)(-tokens / rate * 1e9);
}

/* A token bucket holding at most one second's worth of bytes. */
uint64_t cmx_tenant_rx(struct cmx_tenant *t, uint64_t n, uint64_t now)
{
	double elapsed = (double)(now - t->rate_stamp) / 1e9, rate = (double)t->q.rate;
	double tokens = (double)t->rate_tokens;

	t->rx_bytes += n;
	t->rate_stamp = now;
	if (t->q.rate == CMX_UNLIMITED)
		return 0;
	tokens += elapsed * rate;
	if (tokens > rate)
		tokens = rate;
	tokens -= (double)n;
	t->rate_tokens = tokens < -9e18 ? INT64_MIN : (int64_t)tokens;
	if (tokens >= 0)
		return 0;
	t->throttled++;
	return (uint64_t)(-tokens / rate * 1e9);
}
