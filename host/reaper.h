// SPDX-License-Identifier: MIT
// A background thread for slow releases (unmapping a large buffer, freeing
// a large native buffer) that the loop must not wait for.
#ifndef CMX_HOST_REAPER_H
#define CMX_HOST_REAPER_H

/* Buffers from this size up are released through the reaper. */
#define CMX_REAP_MIN (64ull << 20)

/* Runs fn(ctx, arg) soon on the reaper thread, in submission order; runs
 * it here when the thread cannot start or memory is short. Thread-safe. */
void cmx_reap(void (*fn)(void *ctx, void *arg), void *ctx, void *arg);
/* True while a job is queued or running (the daemon drains before exit). */
int cmx_reap_busy(void);

#endif
