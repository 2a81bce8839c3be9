// SPDX-License-Identifier: MIT
// Mapping records: a map's memory (the buffer's storage, host_ptr, or
// guest memory kept for the next map), its landing read and its end.
#include <stdlib.h>
#include <unistd.h>

#include "copy.h"
#include "icd.h"
#include "mem.h"

/* Mappings whose read is still landing: the notification thread and the
 * threads that unmap meet here. */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t map_cond = PTHREAD_COND_INITIALIZER;

void cmx_mapping_free(struct cmx_mapping *mp)
{
	if (mp->owned)
		free(mp->ptr);
	free(mp->stage);
	free(mp);
}

/* Between a host_ptr image map's packed stage and host_ptr (pack: into
 * the stage). */
void cmx_mapping_host_copy(struct cmx_mapping *mp, int pack)
{
	if (mp->stage)
		cmx_pitched_copy(mp->ptr, mp->stage, mp->w, mp->rows, mp->slices, mp->hrow,
				 mp->hslice, pack);
}

cl_int cmx_mapping_new(cl_mem m, size_t off, size_t size, cl_map_flags flags,
			  struct cmx_mapping **out)
{
	struct cmx_mapping *mp = calloc(1, sizeof(*mp));
	long page = sysconf(_SC_PAGESIZE);

	if (!mp)
		return CL_OUT_OF_HOST_MEMORY;
	mp->offset = off;
	mp->size = size;
	mp->flags = flags;
	/* USE_HOST_PTR: the spec has the map point into host_ptr (buffers
	 * here; images: mapping_into_host()). */
	if ((m->flags & CL_MEM_USE_HOST_PTR) && !m->image) {
		mp->ptr = (char *)m->host_ptr + off;
	} else if (m->area_off && !m->image) {
		mp->ptr = cmx_mem_area_at(m, off); /* the storage itself */
	} else {
		/* The last map's memory when it fits without wasting half. */
		pthread_mutex_lock(&m->lock);
		if (m->spare && m->spare_size >= size && m->spare_size / 2 <= size) {
			mp->ptr = m->spare;
			mp->cap = m->spare_size;
			m->spare = NULL;
		}
		pthread_mutex_unlock(&m->lock);
		if (!mp->ptr) {
			if (posix_memalign(&mp->ptr, page > 0 ? (size_t)page : 4096,
					   size ? size : 1)) {
				free(mp);
				return CL_OUT_OF_HOST_MEMORY;
			}
			mp->cap = size;
		}
		mp->owned = 1;
	}
	*out = mp;
	return CL_SUCCESS;
}

/* Frees a mapping now, or when its read lands if that is still to come:
 * the notification thread writes into its memory until then. */
void cmx_mapping_drop(struct cmx_mapping *mp)
{
	int later;

	pthread_mutex_lock(&map_lock);
	later = mp->landing;
	mp->dropped = later;
	pthread_mutex_unlock(&map_lock);
	if (!later)
		cmx_mapping_free(mp);
}

/* An unmapped mapping: its memory stays with the buffer for the next map
 * (one at a time), unless a read may still land in it. */
void cmx_mapping_retire(cl_mem m, struct cmx_mapping *mp)
{
	int keep;

	pthread_mutex_lock(&map_lock);
	keep = mp->owned && !mp->landing;
	pthread_mutex_unlock(&map_lock);
	if (keep) {
		pthread_mutex_lock(&m->lock);
		if (!m->spare) {
			m->spare = mp->ptr;
			m->spare_size = mp->cap;
			mp->owned = 0;
		}
		pthread_mutex_unlock(&m->lock);
	}
	cmx_mapping_drop(mp);
}

/* A non-blocking map's read is done (notification thread). */
void cmx_mapping_landed(struct cmx_pending_read *r, int status)
{
	struct cmx_mapping *mp = r->arg;
	int dropped;

	/* Before the event reads complete (cmx_read_landed()); host_ptr is
	 * the application's until the image is destroyed, after this. */
	if (status >= 0)
		cmx_mapping_host_copy(mp, 0);
	pthread_mutex_lock(&map_lock);
	mp->landing = 0;
	dropped = mp->dropped;
	pthread_cond_broadcast(&map_cond);
	pthread_mutex_unlock(&map_lock);
	if (dropped)
		cmx_mapping_free(mp);
}

/* CL_SUCCESS once the map's data is in, or an error when it never will be. */
cl_int cmx_mapping_wait_landed(struct cmx_mapping *mp)
{
	int landing;

	pthread_mutex_lock(&map_lock);
	landing = mp->landing;
	pthread_mutex_unlock(&map_lock);
	if (!landing)
		return CL_SUCCESS;
	if (!cmx_cmd_sent())
		return CL_OUT_OF_RESOURCES;
	pthread_mutex_lock(&map_lock);
	while (mp->landing)
		pthread_cond_wait(&map_cond, &map_lock);
	pthread_mutex_unlock(&map_lock);
	return CL_SUCCESS;
}

void cmx_mapping_link(cl_mem m, struct cmx_mapping *mp)
{
	pthread_mutex_lock(&m->lock);
	mp->next = m->maps;
	m->maps = mp;
	pthread_mutex_unlock(&m->lock);
}

struct cmx_mapping *cmx_mapping_unlink(cl_mem m, void *ptr)
{
	struct cmx_mapping **p, *mp;

	pthread_mutex_lock(&m->lock);
	for (p = &m->maps; *p && (*p)->ptr != ptr; p = &(*p)->next)
		;
	mp = *p;
	if (mp)
		*p = mp->next;
	pthread_mutex_unlock(&m->lock);
	return mp;
}
