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
};

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

struct cmx_ctl_poisoned {
	struct cmx_ctl_hdr h;
	char why[128];
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
