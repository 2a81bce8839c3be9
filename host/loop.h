// SPDX-License-Identifier: MIT
// The daemon's one io_uring loop, and the way other threads post work to it.
#ifndef CMX_HOST_LOOP_H
#define CMX_HOST_LOOP_H

#include <liburing.h>
#include <stdint.h>

struct cmx_loop;

/* Every submission carries a cmx_io; its callback runs on the loop with the
 * completion's result and flags. */
struct cmx_io {
	void (*cb)(struct cmx_io *io, int res, unsigned flags);
};

/* Made on the thread that will run it; coop: with io_uring's
 * COOP_TASKRUN where the kernel has it (the uring-coop key). */
int cmx_loop_create(struct cmx_loop **out, int coop);
void cmx_loop_destroy(struct cmx_loop *l);

/* A free submission slot bound to io (submitted at the next turn). */
struct io_uring_sqe *cmx_loop_sqe(struct cmx_loop *l, struct cmx_io *io);

/* Runs until cmx_loop_stop(); 0 or -errno. */
int cmx_loop_run(struct cmx_loop *l);
void cmx_loop_stop(struct cmx_loop *l);

/* Whether work waits for the loop (completions, posts): a spinning handler
 * stops then. Loop thread. */
int cmx_loop_busy(struct cmx_loop *l);
/* Whether completed I/O (another connection's bytes, say) waits for the
 * loop; posts from other threads not counted. Loop thread. */
int cmx_loop_io_ready(struct cmx_loop *l);

/* Before it next sleeps, the loop looks for completions for ns more (a
 * reply's guest usually calls again within microseconds, and waking the
 * loop costs more than that). Loop thread. */
void cmx_loop_linger(struct cmx_loop *l, uint64_t ns);
/* The loop looks for completions, calling fn(arg) between its looks,
 * for ns more or until fn returns 0 (it has nothing left to look for),
 * whichever comes first (the completion fences of host/fence.c, the
 * scheduler's completion polls); up to CMX_LINGER_FNS functions at once.
 * Loop thread. */
#define CMX_LINGER_FNS 4
void cmx_loop_linger_with(struct cmx_loop *l, uint64_t ns, int (*fn)(void *arg), void *arg);

/* When the loop last woke with completions (CLOCK_MONOTONIC ns): the
 * arrival of the calls it is handling now, for the watch's breakdown
 * (cmx_watch_report()). Loop thread. */
uint64_t cmx_loop_turn_ns(const struct cmx_loop *l);
/* A handler that finds new calls while it spins (the shm rings) marks
 * their arrival. Loop thread. */
void cmx_loop_turn_mark(struct cmx_loop *l);

/* The last CMX_LAT_N samples of one duration, for a median in the log at
 * exit (the breakdown of a blocking call's time in the daemon). */
#define CMX_LAT_N 4096
struct cmx_lat {
	uint32_t ns[CMX_LAT_N];
	unsigned n;
};
void cmx_lat_add(struct cmx_lat *t, uint64_t ns);
/* Sorts the samples: at exit only. */
double cmx_lat_median_us(struct cmx_lat *t);
/* Every sample of one duration, in powers of two of a microsecond: for
 * a percentile over a whole run, within a factor of two. */
#define CMX_HIST_N 24
struct cmx_hist {
	uint64_t b[CMX_HIST_N], n;
};
void cmx_hist_add(struct cmx_hist *h, uint64_t ns);
/* The upper bound, in us, of the bucket that holds the quantile of pm
 * per mille. */
unsigned cmx_hist_quantile_us(const struct cmx_hist *h, unsigned pm);

/* Logs (info) how the loop's lingers after sync replies on sockets ended,
 * and how often it slept. */
void cmx_loop_report(struct cmx_loop *l);

/* Thread-safe: runs fn(arg) on the loop thread soon. Used by executor
 * threads and native OpenCL callbacks. */
void cmx_loop_post(struct cmx_loop *l, void (*fn)(void *arg), void *arg);
/* The same, and on the loop's thread behind whatever other threads posted
 * that has not run yet: a driver's callback that runs inside a
 * registration on the loop's thread keeps its place behind those its
 * threads ran before. */
void cmx_loop_post_shared(struct cmx_loop *l, void (*fn)(void *arg), void *arg);

#endif
