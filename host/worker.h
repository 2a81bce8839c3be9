// SPDX-License-Identifier: MIT
// A worker process's side of the control channel (host/ctl.h): the
// connections the front end hands over, quota changes, evictions, reports.
#ifndef CMX_HOST_WORKER_H
#define CMX_HOST_WORKER_H

#include <stdint.h>

struct cmx_server;
struct cmx_tenant;

/* Starts taking packets from the front end on ctl (a thread that posts
 * them to the loop) and says ready. key: the worker's name (host/front.c),
 * for log lines and the tenants it reports. 0 or -errno. */
int cmx_worker_start(struct cmx_server *srv, int ctl, const char *key);
/* Before the loop is destroyed: the reader ends (the control socket is shut
 * down). */
void cmx_worker_stop(void);
/* Any thread. The driver's state is lost (a GPU fault: every context of this process
 * is gone): tells the front end, which sends new sessions elsewhere; this
 * process stops accepting and ends with its last session. Once. */
void cmx_worker_poisoned(const char *why);
/* Loop thread. A command of tenant's has outrun its kernel-time: asks the
 * front end to end this process (OpenCL stops a running kernel only with
 * the process that owns its context). 0, or -ENOTSUP without a front end
 * (clmuxd --workers off). */
int cmx_worker_overtime(const char *tenant, const char *why);
/* Loop thread. The arbiter between workers (host/ctl.h, CMX_CTL_SHARE):
 * this worker has work (BUSY); its turn seq is over and drained (TURNED).
 * Nothing without a front end. */
void cmx_worker_busy(void);
void cmx_worker_turned(uint64_t seq, int has_work);
/* Stops accepting and ends the process once its last session has
 * (host/main.c). */
void cmx_main_retire(void);
/* Whether this process is a worker. */
int cmx_worker_is(void);
/* Whether this process serves tenant t's sessions (always, without a
 * front end). */
int cmx_worker_serves(const struct cmx_tenant *t);

#endif
