// SPDX-License-Identifier: MIT
// Tenants: names with quotas and usage, and how a connection maps to one.
#ifndef CMX_HOST_TENANT_H
#define CMX_HOST_TENANT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "tuning.h"

#define CMX_TENANT_NAME	   64
/* A worker's key (cmx_tenant_key(), host/front.c): "t:", "l:N", "v:N". */
#define CMX_TENANT_KEY	   (CMX_TENANT_NAME + 8)
#define CMX_TENANT_MAX_IDS 16
#define CMX_UNLIMITED	   UINT64_MAX

/* Limits; CMX_UNLIMITED where there is none. */
struct cmx_quota {
	uint64_t mem;	   /* device memory bytes */
	uint64_t objects;  /* live objects of every kind */
	uint64_t inflight; /* commands held or on the device */
	uint64_t weight;   /* share of device time, 1..1000 */
	uint64_t cap;	   /* percent of device time, 1..100; 0 none */
	uint64_t rate;	   /* bytes per second received from the tenant */
	uint64_t sessions; /* sessions open at once */
	/* A build's pre-flight child (host/buildcheck.c): its address space in
	 * bytes and CPU seconds (CMX_UNLIMITED both: no pre-flight), and how
	 * many run at once. */
	uint64_t build_mem, build_time, builds;
	/* Seconds a command may stay unfinished on the device (CMX_UNLIMITED:
	 * none); past it the tenant's worker is ended (host/scheduler.c). */
	uint64_t kernel_time;
};

struct cmx_tenant {
	char name[CMX_TENANT_NAME];
	struct cmx_quota q;
	/* Who belongs here (config: uid =, gid =, cid =). */
	uint32_t uids[CMX_TENANT_MAX_IDS], gids[CMX_TENANT_MAX_IDS], cids[CMX_TENANT_MAX_IDS];
	unsigned nuids, ngids, ncids;
	/* group =: tenants of one group share one worker process (one fault
	 * domain, and the in-process scheduler between them); "" is a group of
	 * its own (host/front.c). */
	char group[CMX_TENANT_NAME];
	int shared_context; /* context = shared: its group shares one native context */

	/* Usage, touched on the loop only; a worker reports it to the front end
	 * field by field (cmx_ctl_usage_pack(), host/ctl.c): a new one goes there
	 * too. */
	uint64_t sessions, bytes, objects, inflight;
	/* Bytes of output the daemon holds for it: replies and notifications
	 * queued on its connections, read data staged for them (host/conn.c,
	 * cmx_call_read_buffer()), and a restore's payloads staged for its
	 * replayed requests (host/restore.c). Charged against mem
	 * (cmx_tenant_may_hold()). */
	uint64_t output;
	/* Of bytes: what restores keep for it (host/binkeep.c), as last
	 * charged by cmx_binkeep_charge(); its worker's own, reported within
	 * bytes. */
	uint64_t kept;
	uint64_t launched, completed, refused;
	uint64_t throttled, capped;	  /* times the rate or the cap held it back */
	uint64_t backlogged;		  /* times its unread output held a session back */
	uint64_t device_ns;		  /* measured device time, ever */
	uint64_t rx_bytes;		  /* bytes received from its sessions */
	uint64_t win_ns[6], win_start[6]; /* device time per 10 s slot, last minute */

	/* Scheduler state (host/scheduler.c). */
	uint64_t vtime;	     /* virtual time: device ns / weight */
	uint64_t est_ns;     /* running average of its commands' device time */
	/* Its launches' last device times, and their median, taken every
	 * CMX_TYPICAL_N: what one takes when the device runs them back to
	 * back. A driver's slices for other contexts lengthen some, and
	 * several reported by one completion shorten some; the average
	 * counts both, the median neither. */
#define CMX_TYPICAL_N 16
	uint32_t recent_ns[CMX_TYPICAL_N];
	unsigned recent_n;
	uint64_t typical_ns;
	int64_t cap_tokens;  /* ns of device time it may still use (cap) */
	uint64_t cap_stamp;  /* when cap_tokens was last refilled */
	int64_t rate_tokens; /* bytes it may still send (rate) */
	uint64_t rate_stamp;
	struct cmx_ticket *held, **held_tail; /* commands waiting for the device */
	struct cmx_tenant *next_ready;	    /* on the scheduler's list */
	int ready;
	int overtime;	  /* its worker was told to end for kernel-time */
	int fresh;	  /* held after being idle: wants a turn soon */
	uint64_t running; /* commands on the device */

	struct cmx_tenant *next;
};

/*
 * Who is at the other end of a connection, as far as the daemon knows
 * (struct cmx_conn's `ident`, read by cmx_tenant_lookup() at Hello). Each
 * transport fills what it knows when it accepts: unix sockets the
 * listener's tenant= and SO_PEERCRED (cmx_conn_create()); vsock listeners
 * has_cid and cid; TCP the tenant its token names (token_tenant).
 */
struct cmx_ident {
	const char *listener_tenant; /* the listening socket's tenant=, or NULL */
	int has_cred;		     /* unix: SO_PEERCRED read */
	uid_t uid;
	gid_t gid;
	int has_cid; /* vsock: the guest's CID */
	uint32_t cid;
	const char *token_tenant; /* tcp: the tenant its token names */
};

struct cmx_tenants {
	struct cmx_tenant *list;
	unsigned count;
	struct cmx_quota defaults;	/* for tenants created without a section */
	char fallback[CMX_TENANT_NAME]; /* default tenant for unknown peers; "" none */
	/* [clmuxd] libvirt = URI and libvirt-group = NAME (host/libvirt.c);
	 * "" where not set. */
	char libvirt[256], libvirt_group[CMX_TENANT_NAME];
	int sandbox;			/* [clmuxd] sandbox: a cmx_sandbox_mode + 1; 0 unset */
	/* [clmuxd] cdi = PATH and cdi-icd = PATH: the CDI spec the daemon
	 * keeps current (host/cdikeep.c); "" where not set. */
	char cdi[256], cdi_icd[256];
	struct cmx_tuning tune;		/* [clmuxd] tuning keys (host/tuning.h) */
};

/* No limits but the compiler's (build-mem 4G, build-time 60, builds 2),
 * weight 1. */
void cmx_quota_unlimited(struct cmx_quota *q);

struct cmx_tenant *cmx_tenant_find(struct cmx_tenants *ts, const char *name);
/* Finds or creates (with the default quotas) the tenant `name`; NULL when
 * the name is invalid or memory is short. */
struct cmx_tenant *cmx_tenant_get(struct cmx_tenants *ts, const char *name);
/* The key of the worker process that serves t (docs/architecture.md,
 * "Worker processes"): "t:" and its group, or its own name without one.
 * Into out (CMX_TENANT_KEY bytes); out is returned. */
const char *cmx_tenant_key(const struct cmx_tenant *t, char *out);
/* Unlinks and frees t (a domain's tenant when its domain stops): nothing
 * may point at it any more. */
void cmx_tenant_remove(struct cmx_tenants *ts, struct cmx_tenant *t);
void cmx_tenants_fini(struct cmx_tenants *ts);
/*
 * A re-read configuration (nt) over the running one (ts), as far as it can
 * change live: each tenant's quotas and the ids that map peers to it, new
 * tenants, the default tenant and the defaults for tenants made later.
 * changed(t) runs for each tenant whose quotas changed or that is new (the
 * front end tells its worker). A tenant's group or context mode, a tenant
 * no longer in the file and the [clmuxd] keys keep their running values;
 * each is logged as needing a restart. Returns how many things changed.
 */
unsigned cmx_tenants_reload(struct cmx_tenants *ts, const struct cmx_tenants *nt,
			    void (*changed)(struct cmx_tenant *t));
/* Valid tenant names: [A-Za-z0-9_.-]{1,63}. */
int cmx_tenant_name_ok(const char *name);

/*
 * The one place a connection becomes a tenant's. In order: the listening
 * socket's tenant; the token's tenant (tcp); the vsock CID; the peer's uid,
 * then gid; else the default tenant. NULL: refused.
 */
struct cmx_tenant *cmx_tenant_lookup(struct cmx_tenants *ts, const struct cmx_ident *id);

/* Quota checks before anything reaches the device; 0 or a cl_int error. */
int cmx_tenant_may_alloc(const struct cmx_tenant *t, uint64_t bytes);
int cmx_tenant_may_create(const struct cmx_tenant *t);
/* Output a tenant at its mem quota may still have the daemon hold (read
 * data staged, replies and notifications queued): its device memory and
 * held output together stay within mem + this. */
#define CMX_TENANT_OUTPUT_SLACK (32ull << 20)
/* n more bytes of output held for t (staged read data): 0, or
 * CL_OUT_OF_HOST_MEMORY past mem + CMX_TENANT_OUTPUT_SLACK. */
int cmx_tenant_may_hold(const struct cmx_tenant *t, uint64_t n);
/* A new session (Hello): 0 or CL_OUT_OF_RESOURCES past `sessions`. */
int cmx_tenant_may_open(const struct cmx_tenant *t);

/* Device time accounting: adds ns to the tenant's totals and its window. */
void cmx_tenant_account(struct cmx_tenant *t, uint64_t ns, uint64_t now);
/* Device time in the last minute. */
uint64_t cmx_tenant_minute_ns(const struct cmx_tenant *t, uint64_t now);

/*
 * The quota keys, one row each: its name, where it lives in struct
 * cmx_quota, a unit suffix the value may carry ("/s", "%", "s"), and how
 * its value is read and written as text. mem=2G objects=10000 inflight=256
 * weight=3 cap=50% rate=1G/s sessions=8 build-mem=4G build-time=60 builds=2
 * kernel-time=30s; "none" or "unlimited" lifts a limit.
 */
struct cmx_quota_key {
	const char *name;
	size_t off;
	const char *suffix;
	/* 0 or -EINVAL; `none`: the value was "none" or "unlimited". */
	int (*parse)(char *value, int none, uint64_t *v);
	void (*format)(uint64_t v, char *out, size_t len);
};
#define CMX_QUOTA_KEYS 11
extern const struct cmx_quota_key cmx_quota_keys[CMX_QUOTA_KEYS];
const struct cmx_quota_key *cmx_quota_key_find(const char *key);

/* One "key=value" quota setting (clmuxctl, config): 0, or -EINVAL with a
 * reason in why. */
int cmx_quota_set(struct cmx_quota *q, const char *key, const char *value, char *why,
		  size_t whylen);
/* The value of one quota as text, as cmx_quota_set reads it back. */
void cmx_quota_format(const struct cmx_quota *q, const char *key, char *out, size_t len);

/* Charges n bytes received from the tenant to its rate quota; returns how
 * long (ns) to wait before reading more from that connection, or 0. */
uint64_t cmx_tenant_rx(struct cmx_tenant *t, uint64_t n, uint64_t now);
/* How long (ns) until the tenant's rate is out of debt, or 0; charges
 * nothing. */
uint64_t cmx_tenant_rx_wait(struct cmx_tenant *t, uint64_t now);

/* A monotonic clock in ns. */
uint64_t cmx_now_ns(void);

#endif
