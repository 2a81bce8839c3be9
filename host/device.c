// SPDX-License-Identifier: MIT
// Picks the physical device clmuxd serves: the first GPU, else the first
// device of any platform that is not clmux itself.
#include <CL/cl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "addr.h"
#include "log.h"
#include "server.h"

struct candidate {
	cl_platform_id platform;
	cl_device_id device;
	cl_device_type type;
	char pname[128], dname[128];
};

static int list_devices(struct candidate *out, int max)
{
	cl_platform_id plats[16];
	cl_uint np = 0;
	int n = 0;

	if (clGetPlatformIDs(16, plats, &np) != CL_SUCCESS)
		return 0;
	for (cl_uint p = 0; p < np && p < 16; p++) {
		char name[128] = "";
		cl_device_id devs[16];
		cl_uint nd = 0;

		clGetPlatformInfo(plats[p], CL_PLATFORM_NAME, sizeof(name), name, NULL);
		if (strstr(name, "clmux"))
			continue; /* never serve ourselves */
		if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 16, devs, &nd) != CL_SUCCESS)
			continue;
		for (cl_uint d = 0; d < nd && d < 16 && n < max; d++) {
			struct candidate *c = &out[n++];
			c->platform = plats[p];
			c->device = devs[d];
			snprintf(c->pname, sizeof(c->pname), "%s", name);
			clGetDeviceInfo(devs[d], CL_DEVICE_TYPE, sizeof(c->type), &c->type, NULL);
			clGetDeviceInfo(devs[d], CL_DEVICE_NAME, sizeof(c->dname), c->dname, NULL);
		}
	}
	return n;
}

/*
 * spec: NULL (first GPU, else first device), "gpu", "cpu", an index N into
 * the list of all devices, or "PLATFORM[:N]" where PLATFORM is a
 * case-insensitive substring of the platform's name (e.g. "nvidia", "pocl").
 */

int cmx_device_open(struct cmx_server *srv, const char *spec)
{
	struct candidate all[64];
	int n = list_devices(all, 64), pick = -1;
	char ver[512] = "";
	int major = 1, minor = 0;

	if (!n) {
		cmx_err("no OpenCL device found (is an ICD such as pocl-opencl-icd installed?)");
		return -ENODEV;
	}
	if (!spec || !strcasecmp(spec, "gpu") || !strcasecmp(spec, "cpu")) {
		cl_device_type want = spec && !strcasecmp(spec, "cpu") ? CL_DEVICE_TYPE_CPU
								       : CL_DEVICE_TYPE_GPU;
		for (int i = 0; i < n && pick < 0; i++)
			if (all[i].type & want)
				pick = i;
		if (pick < 0 && !spec)
			pick = 0;
	} else {
		char *end;
		long idx = strtol(spec, &end, 10);
		if (*spec && !*end) {
			pick = idx >= 0 && idx < n ? (int)idx : -1;
		} else {
			char name[128];
			const char *colon = strchr(spec, ':');
			uint64_t k = 0;
			snprintf(name, sizeof(name), "%.*s", colon ? (int)(colon - spec) : (int)strlen(spec), spec);
			/* PLATFORM:N with N no number matches no device. */
			if (colon && cmx_uint_parse(colon + 1, 0, (uint64_t)n, &k))
				k = (uint64_t)n;
			for (int i = 0; i < n && pick < 0; i++) {
				char lower[128];
				size_t j;
				for (j = 0; all[i].pname[j] && j < sizeof(lower) - 1; j++)
					lower[j] = (char)(all[i].pname[j] | 0x20);
				lower[j] = 0;
				for (j = 0; name[j]; j++)
					name[j] = (char)(name[j] | 0x20);
				if (strstr(lower, name) && k-- == 0)
					pick = i;
			}
		}
	}
	if (pick < 0) {
		cmx_err("no OpenCL device matches --device '%s'; devices:", spec ? spec : "");
		for (int i = 0; i < n; i++)
			cmx_err("  %d: %s / %s", i, all[i].pname, all[i].dname);
		return -ENODEV;
	}
	srv->platform = all[pick].platform;
	srv->devices[0] = all[pick].device;
	srv->ndevices = 1;
	clGetPlatformInfo(srv->platform, CL_PLATFORM_VERSION, sizeof(ver), ver, NULL);
	if (sscanf(ver, "OpenCL %d.%d", &major, &minor) != 2)
		major = 1, minor = 2;
	srv->platform_version = (cl_uint)(major * 100 + minor);
	/* Oclgrind runs the whole queue inside clFlush (and only there or in
	 * a wait): on the loop that would hold every session for as long as
	 * its kernels take. */
	srv->flush_runs = strstr(all[pick].pname, "Oclgrind") != NULL;
	srv->submits_at_enqueue = strstr(all[pick].pname, "NVIDIA") != NULL;
	srv->printf_trails = srv->submits_at_enqueue;
	srv->slices_contexts = srv->submits_at_enqueue;
	srv->short_blocking = !(all[pick].type & CL_DEVICE_TYPE_CPU) && !srv->flush_runs;
	if (srv->tune.short_blocking != CMX_TUNE_AUTO)
		srv->short_blocking = srv->tune.short_blocking && !srv->flush_runs;
	/*
	 * Where the driver time-slices contexts, a client that keeps a few
	 * commands in flight must refill its queue before it runs dry, or the
	 * device goes to another context for a whole slice (about 2 ms on
	 * NVIDIA). Beside a kernel that never ends, a refill through a round
	 * trip came after the slice and kept 0.06 of its rate where a native
	 * process, spinning in its wait, kept 0.46. So on such a device the
	 * loop, and the guest on its fence, keep looking longer than a slice.
	 * A CPU device's cores are its compute units: spinning there takes
	 * them from the kernels.
	 */
	srv->fence_linger_ns = 50000;
	if (srv->tune.fence_linger_us != CMX_TUNE_AUTO)
		srv->fence_linger_ns = (uint64_t)srv->tune.fence_linger_us * 1000;
	else if (!(all[pick].type & CL_DEVICE_TYPE_CPU) && sysconf(_SC_NPROCESSORS_ONLN) >= 8)
		srv->fence_linger_ns = 5000000;
	cmx_info("serving %s / %s (%s)", all[pick].pname, all[pick].dname, ver);
	return 0;
}
