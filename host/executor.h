// SPDX-License-Identifier: MIT
// Threads that run the OpenCL calls that may block, off the loop.
#ifndef CMX_HOST_EXECUTOR_H
#define CMX_HOST_EXECUTOR_H

struct cmx_executor;
struct cmx_loop;

int cmx_executor_create(struct cmx_loop *loop, unsigned max_threads, struct cmx_executor **out);
/* Waits for every job, then stops the threads. */
void cmx_executor_destroy(struct cmx_executor *x);
/* Runs work(arg) on an executor thread, then done(arg) on the loop. A thread
 * is started when none is idle, up to the limit; jobs queue beyond it. */
void cmx_executor_run(struct cmx_executor *x, void (*work)(void *), void (*done)(void *), void *arg);
unsigned cmx_executor_busy(struct cmx_executor *x);

#endif
