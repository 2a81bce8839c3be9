// SPDX-License-Identifier: MIT
// The worker's sandbox: a seccomp allowlist of the system calls the daemon
// and the vendor driver need, and the worker's own rlimits.
#ifndef CMX_HOST_SANDBOX_H
#define CMX_HOST_SANDBOX_H

#include <stddef.h>
#include <stdio.h>

enum cmx_sandbox_mode {
	CMX_SANDBOX_OFF,
	CMX_SANDBOX_ON,	 /* a call outside the list ends the process */
	CMX_SANDBOX_LOG, /* a call outside the list runs, logged by the kernel */
};

/* Whose filter: a worker's, or a build pre-flight child's (no sockets to
 * accept on, no io_uring, no children of its own but the linker). */
enum cmx_sandbox_who {
	CMX_SANDBOX_WORKER,
	CMX_SANDBOX_BUILD,
};

/* "on", "off", "log": the mode, or -EINVAL. */
int cmx_sandbox_parse(const char *s);
const char *cmx_sandbox_name(int mode);

/*
 * Enters the sandbox, for every thread of this process: no_new_privs, the
 * seccomp filter of `who` in `mode` (OFF: none), and the rlimits (always:
 * no core files). `name` prefixes the line a refused call logs. 0, or
 * -errno with a reason in err; the caller ends rather than serve
 * unfiltered when the mode asked for a filter.
 */
int cmx_sandbox_enter(int mode, int who, const char *name, unsigned nofile, char *err,
		      size_t errlen);

/* The allowed system calls' names, one a line (clmuxd --sandbox-list):
 * what tools/seccomp-trace.py compares a trace with. */
void cmx_sandbox_list(FILE *f, int who);

/* Descriptors a worker may hold: its loop, driver and executors, and a
 * session's sockets, area and lanes for each of `sessions`. */
unsigned cmx_sandbox_nofile(unsigned long long sessions);

#endif
