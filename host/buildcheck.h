// SPDX-License-Identifier: MIT
// Pre-flight builds: a tenant's source built first in a child process under
// its build-mem and build-time limits, so a compile bomb kills the child,
// never the worker.
#ifndef CMX_HOST_BUILDCHECK_H
#define CMX_HOST_BUILDCHECK_H

#include <stddef.h>
#include <stdint.h>

/* One build's limits, taken from the tenant's quotas on the loop (the
 * executor thread that builds never reads the tenant). */
struct cmx_build_limits {
	const void *tenant; /* whose `builds` slots it takes */
	uint64_t mem;	    /* RLIMIT_DATA bytes; CMX_UNLIMITED none */
	uint64_t secs;	    /* RLIMIT_CPU seconds; CMX_UNLIMITED none */
	uint64_t builds;    /* pre-flight children of this tenant at once */
};

/* What a pre-flight needs to compile it again: the source and, for a
 * compile, its embedded headers. */
struct cmx_build_src {
	int compile; /* clCompileProgram rather than clBuildProgram */
	const char *source;
	const char *options;
	size_t nheaders;
	const char *const *hnames, *const *hsources;
};

/* The worker's --device, which the child opens as the worker did, the
 * binary to run, and the sandbox mode the child filters itself in. Once,
 * before any build. */
void cmx_buildcheck_init(const char *device_spec, int sandbox_mode);

/* Whether limits ask for a pre-flight (build-mem or build-time set). */
int cmx_buildcheck_wanted(const struct cmx_build_limits *l);

/*
 * Runs the build in a child (`clmuxd --build-check`) under the limits;
 * blocks (an executor thread) while the tenant has `builds` children
 * already. 0: the native build may run (the child built, or failed as a
 * compiler fails); 1: a limit stopped it, with the log line in why; -errno
 * when no child could run (the native build goes on, as without limits).
 */
int cmx_buildcheck_run(const struct cmx_build_limits *l, const struct cmx_build_src *b, char *why,
		       size_t whylen);

/* The child's main: reads the build from fd 0, sets the limits, builds,
 * writes the cl_int result to fd 1. */
int cmx_buildcheck_main(void);

#endif
