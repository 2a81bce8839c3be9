// SPDX-License-Identifier: MIT
// The daemon's shared state: loop, device, executor, sessions.
#ifndef CMX_HOST_SERVER_H
#define CMX_HOST_SERVER_H

#include <CL/cl.h>
#include <pthread.h>
#include <stdint.h>

#include "checkpoint.h"
#include "loop.h"
#include "migrate.h"
#include "pending.h"
#include "restore.h"
#include "staging.h"
#include "tenant.h"
#include "tuning.h"

struct cmx_admin;
struct cmx_server;
struct cmx_vhost;
struct cmx_ivshmem;
struct cmx_session;
struct cmx_executor;
struct cmx_listener;
struct cmx_conn_ops;
struct cmx_obj;

#define CMX_MAX_DEVICES 16

/* The status poll of host/exec.c (cmx_exec_poll_start()): a loop timer and
 * the pollers it runs. Loop thread. */
#define CMX_POLL_FNS 4
struct cmx_exec_poll {
	struct cmx_io io;
	struct __kernel_timespec ts;
	uint64_t ns;
	int armed;
	int (*fn[CMX_POLL_FNS])(struct cmx_server *srv);
};

/* How host/defer.c's watches ended, for the log at exit
 * (cmx_watch_report()), and where a call that the watch saw complete spent
 * its time in the daemon: from the loop's wake-up to the wait (decode,
 * checks, the native enqueue), the watch, and the reply's queueing. Loop
 * thread. */
struct cmx_watch_stats {
	uint64_t done, done_ns, io, timeout;
	struct cmx_lat enq, seen, reply;
};

/* The completions the loop waits for (host/complete.c): a slot per
 * registered event. Loop thread. */
struct cmx_complete_slot;
struct cmx_completions {
	struct cmx_complete_slot **chunk; /* slots never move: drivers hold their address */
	uint32_t nchunk, n, free, live;
	struct cmx_io io;
	struct __kernel_timespec ts;
	unsigned ms;
	int armed, sweeping, again;
	/* Failed events resting before their release (cmx_complete_release()). */
	struct cmx_complete_rest *rest;
	size_t rest_n, rest_cap;
	struct cmx_io rest_io;
	struct __kernel_timespec rest_ts;
	int rest_armed;
};

struct cmx_cb_slot;

/* What a worker tells its front end (host/worker.c registers them at
 * cmx_worker_start(); srv->report is NULL in a process without a front
 * end). The handlers and the scheduler below it call through here. */
struct cmx_report_ops {
	/* Any thread. The driver's state is lost (a GPU fault: every context
	 * of this process is gone): the front end sends new sessions
	 * elsewhere; this process stops accepting and ends with its last
	 * session. Once. */
	void (*poisoned)(const char *why);
	/* Loop thread. A command of tenant's has outrun its kernel-time: asks
	 * the front end to end this process (OpenCL stops a running kernel
	 * only with the process that owns its context). 0 or -errno. */
	int (*overtime)(const char *tenant, const char *why);
	/* Loop thread. The arbiter between workers (host/ctl.h,
	 * CMX_CTL_SHARE): this worker has work (BUSY); its turn seq is over
	 * and drained (TURNED). */
	void (*busy)(unsigned flags);
	void (*turned)(uint64_t seq, int has_work, unsigned flags);
};

/* The programs a build or link is using (host/exec_program.c). Loop
 * thread. */
struct cmx_busy_program;
struct cmx_busy_programs {
	struct cmx_busy_program *v;
	size_t n, cap;
};

/* The completion fences' sessions to look at (host/fence.c). Loop thread. */
struct cmx_fences {
	struct cmx_session *listed; /* sessions with commands to look at */
	int posted;		    /* its turn_end() is posted */
	/* For the log at exit: fences stored, when the last was, and the
	 * last samples of a stored fence to the next launch's arrival (the
	 * guest's refill, transport included) and of that launch's time in
	 * the loop until the driver has it. */
	uint64_t stored, stored_ns, looked_ns;
	struct cmx_hist refill, launch, look;
};

struct cmx_server {
	struct cmx_loop *loop;
	struct cmx_executor *exec;
	cl_platform_id platform;
	cl_device_id devices[CMX_MAX_DEVICES];
	unsigned ndevices;
	cl_uint platform_version; /* major * 100 + minor */

	/* Where connections' messages go (host/conn.h). */
	const struct cmx_conn_ops *conn_ops;
	/* Releases an object its session's table no longer holds
	 * (cmx_session_release()): what releasing it reaches into lies above
	 * the handlers that release (host/release.c; registered by
	 * cmx_dispatch_attach()). */
	void (*release)(struct cmx_session *s, struct cmx_obj *o);
	/* A call of a restore ended (cmx_call_done()): the restore sends its
	 * next (host/restore.c; registered by cmx_restore_attach()). */
	void (*replayed)(struct cmx_session *s, int status);
	/* A restore's CreateBuffer or CreateImage asks whether the restore
	 * writes its every byte next (then it is made without its fill), and
	 * tells it the buffer or image so made (host/restore.c; registered
	 * as replayed is). */
	int (*restore_covers)(struct cmx_session *s, uint64_t id, uint64_t size);
	void (*restore_unfilled)(struct cmx_session *s, uint64_t id, void *mem);
	/* A resuming Hello asks for the restored session of tenant t with
	 * this id and token: NULL when there is none, *busy set when it is
	 * still being restored (host/restore.c; registered as replayed is;
	 * NULL where nothing restores: no session to resume). */
	struct cmx_session *(*restore_find)(struct cmx_server *srv, const struct cmx_tenant *t,
					    uint64_t id, uint64_t token, int *busy);
	/* Creation requests are kept for a checkpoint (host/record.c): set
	 * by cmx_record_keep() once there is a state directory. */
	int keep_records;
	/* The state directory, --state-dir (host/checkpoint.c). */
	struct cmx_state_dir state;
	/* Migrations being taken in (host/migrate.c). */
	struct cmx_migrate_in migrate_in;
	struct cmx_session *sessions;
	uint64_t next_session;
	uint64_t nsessions;
	int draining;
	/* This process is the front end (host/front.c): it never calls OpenCL;
	 * connections go to worker processes at Hello. */
	int front;
	/* With workers, the front end asks the worker serving t to restore
	 * state file name (host/migrate.c; cmx_front_restore(), registered by
	 * the front end): 0, or -errno. */
	int (*restore_in_worker)(struct cmx_tenant *t, const char *name, uint64_t session,
				 uint64_t seq);
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
	/* The tuning's fence-linger-us, decided (host/device.c). */
	uint64_t fence_linger_ns;
	/* The driver may still be writing a kernel's printf output when its
	 * completion is seen (NVIDIA: a line cut in two was seen, its rest
	 * written after the callback and after a status poll saw it complete):
	 * host/kprintf.c reads until the pipe stays quiet for a moment. */
	int printf_trails;
	uint64_t started_ns;
	struct cmx_sched *sched;
	/* The reports to the front end; NULL without one. */
	const struct cmx_report_ops *report;
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

	/* The handlers' shared machinery (host/exec.c): the status poll, the
	 * watches' figures (host/defer.c), and the lock around every executor call that
	 * drives a flush_runs driver's queue (cmx_exec_drive_lock()). */
	struct cmx_exec_poll poll;
	struct cmx_watch_stats watches;
	pthread_mutex_t drive_lock;
	/* Large payload buffers kept for the next transfer (host/staging.c). */
	struct cmx_staging staging;
	/* Connections not past Hello, per peer (host/pending.c). */
	struct cmx_pending_peers pending;
	/* Completions the loop waits for (host/complete.c). */
	struct cmx_completions complete;
	/* Sessions whose completion fences the loop looks at (host/fence.c). */
	struct cmx_fences fences;
	/* Programs being built or linked (host/exec_program.c). */
	struct cmx_busy_programs busy_programs;
	/* The restores from the state directory, and the end of the wait
	 * for guests to resume their sessions (host/restore.c). */
	struct cmx_restores restores;
	struct cmx_io resume_wait;
	struct __kernel_timespec resume_wait_ts;
	int resume_wait_armed;
	/* Slots whose event callbacks the status poll watches
	 * (host/exec_event.c, flush_runs only). */
	struct cmx_cb_slot *cb_watched;
};

/* Device selection (host/device.c): 0 or -errno, with a line logged. */
int cmx_device_open(struct cmx_server *srv, const char *spec);

#endif
