// SPDX-License-Identifier: MIT
// Handler: the device's timer read with the host's, which the guest
// calibrates its own clock against (guest/timer.c).
#include "exec.h"

int cmx_h_GetDeviceAndHostTimer(struct cmx_call *c, struct cmx_GetDeviceAndHostTimer_in *in,
				struct cmx_GetDeviceAndHostTimer_out *out)
{
	cl_ulong dev = 0, host = 0;
	cl_int e = clGetDeviceAndHostTimer(in->device.h, &dev, &host);

	(void)c;
	if (e)
		return e;
	out->device_ts = dev;
	out->host_ts = host;
	return CL_SUCCESS;
}
