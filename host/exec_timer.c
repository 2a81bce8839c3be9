// SPDX-License-Identifier: MIT
// Handler: the device's timer read with the host's, which the guest
// calibrates its own clock against (guest/timer.c).
#include "exec.h"

/* Whether the device's platform has a host timer: clGetDeviceAndHostTimer
 * is OpenCL 2.1's, and a 1.2 driver's dispatch table has no such entry
 * (Oclgrind's call through the loader never returned). A platform that
 * does not know CL_PLATFORM_HOST_TIMER_RESOLUTION, or answers 0, has none. */
static int has_timer(cl_device_id d)
{
	cl_platform_id p = NULL;
	cl_ulong res = 0;

	return !clGetDeviceInfo(d, CL_DEVICE_PLATFORM, sizeof(p), &p, NULL) && p &&
	       !clGetPlatformInfo(p, CL_PLATFORM_HOST_TIMER_RESOLUTION, sizeof(res), &res,
				  NULL) &&
	       res;
}

int cmx_h_GetDeviceAndHostTimer(struct cmx_call *c, struct cmx_GetDeviceAndHostTimer_in *in,
				struct cmx_GetDeviceAndHostTimer_out *out)
{
	cl_ulong dev = 0, host = 0;
	cl_int e;

	(void)c;
	if (!has_timer(in->device.h))
		return CL_INVALID_OPERATION;
	e = clGetDeviceAndHostTimer(in->device.h, &dev, &host);
	if (e)
		return e;
	out->device_ts = dev;
	out->host_ts = host;
	return CL_SUCCESS;
}
