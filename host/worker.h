// SPDX-License-Identifier: MIT
// A worker process's side of the control channel (host/ctl.h): the
// connections the front end hands over, quota changes, evictions, reports.
#ifndef CMX_HOST_WORKER_H
#define CMX_HOST_WORKER_H

#include <stdint.h>

struct cmx_server;
struct cmx_tenant;

/* Starts taking packets from the front end on ctl (a thread that posts
 * them to the loop), registers the reports to it (srv->report) and says
 * ready. key: the worker's name (host/front.c), for log lines and the
 * tenants it reports. retire: on the loop, once the driver's state is lost,
 * given srv, stops accepting and ends the process once its last session
 * has (host/main.c). 0 or -errno. */
int cmx_worker_start(struct cmx_server *srv, int ctl, const char *key,
		     void (*retire)(struct cmx_server *srv));
/* Before the loop is destroyed: the reader ends (the control socket is shut
 * down). */
void cmx_worker_stop(void);
/* Whether this process is a worker. */
int cmx_worker_is(void);
/* Whether this process serves tenant t's sessions (always, without a
 * front end). */
int cmx_worker_serves(const struct cmx_tenant *t);

#endif
