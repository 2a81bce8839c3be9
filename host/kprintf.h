// SPDX-License-Identifier: MIT
// Kernel printf: the driver's output captured from the daemon's stdout and
// sent to the session whose kernel printed it.
#ifndef CMX_HOST_KPRINTF_H
#define CMX_HOST_KPRINTF_H

#include <CL/cl.h>
#include <stdint.h>

#include "loop.h"
#include "proto.gen.h"

struct cmx_server;

struct cmx_call;
struct cmx_session;

/* Points fd 1 at a pipe the loop reads; what arrives while no printing
 * kernel runs goes on to the daemon's original stdout. 0 or -errno (then
 * output stays where it was and printing launches still work). */
int cmx_kprintf_init(struct cmx_server *srv);
/* Passes what is left in the pipe on, and gives fd 1 back. */
void cmx_kprintf_fini(void);

/* Whether the session's kernel id may print (the daemon's own judgement,
 * whatever the guest sent). */
int cmx_kprintf_kernel(struct cmx_session *s, uint64_t kernel_id);
/* Marks program id as printing when the bytes may print. Loop thread. */
void cmx_kprintf_program(struct cmx_session *s, uint64_t program_id, const void *p, size_t n);

/*
 * Enqueues a printing kernel: it runs when no other printing kernel of any
 * session does (a gate user event in its wait list), so that what the pipe
 * holds when it completes is its output alone, which goes to the session as
 * KernelOutput(tag). Binds the guest's event. Returns the enqueue's status;
 * on failure nothing is sent (cmx_call_done() sends the failure).
 */
int cmx_kprintf_enqueue(struct cmx_call *c, const struct cmx_EnqueueKernel_in *in, cl_uint dim,
			const size_t *off, const size_t *gl, const size_t *lo, uint64_t tag);

#endif
