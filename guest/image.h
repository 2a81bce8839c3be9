// SPDX-License-Identifier: MIT
// Images (guest/image.c): the checks and packed transfers that buffer
// memory, maps and command buffers share with it.
#ifndef CMX_GUEST_IMAGE_H
#define CMX_GUEST_IMAGE_H

#include <CL/cl.h>
#include <stdint.h>

#include "command.h"

/* The row and slice pitches of an image's host_ptr (defaults filled). */
void cmx_image_host_pitches(cl_mem m, size_t *row, size_t *slice);
/* Bytes per pixel of a format, 0 for a format the spec does not define. */
size_t cmx_image_elem_size(const cl_image_format *f);
/* An image command's checks: queue, image, context, device support. */
cl_int cmx_image_check(cl_command_queue q, cl_mem m);
/* origin + region inside m (CL_INVALID_VALUE otherwise). */
cl_int cmx_image_region_check(cl_mem m, const size_t *origin, const size_t *region);
/* The checks of clEnqueueCopyImage, clEnqueueFillImage (the color packed
 * into col) and the image <-> buffer copies (the image box, the buffer's
 * range from off), which command buffers' records make too. */
cl_int cmx_copy_image_check(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
			    const size_t *dor, const size_t *region);
cl_int cmx_fill_image_check(cl_command_queue q, cl_mem m, const void *color, const size_t *origin,
			    const size_t *region, unsigned char col[16]);
cl_int cmx_image_buffer_check(cl_command_queue q, cl_mem img, cl_mem buf, size_t off,
			      const size_t *origin, const size_t *region);
/* Reads a packed region into dst; non-blocking, finish(arg) runs when it
 * has landed. Writes packed data (which leaves with the command). */
cl_int cmx_image_read_packed(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t *origin,
			     const size_t *region, void *dst, struct cmx_cmd *c,
			     void (*finish)(struct cmx_pending_read *, int), void *arg);
cl_int cmx_image_write_packed(cl_command_queue q, cl_mem m, cl_bool blocking, const uint64_t o[3],
			      const uint64_t r[3], const void *data, size_t len, struct cmx_cmd *c);

#endif
