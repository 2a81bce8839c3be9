// SPDX-License-Identifier: MIT
// Programs, kernels and command buffers (guest/include.c, program.c,
// kernel.c, cmdbuf.c): what the files around them use.
#ifndef CMX_GUEST_PROGRAM_H
#define CMX_GUEST_PROGRAM_H

#include <CL/cl.h>

/* The checks of clEnqueueNDRangeKernel before its wait list (guest/kernel.c). */
cl_int cmx_kernel_launch_check(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *offset,
			       const size_t *global, const size_t *local);
/* cl_khr_command_buffer's entry points by name, or NULL (guest/cmdbuf.c). */
void *cmx_cmdbuf_function(const char *name);
/* Build options as the daemon gets them (guest/include.c): each -I DIR
 * names a directory whose headers were just sent for p. *wire: malloc'd. */
cl_int cmx_include_prepare(cl_program p, const char *opts, char **wire);

/* Whether d is one of p's devices (guest/program.c). */
int cmx_program_has_device(cl_program p, cl_device_id d);

#endif
