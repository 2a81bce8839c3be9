// SPDX-License-Identifier: MIT
// Binaries kept while sessions are restored: a restore's build from
// source leaves its binary here, and the next restored session of the
// same tenant with the same build loads it instead of compiling again.
#ifndef CMX_HOST_BINKEEP_H
#define CMX_HOST_BINKEEP_H

#include <CL/cl.h>

/* A program of ctx for dev loaded from the binary of the same build of
 * tenant's (src with opts, the options as given to the driver) and built
 * with opts: one kept, or one another restore's build is making (waited
 * for). NULL when there is none or it did not build: the caller compiles
 * from source, and when *mine is set, others wait for its build, which
 * it ends with cmx_binkeep_put(). Executor threads. */
cl_program cmx_binkeep_build(const char *tenant, cl_context ctx, cl_device_id dev, const char *opts,
			     const char *src, int *mine);
/* The end of the build that cmx_binkeep_build() gave the caller: built
 * (its binary is kept) or NULL (it failed; those waiting compile
 * themselves). */
void cmx_binkeep_put(const char *tenant, cl_device_id dev, const char *opts, const char *src,
		     cl_program built);
/* Forgets every binary: no restore is running. */
void cmx_binkeep_clear(void);

#endif
