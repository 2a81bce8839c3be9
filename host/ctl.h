// SPDX-License-Identifier: MIT
// The control channel between clmuxd's front end and a worker process:
// connections handed over, quota changes, evictions, and usage reports.
#ifndef CMX_HOST_CTL_H
#define CMX_HOST_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "peer.h"
#include "tenant.h"

/*
 * One SOCK_SEQPACKET socket pair per worker, made by the front end before
 * the worker is started (its end is inherited across exec). Every message
 * is one packet that starts with struct cmx_ctl_hdr. The front end trusts
 * nothing a worker says beyond its own tenants' numbers: a worker runs a
 * tenant's kernels (native code on a CPU device) and may be that tenant's.
 */
enum cmx_ctl_op {
	CMX_CTL_CONN = 1, /* front -> worker: a connection, its fd, its first bytes */
	CMX_CTL_QUOTA,	  /* front -> worker: "key=value ..." for one tenant */
	CMX_CTL_EVICT,	  /* front -> worker: end one tenant's sessions */
	CMX_CTL_USAGE,	  /* front -> worker: report (seq); worker -> front: one
			   * tenant's usage, then one with no tenant that ends
			   * the report of that seq */
	CMX_CTL_POISONED, /* worker -> front: the driver's state is lost; replace me */
	CMX_CTL_READY,	  /* worker -> front: the device is open, listeners started */
	CMX_CTL_OVERTIME, /* worker -> front: a tenant's command outran its kernel-time;
			   * end me (struct cmx_ctl_poisoned: why) */
	CMX_CTL_SHARE,	  /* front -> worker: the arbiter's say (struct cmx_ctl_share) */
	CMX_CTL_BUSY,	  /* worker -> front: I have work (struct cmx_ctl_busy; at most
			   * every CMX_SHARE_BEAT_NS while running free) */
	CMX_CTL_TURNED,	  /* worker -> front: turn seq is over, drained (struct
			   * cmx_ctl_turned) */
	CMX_CTL_CHECKPOINT, /* front -> worker: write every session to the state
			     * directory now (host/checkpoint.c) */
	CMX_CTL_MIGRATE,    /* front -> worker: move one tenant's sessions through
			     * the fd, a connection to the destination's admin
			     * socket (host/migrate.c) */
	CMX_CTL_MIGRATED,   /* worker -> front: that move's end (struct
			     * cmx_ctl_migrated, seq the request's) */
	CMX_CTL_RESTORE,    /* front -> worker: restore one state file now
			     * (struct cmx_ctl_restore) */
	CMX_CTL_RESTORED,   /* worker -> front: that restore's end (struct
			     * cmx_ctl_migrated: err; seq the request's) */
};

/*
 * The arbiter between workers (docs/architecture.md, "Sharing the device").
 * Tenants in different workers have native contexts in different processes,
 * which the driver time-slices evenly whatever their weights. While two or
 * more workers have work, the front end gives the device to one at a time
 * for a turn as long as its weight's part of CMX_SHARE_ROUND_NS; the others
 * hold their launches. A worker whose turn is over holds too, and says
 * TURNED once what it let onto the device has finished.
 */
enum cmx_share_mode {
	CMX_SHARE_FREE = 0, /* launch at will (one busy worker, or none) */
	CMX_SHARE_HOLD,	    /* hold launches until a turn or FREE */
	CMX_SHARE_TURN,	    /* launch for turn_ns, then hold and say TURNED */
};

/* A worker running free says BUSY at most this often while it has work. */
#define CMX_SHARE_BEAT_NS (20ull * 1000 * 1000)
/* The turns of every worker with work, once each: what weights share. */
#define CMX_SHARE_ROUND_NS (100ull * 1000 * 1000)

struct cmx_ctl_hdr {
	uint32_t op;
	uint32_t len; /* the whole packet */
	uint64_t seq;
	char tenant[CMX_TENANT_NAME];
};

/* Bytes a connection may bring along: what the front end read past Auth,
 * from the Hello on (a Hello and, at most, what a guest pipelines after). */
#define CMX_CTL_CONN_BYTES 16384u

struct cmx_ctl_conn {
	struct cmx_ctl_hdr h;
	struct cmx_peer peer;
	uint32_t authed; /* an Auth was accepted by the front end */
	uint32_t nbytes;
	uint8_t bytes[CMX_CTL_CONN_BYTES];
};

struct cmx_ctl_quota {
	struct cmx_ctl_hdr h;
	char line[512];
};

/* The usage fields of struct cmx_tenant, as the worker counts them. */
struct cmx_ctl_usage {
	struct cmx_ctl_hdr h;
	uint64_t sessions, bytes, objects, inflight, output;
	uint64_t launched, completed, refused, throttled, capped, backlogged;
	uint64_t device_ns, rx_bytes;
	uint64_t win_ns[6], win_start[6];
};

struct cmx_ctl_share {
	struct cmx_ctl_hdr h; /* seq: the turn's number (CMX_SHARE_TURN) */
	uint32_t mode;
	uint32_t pad;
	uint64_t turn_ns;
};

/* BUSY's and TURNED's flags. */
enum {
	/* Its launching tenant keeps less than CMX_SHARE_SHALLOW_NS of
	 * estimated device time in flight, in two or more commands: where
	 * the driver time-slices contexts, its queue runs dry between a
	 * completion and the refill, and the device goes to another context
	 * for a slice. Such workers of equal weights take turns. */
	CMX_BUSY_SHALLOW = 1,
};
#define CMX_SHARE_SHALLOW_NS (1000ull * 1000)

struct cmx_ctl_busy {
	struct cmx_ctl_hdr h;
	uint32_t flags;
	uint32_t pad;
};

struct cmx_ctl_turned {
	struct cmx_ctl_hdr h; /* seq: the turn's */
	uint32_t has_work;    /* launches are held, or came within the last ms */
	uint32_t flags;	      /* CMX_BUSY_* */
};

/* READY's flags: what the front end's arbiter needs to know of the driver. */
enum {
	CMX_READY_SLICES = 1, /* struct cmx_server's slices_contexts */
};

struct cmx_ctl_ready {
	struct cmx_ctl_hdr h;
	uint32_t flags;
	uint32_t pad;
};

struct cmx_ctl_poisoned {
	struct cmx_ctl_hdr h;
	char why[128];
};

struct cmx_ctl_migrated {
	struct cmx_ctl_hdr h;
	int32_t err; /* 0 or -errno */
	uint32_t sessions;
	uint64_t bytes, ns;
	char why[128];
};

struct cmx_ctl_restore {
	struct cmx_ctl_hdr h;
	uint64_t session; /* the file's */
	char name[128];	  /* a file of the state directory (CMX_STATE_NAME_MAX) */
};

#define CMX_CTL_MAX sizeof(struct cmx_ctl_conn)

/* Sends one packet (and fd, if >= 0); 0 or -errno. Never blocks when
 * nonblock is set (-EAGAIN then). */
int cmx_ctl_send(int sock, const void *msg, size_t len, int fd, int nonblock);
/* Receives one packet into buf (CMX_CTL_MAX bytes): its length, or 0 at
 * hang-up, or -errno; *fd gets a passed descriptor or -1 (extra ones are
 * closed). A packet shorter than its header or than it says is -EBADMSG. */
long cmx_ctl_recv(int sock, void *buf, int *fd);

/* The usage of t into u, and back. */
void cmx_ctl_usage_pack(const struct cmx_tenant *t, struct cmx_ctl_usage *u);
void cmx_ctl_usage_unpack(struct cmx_tenant *t, const struct cmx_ctl_usage *u);

#endif
