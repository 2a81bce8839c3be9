// SPDX-License-Identifier: MIT
// The daemon's tuning knobs: [clmuxd] keys, read and range-checked once at start.
#ifndef CMX_HOST_TUNING_H
#define CMX_HOST_TUNING_H

#include <stddef.h>
#include <stdint.h>

/* A knob's value where the daemon decides (by device or core count). */
#define CMX_TUNE_AUTO (-1)

/*
 * Each knob is a [clmuxd] key of clmuxd.conf (docs/clmuxd.8); its
 * CLMUX_* environment variable, where tests and docs/gpu.md's A/B runs set
 * one, overrides the file. Switches are 0 or 1, CMX_TUNE_AUTO where the
 * daemon decides.
 */
struct cmx_tuning {
	/* Small blocking transfers run blocking on the loop (host/defer.c);
	 * auto: on for a non-CPU device. */
	int64_t short_blocking;
	/* How long the shm loop keeps looking after a sync call, in us
	 * (host/shm.c); auto: 50 with 8 or more cores, else 0. */
	int64_t shm_sync_spin_us;
	/* Pinned staging and its copy threads (host/pinned.c); auto: on for a
	 * non-CPU device. */
	int64_t pinned;
	/* The smallest transfer that takes the pinned path, in bytes. */
	int64_t pinned_min;
	/* The scheduler reports a completed lane without a callback
	 * (host/scheduler.c). */
	int64_t sched_peek;
	/* io_uring's COOP_TASKRUN (host/loop.c). */
	int64_t uring_coop;
	/* Seconds a peer over its output cap may read nothing before its
	 * session ends (host/conn.c). */
	int64_t unread_s;
	/* How long the loop looks for the completion of a session's running
	 * commands after its last launch (host/fence.c), in us; auto: 5000
	 * for a non-CPU device with 8 or more cores, else 50. */
	int64_t fence_linger_us;
	/* How long the loop watches a blocking call's event before an
	 * executor thread waits for it, in us (host/defer.c). */
	int64_t watch_us;
	/* The longest sleep between the scheduler's looks at the newest
	 * command of each runlist while tenants contend, in us
	 * (host/scheduler.c). */
	int64_t sched_poll_max_us;
	/* Busy workers of equal weights take turns on the device (host/front.c's
	 * arbiter); auto: where the driver time-slices contexts. */
	int64_t equal_turns;
};

/* Every knob at its default. */
void cmx_tuning_defaults(struct cmx_tuning *t);
/* One [clmuxd] key: 1 when key is a knob and value fits it, 0 when key is
 * no knob, -EINVAL with a reason in why when the value does not fit. */
int cmx_tuning_set(struct cmx_tuning *t, const char *key, const char *value, char *why,
		   size_t whylen);
/* The CLMUX_* overrides of the environment: 0, or -EINVAL with the
 * variable and the reason in why. */
int cmx_tuning_env(struct cmx_tuning *t, char *why, size_t whylen);

#endif
