// SPDX-License-Identifier: MIT
// What the files of buffer memory share (command.c, mapping.c, mem.c,
// transfer.c, rect.c, map.c), the layers between commands and images
// (guest/icd.h): not seen outside them.
#ifndef CMX_GUEST_MEM_H
#define CMX_GUEST_MEM_H

#include "area.h"
#include "icd.h"

/* One clEnqueueMapBuffer not yet unmapped, on its buffer's `maps` list. */
struct cmx_mapping {
	void *ptr;
	size_t offset, size;
	uint64_t origin[3], region[3]; /* images: the mapped box, packed at ptr */
	cl_map_flags flags;
	int owned;   /* ptr is ours, not the application's host_ptr */
	size_t cap;  /* owned: the bytes at ptr */
	/* A USE_HOST_PTR image's map is host_ptr's own memory (ptr), in its
	 * pitches; the box travels packed through stage. */
	void *stage;
	size_t w, rows, slices, hrow, hslice;
	int landing; /* a non-blocking map's read is on its way (map_lock) */
	int dropped; /* unmapped or released before it landed (map_lock) */
	struct cmx_mapping *next;
};

/* [off, off + len) inside size bytes, len not 0; written not to wrap. */
static inline int cmx_in_range(size_t off, size_t len, size_t size)
{
	return len && off <= size && len <= size - off;
}

/* The checks every buffer command starts with (guest/mem.c). */
cl_int cmx_mem_check(cl_command_queue q, cl_mem m);

/* The buffer whose memory m is (itself or a sub-buffer's parent). */
static inline cl_mem cmx_mem_root(cl_mem m)
{
	return m->parent ? m->parent : m;
}

/* Where an area buffer's byte off lies in this process. */
static inline char *cmx_mem_area_at(cl_mem m, size_t off)
{
	return (char *)m->heap->base + m->area_off + off;
}

/* Native maps and unmaps of a buffer in the shared area (guest/mem.c). */
cl_int cmx_mem_area_map(cl_command_queue q, cl_mem m, cl_bool blocking, cl_map_flags flags,
			size_t off, size_t size, struct cmx_cmd *c);
cl_int cmx_mem_area_unmap(cl_command_queue q, cl_mem m, size_t off, struct cmx_cmd *c);

/* Whether the session sent what it batched and lives (guest/command.c). */
int cmx_cmd_sent(void);
/* A marker in the command's place: its wait list and event. */
cl_int cmx_cmd_marker(cl_command_queue q, struct cmx_cmd *c);

/* Reads [off, off + size) of m into dst (guest/transfer.c). */
cl_int cmx_transfer_read(cl_command_queue q, cl_mem m, cl_bool blocking, size_t off, size_t size,
			  void *dst, struct cmx_cmd *c, void (*finish)(struct cmx_pending_read *, int),
			  void *arg);

/* ---- mapping records (guest/mapping.c) ---- */

/* A record for a map of [off, off + size) of m, its memory chosen. */
cl_int cmx_mapping_new(cl_mem m, size_t off, size_t size, cl_map_flags flags,
		       struct cmx_mapping **out);
void cmx_mapping_free(struct cmx_mapping *mp);
/* Frees a mapping now, or once its read has landed. */
void cmx_mapping_drop(struct cmx_mapping *mp);
/* An unmapped mapping: its memory stays with the buffer for the next map. */
void cmx_mapping_retire(cl_mem m, struct cmx_mapping *mp);
/* Between a host_ptr image map's packed stage and host_ptr (pack: into
 * the stage). */
void cmx_mapping_host_copy(struct cmx_mapping *mp, int pack);
/* A non-blocking map's read is done (a pending read's `finish`). */
void cmx_mapping_landed(struct cmx_pending_read *r, int status);
/* CL_SUCCESS once the map's data is in, or an error when it never will be. */
cl_int cmx_mapping_wait_landed(struct cmx_mapping *mp);
/* On and off the buffer's `maps` list (found by the pointer given out). */
void cmx_mapping_link(cl_mem m, struct cmx_mapping *mp);
struct cmx_mapping *cmx_mapping_unlink(cl_mem m, void *ptr);

#endif
