// SPDX-License-Identifier: MIT
// Rectangular buffer transfers and copies: their geometry checks and the
// packing of pitched host memory.
#include <stdlib.h>
#include <string.h>

#include "clcheck.h"
#include "copy.h"
#include "entry.h"
#include "icd.h"
#include "mem.h"

/* ---- rectangles ---- */

/* A rect transfer's checked geometry, default pitches filled in. The wire's
 * host side is packed: rows of region[0], slices of region[0] * region[1]. */
struct rect {
	uint64_t bo[3], r[3]; /* buffer origin and region, for the wire */
	size_t brow, bslice;  /* buffer pitches */
	size_t hrow, hslice;  /* host pitches */
	size_t host_off;      /* of host_origin in the application's memory */
	size_t packed;	      /* bytes on the wire */
};

static size_t rect_start(const size_t o[3], size_t row, size_t slice)
{
	return o[2] * slice + o[1] * row + o[0];
}

/* The checks a rect read (host_reads) or write starts with; fills x. */
static cl_int rect_check(cl_command_queue q, cl_mem m, const size_t bo[3], const size_t ho[3],
			 const size_t r[3], size_t brow, size_t bslice, size_t hrow, size_t hslice,
			 const void *ptr, int host_reads, struct rect *x)
{
	size_t end;
	cl_int e = cmx_mem_check(q, m);

	if (e)
		return e;
	if (!bo || !ho || !r || !ptr || !r[0] || !r[1] || !r[2])
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_pitches_bad(r, &brow, &bslice) ||
	    cmx_cl_rect_pitches_bad(r, &hrow, &hslice))
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_end(bo, r, brow, bslice, &end) || end > m->size)
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_end(ho, r, hrow, hslice, &end))
		return CL_INVALID_VALUE;
	e = cmx_mem_host_access(m, host_reads, !host_reads);
	if (e)
		return e;
	for (int i = 0; i < 3; i++) {
		x->bo[i] = bo[i];
		x->r[i] = r[i];
	}
	x->brow = brow, x->bslice = bslice;
	x->hrow = hrow, x->hslice = hslice;
	x->host_off = rect_start(ho, hrow, hslice);
	/* No overflow: the buffer side, at least this large, fits in size. */
	x->packed = r[0] * r[1] * r[2];
	return CL_SUCCESS;
}

/* The host region is already packed: it can go or land as it is. */
static int rect_is_packed(const struct rect *x)
{
	return (x->r[1] == 1 || x->hrow == x->r[0]) &&
	       (x->r[2] == 1 || x->hslice == x->r[0] * x->r[1]);
}

static void rect_copy(const struct rect *x, char *pitched, char *packed, int pack)
{
	cmx_pitched_copy(pitched, packed, x->r[0], x->r[1], x->r[2], x->hrow, x->hslice, pack);
}

cl_int cmx_clEnqueueReadBufferRect(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t *bo,
				   const size_t *ho, const size_t *region, size_t brow,
				   size_t bslice, size_t hrow, size_t hslice, void *ptr, cl_uint n,
				   const cl_event *list, cl_event *event)
{
	struct cmx_ReadBufferRect_in in;
	struct cmx_pending_read *p;
	struct rect x;
	struct cmx_cmd c;
	char *out;
	void *tmp;
	cl_int e = rect_check(q, m, bo, ho, region, brow, bslice, hrow, hslice, ptr, 1, &x);

	if (e)
		return e;
	out = (char *)ptr + x.host_off;
	tmp = rect_is_packed(&x) ? out : malloc(x.packed);
	if (!tmp)
		return CL_OUT_OF_HOST_MEMORY;
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_READ_BUFFER_RECT);
	if (e)
		goto out_tmp;
	in = (struct cmx_ReadBufferRect_in){.queue = {q->id},
					    .mem = {m->id},
					    .origin = {x.bo, 3},
					    .region = {x.r, 3},
					    .row_pitch = x.brow,
					    .slice_pitch = x.bslice,
					    .wait = CMD_WAIT(&c),
					    .event = {c.ev_id}};
	if (blocking) {
		struct cmx_ReadBufferRect_out o;
		struct cmx_reply r;

		e = cmx_reply_status(
		    cmx_rpc_ReadBufferRect(cmx_icd.s, &in, &o, &r, tmp, x.packed), &r);
		if (!e && tmp != out)
			rect_copy(&x, out, tmp, 0);
		e = cmx_cmd_end(&c, e);
		if (!e)
			cmx_blocking_done(q, n, list);
		goto out_tmp;
	}
	p = cmx_pending_new(q, c.ev, tmp, x.packed);
	if (!p) {
		e = cmx_cmd_end(&c, CL_OUT_OF_HOST_MEMORY);
		goto out_tmp;
	}
	if (tmp != out) {
		/* cmx_read_landed() spreads it out (host pitches) and frees tmp. */
		p->out = out;
		for (int i = 0; i < 3; i++)
			p->region[i] = x.r[i];
		p->row_pitch = x.hrow;
		p->slice_pitch = x.hslice;
	}
	in.tag = (uintptr_t)p;
	/* On failure p is cancelled, which frees tmp too. */
	e = cmx_pending_send(p, &cmx_desc_ReadBufferRect_in, &in, 1);
	return cmx_cmd_end(&c, e);

out_tmp:
	if (tmp != out)
		free(tmp);
	return e;
}

cl_int cmx_clEnqueueWriteBufferRect(cl_command_queue q, cl_mem m, cl_bool blocking,
				    const size_t *bo, const size_t *ho, const size_t *region,
				    size_t brow, size_t bslice, size_t hrow, size_t hslice,
				    const void *ptr, cl_uint n, const cl_event *list,
				    cl_event *event)
{
	struct cmx_WriteBufferRect_in in;
	struct rect x;
	struct cmx_cmd c;
	char *src;
	void *tmp;
	cl_int e = rect_check(q, m, bo, ho, region, brow, bslice, hrow, hslice, ptr, 0, &x);

	if (e)
		return e;
	src = (char *)ptr + x.host_off;
	tmp = rect_is_packed(&x) ? src : malloc(x.packed);
	if (!tmp)
		return CL_OUT_OF_HOST_MEMORY;
	if (tmp != src)
		rect_copy(&x, src, tmp, 1);
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_WRITE_BUFFER_RECT);
	if (e)
		goto out;
	in = (struct cmx_WriteBufferRect_in){.queue = {q->id},
					     .mem = {m->id},
					     .origin = {x.bo, 3},
					     .region = {x.r, 3},
					     .row_pitch = x.brow,
					     .slice_pitch = x.bslice,
					     .wait = CMD_WAIT(&c),
					     .event = {c.ev_id}};
	if (blocking) {
		struct cmx_WriteBufferRect_out o;
		struct cmx_reply r;

		e = cmx_reply_status(
		    cmx_rpc_WriteBufferRect(cmx_icd.s, &in, tmp, x.packed, &o, &r), &r);
	} else {
		e = CMX_SEND(WriteBufferRect, &in, tmp, x.packed);
	}
	e = cmx_cmd_end(&c, e);
	if (!e && blocking)
		cmx_blocking_done(q, n, list);
out:
	if (tmp != src)
		free(tmp);
	return e;
}

/*
 * Whether two rects with the same pitches, in one linear memory, share a
 * byte (the test of the spec's appendix on copy overlap): their extents
 * meet, and neither fits in the other's gap between rows, nor between
 * slices. Slice pitches are multiples of row pitches (checked before).
 */
static int rects_overlap(size_t so, size_t dof, const size_t r[3], size_t row, size_t slice)
{
	size_t plane = (r[1] - 1) * row + r[0];
	size_t block = (r[2] - 1) * slice + plane;
	size_t sx = so % row, dx = dof % row, sy = so % slice, dy = dof % slice;

	if (dof + block <= so || so + block <= dof)
		return 0;
	if ((dx >= sx + r[0] && dx + r[0] <= sx + row) ||
	    (sx >= dx + r[0] && sx + r[0] <= dx + row))
		return 0;
	if ((dy >= sy + plane && dy + plane <= sy + slice) ||
	    (sy >= dy + plane && sy + plane <= dy + slice))
		return 0;
	return 1;
}

cl_int cmx_copy_buffer_rect_check(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
				  const size_t *dor, const size_t *region, size_t *srowp,
				  size_t *sslicep, size_t *drowp, size_t *dslicep)
{
	size_t send, dend, srow = *srowp, sslice = *sslicep, drow = *drowp, dslice = *dslicep;
	cl_int e = cmx_mem_check(q, src);

	if (!e)
		e = cmx_mem_check(q, dst);
	if (e)
		return e;
	if (!so || !dor || !region || !region[0] || !region[1] || !region[2] ||
	    cmx_cl_rect_pitches_bad(region, &srow, &sslice) ||
	    cmx_cl_rect_pitches_bad(region, &drow, &dslice))
		return CL_INVALID_VALUE;
	*srowp = srow, *sslicep = sslice, *drowp = drow, *dslicep = dslice;
	if (src == dst && sslice != dslice && srow != drow)
		return CL_INVALID_VALUE;
	if (cmx_cl_rect_end(so, region, srow, sslice, &send) || send > src->size ||
	    cmx_cl_rect_end(dor, region, drow, dslice, &dend) || dend > dst->size)
		return CL_INVALID_VALUE;
	if (cmx_mem_root(src) == cmx_mem_root(dst)) {
		size_t s0 = src->origin + rect_start(so, srow, sslice);
		size_t d0 = dst->origin + rect_start(dor, drow, dslice);

		/* Pitches that differ leave no simple pattern: any meeting of
		 * the extents counts as overlap. */
		if (srow == drow && sslice == dslice
			? rects_overlap(s0, d0, region, srow, sslice)
			: s0 < dst->origin + dend && d0 < src->origin + send)
			return CL_MEM_COPY_OVERLAP;
	}
	return CL_SUCCESS;
}

cl_int cmx_clEnqueueCopyBufferRect(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
				   const size_t *dor, const size_t *region, size_t srow,
				   size_t sslice, size_t drow, size_t dslice, cl_uint n,
				   const cl_event *list, cl_event *event)
{
	struct cmx_CopyBufferRect_in in;
	uint64_t so64[3], do64[3], r64[3];
	struct cmx_cmd c;
	cl_int e = cmx_copy_buffer_rect_check(q, src, dst, so, dor, region, &srow, &sslice, &drow,
					      &dslice);

	if (e)
		return e;
	if ((e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_COPY_BUFFER_RECT)))
		return e;
	for (int i = 0; i < 3; i++)
		so64[i] = so[i], do64[i] = dor[i], r64[i] = region[i];
	in = (struct cmx_CopyBufferRect_in){.queue = {q->id},
					    .src = {src->id},
					    .dst = {dst->id},
					    .src_origin = {so64, 3},
					    .dst_origin = {do64, 3},
					    .region = {r64, 3},
					    .src_row_pitch = srow,
					    .src_slice_pitch = sslice,
					    .dst_row_pitch = drow,
					    .dst_slice_pitch = dslice,
					    .wait = CMD_WAIT(&c),
					    .event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(CopyBufferRect, &in));
}
