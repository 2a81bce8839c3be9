// SPDX-License-Identifier: MIT
// The daemon's shared state: loop, device, executor, sessions.
#ifndef CMX_HOST_SERVER_H
#define CMX_HOST_SERVER_H

#include <CL/cl.h>
#include <stdint.h>

#include "loop.h"
#include "tenant.h"
#include "tuning.h"

struct cmx_admin;
struct cmx_vhost;
struct cmx_ivshmem;
struct cmx_session;
struct cmx_executor;
struct cmx_listener;

#define CMX_MAX_DEVICES 16

struct cmx_server {
	struct cmx_loop *loop;
	struct cmx_executor *exec;
	cl_platform_id platform;
	cl_device_id devices[CMX_MAX_DEVICES];
	unsigned ndevices;
	cl_uint platform_version; /* major * 100 + minor */

	struct cmx_session *sessions;
	uint64_t next_session;
	uint64_t nsessions;
	int draining;
	/* This process is the front end (host/front.c): it never calls OpenCL;
	 * connections go to worker processes at Hello. */
	int front;
	/* A group sharing one native context (host/front.c): every guest
	 * context of one device is shared_ctx, and launches go straight to the
	 * driver, which runs the queues of one context concurrently. */
	int shared_context;
	cl_context shared_ctx;

	/* Daemon-wide counters (clmuxctl stats, tests). */
	uint64_t objects, bytes;

	/* Tenants (host/tenant.c), and the file their quotas are saved to
	 * (NULL: none, quota changes live only in memory). */
	struct cmx_tenants tenants;
	const char *config_path;
	/* The knobs this process runs with: the file's [clmuxd] keys, then
	 * the environment's overrides (host/tuning.h). */
	struct cmx_tuning tune;
	/* Native queues profile, for the scheduler's device time: only where
	 * several tenants can share the device (NVIDIA: enqueue rate 0.47 of
	 * native with every queue profiling, 0.76 without). */
	int profile;
	/* The driver runs its queue inside clFlush (Oclgrind): the loop never
	 * flushes (cmx_queue_flush()); waits on executors drive the queue. */
	int flush_runs;
	/* The driver submits a command when it is enqueued (NVIDIA: no kernel
	 * was seen left unstarted without a flush, docs/gpu.md), and its
	 * clFlush costs 1.8 us even on an empty queue, about a tenth of a
	 * short blocking call: a wait skips it (cmx_queue_flush_to_wait()).
	 * What a driver did keep back still starts: a watch that sees no
	 * completion hands the wait to an executor, and clWaitForEvents
	 * flushes. */
	int submits_at_enqueue;
	/* The driver time-slices the contexts of processes and gives the
	 * device to another the moment a context's queue runs dry (NVIDIA):
	 * workers side by side then lose the device between a completion and
	 * the next launch, which through clmux takes a round trip, so busy
	 * workers take turns even at equal weights (host/front.c). */
	int slices_contexts;
	/* The driver's blocking transfers are short (a GPU: NVIDIA's blocking
	 * 64 B write spins ~7 us): a small blocking transfer on an idle
	 * in-order queue runs blocking on the loop instead of being enqueued
	 * and watched (cmx_exec_block_short()). Off on a CPU device, whose
	 * blocking calls wake a waiting thread (PoCL); the short-blocking
	 * key overrides. */
	int short_blocking;
	/* The driver may still be writing a kernel's printf output when its
	 * completion is seen (NVIDIA: a line cut in two was seen, its rest
	 * written after the callback and after a status poll saw it complete):
	 * host/kprintf.c reads until the pipe stays quiet for a moment. */
	int printf_trails;
	uint64_t started_ns;
	struct cmx_sched *sched;
	/* The --listen addresses (host/main.c), for the admin's listeners
	 * request: clmuxctl cdi generate makes a container device of each
	 * tenant's unix socket. */
	const struct cmx_listener *listeners;
	unsigned nlisteners;
	/* The admin socket and metrics endpoint (host/admin.c); NULL in a
	 * worker. */
	struct cmx_admin *admin;
	/* The vhost-user-vsock sockets (host/vhost.c); NULL without any. */
	struct cmx_vhost *vhost;
	/* The ivshmem regions (host/ivshmem.c); NULL without any. */
	struct cmx_ivshmem *ivshmem;
};

extern struct cmx_server *cmx_srv;

/* Device selection (host/device.c): 0 or -errno, with a line logged. */
int cmx_device_open(struct cmx_server *srv, const char *spec);

#endif
