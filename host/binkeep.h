// SPDX-License-Identifier: MIT
// Binaries kept while sessions are restored: a restore's build from
// source leaves its binary here, and the next restored session of the
// same tenant with the same build loads it instead of compiling again.
// What is kept for a tenant is charged to its mem quota while it stays.
#ifndef CMX_HOST_BINKEEP_H
#define CMX_HOST_BINKEEP_H

#include <CL/cl.h>
#include <stdint.h>

struct cmx_tenants;

/* A program of ctx for dev loaded from the binary of the same build of
 * tenant's (src with opts, the options as given to the driver) and built
 * with opts: one kept, or one another restore's build is making (waited
 * for). NULL when there is none or it did not build: the caller compiles
 * from source, and when *mine is set, others wait for its build, which
 * it ends with cmx_binkeep_put(). room: the bytes all that is kept for
 * tenant may come to, its mem quota less what else it holds, taken on the
 * loop at the call (CMX_UNLIMITED: no quota); a build past it is not
 * kept. Executor threads. */
cl_program cmx_binkeep_build(const char *tenant, uint64_t room, cl_context ctx, cl_device_id dev,
			     const char *opts, const char *src, int *mine);
/* The end of the build that cmx_binkeep_build() gave the caller: built
 * (its binary is kept, if it stays within room) or NULL (it failed; those
 * waiting compile themselves). */
void cmx_binkeep_put(const char *tenant, uint64_t room, cl_device_id dev, const char *opts,
		     const char *src, cl_program built);
/* The bytes kept for tenant now (sources, options and binaries). */
uint64_t cmx_binkeep_held(const char *tenant);
/*
 * Brings each tenant's charge for what is kept up to date: its `kept`,
 * and its `bytes` (mem quota) by the difference. Executor threads keep
 * and drop entries under the module's lock, while a tenant's usage is
 * the loop's alone; so the loop charges, after each restore's build and
 * after clearing. On the loop.
 */
void cmx_binkeep_charge(struct cmx_tenants *ts);
/* Forgets every binary: no restore is running. */
void cmx_binkeep_clear(void);

#endif
