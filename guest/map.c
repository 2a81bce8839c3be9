// SPDX-License-Identifier: MIT
// Maps of buffers and images: guest memory filled by a read and written
// back on unmap, or the shared area's storage itself.
#include <stdlib.h>
#include <unistd.h>

#include "entry.h"
#include "icd.h"
#include "mem.h"

#define MAP_WRITES	  (CL_MAP_WRITE | CL_MAP_WRITE_INVALIDATE_REGION)


/* ---- maps: guest memory, filled by a read and written back on unmap ---- */


/* Makes mp, whose ptr holds the packed box, a map into host_ptr at origin
 * (the spec's rule for CL_MEM_USE_HOST_PTR images); a 1D array's images
 * are its rows. */
static void mapping_into_host(cl_mem m, struct cmx_mapping *mp, const size_t *o,
			      const size_t *r)
{
	size_t row, slice, elem = m->image->elem;
	int arr1d = m->type == CL_MEM_OBJECT_IMAGE1D_ARRAY;

	cmx_image_host_pitches(m, &row, &slice);
	mp->stage = mp->ptr;
	mp->owned = 0;
	mp->w = r[0] * elem;
	mp->rows = r[1];
	mp->slices = arr1d ? 1 : r[2];
	mp->hrow = arr1d ? slice : row;
	mp->hslice = slice;
	mp->ptr = (char *)m->host_ptr + o[0] * elem + (arr1d ? o[1] * slice : o[1] * row + o[2] * slice);
}

/* Known bits only; an invalidating map neither reads nor merges writes. */
static int map_flags_bad(cl_map_flags f)
{
	if (f & ~(cl_map_flags)(CL_MAP_READ | MAP_WRITES))
		return 1;
	return (f & CL_MAP_WRITE_INVALIDATE_REGION) && (f & (CL_MAP_READ | CL_MAP_WRITE));
}

/* The end of a map whose read (or marker) was sent with status e. */
static void *map_end(cl_command_queue q, cl_mem m, struct cmx_mapping *mp, struct cmx_cmd *c,
		     cl_int e, cl_bool blocking, cl_uint n, const cl_event *list,
		     cl_int *errcode_ret)
{
	e = cmx_cmd_end(c, e);
	if (e) {
		cmx_mapping_free(mp);
		return cmx_fail(errcode_ret, e);
	}
	cmx_mapping_link(m, mp);
	atomic_fetch_add(&m->map_count, 1);
	if (blocking)
		cmx_blocking_done(q, n, list);
	return cmx_succeed(errcode_ret, mp->ptr);
}

void *cmx_clEnqueueMapBuffer(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags,
			     size_t off, size_t size, cl_uint n, const cl_event *list,
			     cl_event *event, cl_int *errcode_ret)
{
	struct cmx_mapping *mp;
	struct cmx_cmd c;
	cl_int e = cmx_mem_check(q, m);

	if (!e && (map_flags_bad(flags) || !cmx_in_range(off, size, m->size)))
		e = CL_INVALID_VALUE;
	if (!e)
		e = cmx_mem_host_access(m, (flags & CL_MAP_READ) != 0, (flags & MAP_WRITES) != 0);
	if (e || (e = cmx_mapping_new(m, off, size, flags, &mp)))
		return cmx_fail(errcode_ret, e);
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_MAP_BUFFER);
	if (e) {
		cmx_mapping_free(mp);
		return cmx_fail(errcode_ret, e);
	}
	if (m->area_off) {
		/* The daemon maps natively: the bytes are where mp->ptr points. */
		e = cmx_mem_area_map(q, m, blocking, flags, off, size, &c);
	} else if (flags & CL_MAP_WRITE_INVALIDATE_REGION) {
		/* Nothing to read: a marker gives the event its place in order. */
		e = cmx_cmd_marker(q, &c);
	} else {
		mp->landing = !blocking; /* not shared yet: no lock needed */
		e = cmx_transfer_read(q, m, blocking, off, size, mp->ptr, &c, cmx_mapping_landed, mp);
	}
	return map_end(q, m, mp, &c, e, blocking, n, list, errcode_ret);
}

/* An image's map is its box packed in guest memory: rows of region[0]
 * pixels, slices (or a 1D array's images) of region[1] rows; that of a
 * CL_MEM_USE_HOST_PTR image is host_ptr itself, in its pitches. */
void *cmx_clEnqueueMapImage(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags,
			    const size_t *origin, const size_t *region, size_t *row_pitch,
			    size_t *slice_pitch, cl_uint n, const cl_event *list, cl_event *event,
			    cl_int *errcode_ret)
{
	struct cmx_mapping *mp;
	size_t row, slice = 0;
	struct cmx_cmd c;
	int slices;
	cl_int e = cmx_image_check(q, m);

	if (!e)
		e = cmx_image_region_check(m, origin, region);
	if (e)
		return cmx_fail(errcode_ret, e);
	slices = m->type == CL_MEM_OBJECT_IMAGE3D || m->type == CL_MEM_OBJECT_IMAGE2D_ARRAY ||
		 m->type == CL_MEM_OBJECT_IMAGE1D_ARRAY;
	if (map_flags_bad(flags) || !row_pitch || (slices && !slice_pitch))
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	e = cmx_mem_host_access(m, (flags & CL_MAP_READ) != 0, (flags & MAP_WRITES) != 0);
	/* The region was checked: its byte count does not overflow. */
	row = m->image->elem * region[0];
	if (e || (e = cmx_mapping_new(m, 0, row * region[1] * region[2], flags, &mp)))
		return cmx_fail(errcode_ret, e);
	for (int i = 0; i < 3; i++)
		mp->origin[i] = origin[i], mp->region[i] = region[i];
	if ((m->flags & CL_MEM_USE_HOST_PTR) && m->host_ptr)
		mapping_into_host(m, mp, origin, region);
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_MAP_IMAGE);
	if (e) {
		cmx_mapping_free(mp);
		return cmx_fail(errcode_ret, e);
	}
	if (flags & CL_MAP_WRITE_INVALIDATE_REGION) {
		e = cmx_cmd_marker(q, &c);
	} else {
		mp->landing = !blocking; /* not shared yet: no lock needed */
		e = cmx_image_read_packed(q, m, blocking, origin, region,
					  mp->stage ? mp->stage : mp->ptr, &c, cmx_mapping_landed, mp);
		if (!e && blocking)
			cmx_mapping_host_copy(mp, 0);
	}
	if (m->type == CL_MEM_OBJECT_IMAGE1D_ARRAY)
		slice = row;
	else if (slices)
		slice = row * region[1];
	if (mp->stage) {
		cmx_image_host_pitches(m, &row, &slice);
		if (!slices)
			slice = 0;
	}
	*row_pitch = row;
	if (slice_pitch)
		*slice_pitch = slice;
	return map_end(q, m, mp, &c, e, blocking, n, list, errcode_ret);
}

cl_int cmx_clEnqueueUnmapMemObject(cl_command_queue q, cl_mem m, void *ptr, cl_uint n,
				   const cl_event *list, cl_event *event)
{
	struct cmx_mapping *mp;
	struct cmx_cmd c;
	cl_int e = CMX_IS(m, CMX_MAGIC_MEM) && m->image ? cmx_image_check(q, m) : cmx_mem_check(q, m);

	if (e)
		return e;
	mp = cmx_mapping_unlink(m, ptr);
	if (!mp)
		return CL_INVALID_VALUE;
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_UNMAP_MEM_OBJECT);
	if (e)
		goto relink;
	if (m->area_off && !m->image) {
		e = cmx_mem_area_unmap(q, m, mp->offset, &c);
	} else if (mp->flags & MAP_WRITES) {
		struct cmx_WriteBuffer_in in = {.queue = {q->id},
						.mem = {m->id},
						.offset = mp->offset,
						.size = mp->size,
						.wait = CMD_WAIT(&c),
						.event = {c.ev_id}};

		/* What goes back must first have arrived (an unmap may follow a
		 * non-blocking map without waiting for it). */
		e = cmx_mapping_wait_landed(mp);
		cmx_mapping_host_copy(mp, 1);
		if (!e && m->image)
			e = cmx_image_write_packed(q, m, CL_FALSE, mp->origin, mp->region,
						   mp->stage ? mp->stage : mp->ptr, mp->size, &c);
		else if (!e)
			e = CMX_SEND(WriteBuffer, &in, mp->ptr, mp->size);
	} else {
		e = cmx_cmd_marker(q, &c);
	}
	e = cmx_cmd_end(&c, e);
	if (e)
		goto relink;
	atomic_fetch_sub(&m->map_count, 1);
	cmx_mapping_retire(m, mp);
	return CL_SUCCESS;

relink:
	cmx_mapping_link(m, mp);
	return e;
}
