// SPDX-License-Identifier: MIT
// The loader's view of the ICD: the dispatch table every object points to
// and the extension functions found by name.
#include <CL/cl_ext.h>
#include <string.h>

#include "entry.h"
#include "icd.h"
#include "program.h"

#define CMX_EXPORT __attribute__((visibility("default")))

/* ---- extensions ------------------------------------------------------ */

/* clmux's own extension: the session's transport counters, for tools and
 * tests that prove calls are batched (docs/protocol.md). */
struct cmx_stats_clmux {
	cl_ulong messages, round_trips, writes, bytes, notifications;
	cl_ulong fences; /* 1: the daemon says which commands completed in shared memory */
};

static cl_int CL_API_CALL clGetSessionStatsCLMUX(cl_platform_id p, struct cmx_stats_clmux *out)
{
	struct cmx_session_stats st;

	if (p != &cmx_icd.platform || !out)
		return CL_INVALID_VALUE;
	if (cmx_icd_init())
		return CL_INVALID_PLATFORM;
	cmx_session_get_stats(cmx_icd.s, &st);
	out->messages = st.messages;
	out->round_trips = st.round_trips;
	out->writes = st.writes;
	out->bytes = st.bytes;
	out->notifications = st.notifications;
	out->fences = (cl_ulong)cmx_session_has_fences(cmx_icd.s);
	return CL_SUCCESS;
}

/* Called by name inside the library too: an application's loader exports
 * clGetExtensionFunctionAddress as well, and a call through the symbol
 * would reach the loader's (which finds a KHR function in no platform). */
static void *extension_function(const char *name)
{
	if (!name)
		return NULL;
	if (!strcmp(name, "clIcdGetPlatformIDsKHR"))
		return (void *)clIcdGetPlatformIDsKHR;
	if (!strcmp(name, "clGetSessionStatsCLMUX"))
		return (void *)clGetSessionStatsCLMUX;
	return cmx_cmdbuf_function(name);
}

CMX_EXPORT void *clGetExtensionFunctionAddress(const char *name)
{
	return extension_function(name);
}

void *cmx_clGetExtensionFunctionAddressForPlatform(cl_platform_id p, const char *name)
{
	return p == &cmx_icd.platform ? extension_function(name) : NULL;
}

/* ---- the dispatch table ---------------------------------------------- */

#define CMX_SLOT(name) .name = cmx_##name,
const struct _cl_icd_dispatch cmx_dispatch = {
	CMX_ENTRIES(CMX_SLOT)
	.clGetExtensionFunctionAddress = clGetExtensionFunctionAddress,
};

/* Before any entry point can run: the objects below take the table from
 * the platform, so that none of them names this file, which names them
 * all. */
__attribute__((constructor)) static void dispatch_register(void)
{
	cmx_icd.platform.dispatch = &cmx_dispatch;
}
