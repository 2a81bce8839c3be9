// SPDX-License-Identifier: MIT
// Handlers: images and samplers. Image payloads move like buffer payloads
// (host/exec_mem.c): staged on arrival, packed, freed on completion.
#include "exec.h"

#include <stdlib.h>
#include <string.h>

#include "clcheck.h"
#include "zero.h"

#define HOST_ACCESS (CL_MEM_HOST_WRITE_ONLY | CL_MEM_HOST_READ_ONLY | CL_MEM_HOST_NO_ACCESS)

/* a * b into *out; nonzero on overflow. */
static int mul(uint64_t a, uint64_t b, uint64_t *out)
{
	return __builtin_mul_overflow(a, b, out);
}

/* An image object's ext: what its transfers and kernel arguments are
 * checked against. */
struct image_shape {
	cl_mem_object_type type;
	uint64_t extent[3]; /* cmx_cl_image_extent() */
	uint64_t elem;	    /* bytes of one element */
	int over_buffer;    /* its memory is a buffer's */
};

cl_mem_object_type cmx_image_type(const struct cmx_obj *m)
{
	const struct image_shape *sh = m->ext;

	return sh ? sh->type : 0;
}

int cmx_image_shape(const struct cmx_obj *m, uint64_t extent[3], uint64_t *elem)
{
	const struct image_shape *sh = m->ext;

	if (m->kind != CMX_K_MEM || !sh || sh->over_buffer)
		return 0;
	for (int i = 0; i < 3; i++)
		extent[i] = sh->extent[i];
	*elem = sh->elem;
	return 1;
}

/* Bytes of host memory the driver reads for a new image's contents: the
 * guest sends explicit pitches whenever it sends contents. */
static int image_host_bytes(const cl_image_desc *d, uint64_t *out)
{
	switch (d->image_type) {
	case CL_MEM_OBJECT_IMAGE1D:
	case CL_MEM_OBJECT_IMAGE1D_BUFFER:
		*out = d->image_row_pitch;
		return 0;
	case CL_MEM_OBJECT_IMAGE2D:
		return mul(d->image_row_pitch, d->image_height, out);
	case CL_MEM_OBJECT_IMAGE3D:
		return mul(d->image_slice_pitch, d->image_depth, out);
	case CL_MEM_OBJECT_IMAGE1D_ARRAY:
	case CL_MEM_OBJECT_IMAGE2D_ARRAY:
		return mul(d->image_slice_pitch, d->image_array_size, out);
	}
	return 1;
}

/*
 * The descriptor against the format and what comes with it, before the
 * driver reads anything: PoCL 3.1 copies whole rows from contents whose
 * row pitch is shorter than a row (8 bytes of the daemon's heap came back
 * in a 4x2 RGBA8 image), and takes pitches without contents.
 */
static cl_int desc_check(struct cmx_call *c, const cl_image_desc *d, uint64_t elem,
			 const struct cmx_ref *buffer, uint64_t ext[3])
{
	const struct cmx_obj *buf;
	uint64_t need;

	if (cmx_cl_image_extent(d->image_type, d->image_width, d->image_height, d->image_depth,
				d->image_array_size, ext) ||
	    !ext[0] || !ext[1] || !ext[2])
		return CL_INVALID_IMAGE_DESCRIPTOR;
	/* Larger than memory can be: no device's maximum is that large. */
	if (mul(ext[0], elem, &need) || mul(need, ext[1], &need) || mul(need, ext[2], &need))
		return CL_INVALID_IMAGE_SIZE;
	if ((!c->bulk_len && (d->image_slice_pitch || (d->image_row_pitch && !buffer->h))) ||
	    cmx_cl_image_pitches_bad(d->image_type, d->image_width, d->image_height, elem,
				     d->image_row_pitch, d->image_slice_pitch))
		return CL_INVALID_IMAGE_DESCRIPTOR;
	if (c->bulk_len && (image_host_bytes(d, &need) || need != c->bulk_len))
		return CL_INVALID_HOST_PTR;
	if (!buffer->h)
		return CL_SUCCESS;
	/* An image over a buffer: its rows must lie in the buffer. */
	buf = cmx_session_obj(c->s, buffer->id, CMX_K_MEM);
	if (!buf || buf->ext)
		return CL_INVALID_IMAGE_DESCRIPTOR;
	if ((d->image_row_pitch ? mul(d->image_row_pitch, ext[1], &need)
				: mul(ext[0], elem, &need) || mul(need, ext[1], &need)) ||
	    need > buf->size)
		return CL_INVALID_IMAGE_DESCRIPTOR;
	return CL_SUCCESS;
}

int cmx_h_CreateImage(struct cmx_call *c, struct cmx_CreateImage_in *in,
		      struct cmx_CreateImage_out *out)
{
	cl_mem_flags flags = in->flags & ~(cl_mem_flags)(HOST_ACCESS | CL_MEM_USE_HOST_PTR);
	struct image_shape *sh;
	const void *zeros = NULL;
	cl_image_format f;
	cl_image_desc d;
	struct cmx_obj *o;
	uint64_t need = 0, elem, ext[3];
	size_t size = 0;
	int unfilled = 0;
	cl_mem m;
	cl_int e;

	if (c->applied) {
		/* Sent again after a restore that made it (host/record.c). */
		o = cmx_session_obj(c->s, in->mem.id, CMX_K_MEM);
		if (!o || !o->h)
			return CL_INVALID_MEM_OBJECT;
		out->size = o->size;
		return CL_SUCCESS;
	}
	if (in->format.n != 2)
		return CL_INVALID_IMAGE_FORMAT_DESCRIPTOR;
	if (in->desc.n != 9)
		return CL_INVALID_IMAGE_DESCRIPTOR;
	f.image_channel_order = (cl_channel_order)in->format.v[0];
	f.image_channel_data_type = (cl_channel_type)in->format.v[1];
	elem = cmx_cl_elem_size(in->format.v[0], in->format.v[1]);
	if (!elem)
		return CL_INVALID_IMAGE_FORMAT_DESCRIPTOR;
	memset(&d, 0, sizeof(d));
	d.image_type = (cl_mem_object_type)in->desc.v[0];
	d.image_width = in->desc.v[1];
	d.image_height = in->desc.v[2];
	d.image_depth = in->desc.v[3];
	d.image_array_size = in->desc.v[4];
	d.image_row_pitch = in->desc.v[5];
	d.image_slice_pitch = in->desc.v[6];
	d.num_mip_levels = (cl_uint)in->desc.v[7];
	d.num_samples = (cl_uint)in->desc.v[8];
	d.buffer = in->buffer.h;
	/* Both must be 0 where no extension says otherwise (none is
	 * forwarded); PoCL exits the process on either ("unimplemented"). */
	if (d.num_mip_levels || d.num_samples)
		return CL_INVALID_IMAGE_DESCRIPTOR;
	/* A restore replays the creation without its contents (a checkpoint
	 * writes the image's bytes instead, host/record.c): the pitches
	 * described those, and go with them. */
	if (c->s->restore && !c->bulk_len && !in->buffer.h)
		d.image_row_pitch = d.image_slice_pitch = 0;
	e = desc_check(c, &d, elem, &in->buffer, ext);
	if (e)
		return e;
	/* The tenant's memory quota, before the device sees the request (an
	 * image over a buffer uses memory charged already). */
	if (!in->buffer.h) {
		need = ext[0] * elem * ext[1] * ext[2]; /* no overflow: desc_check() */
		e = cmx_tenant_may_alloc(c->s->tenant, need);
		if (e)
			return e;
	}
	sh = malloc(sizeof(*sh));
	if (!sh)
		return CL_OUT_OF_HOST_MEMORY;
	*sh = (struct image_shape){.type = d.image_type,
				   .extent = {ext[0], ext[1], ext[2]},
				   .elem = elem,
				   .over_buffer = in->buffer.h != NULL};
	/* A restore that writes every byte of it next, before a guest can
	 * reach it, needs no fill (host/restore.c). */
	if (!c->bulk_len && !in->buffer.h && c->s->restore)
		unfilled = c->s->srv->restore_covers(c->s, in->mem.id, need);
	/* Without contents, on a driver that takes no fill: made from zeros
	 * (no pitch is given without contents: rows are packed). */
	if (!c->bulk_len && !in->buffer.h && !unfilled &&
	    (e = cmx_zero_host(c->s->srv, need, &zeros))) {
		free(sh);
		return e;
	}
	/* USE_HOST_PTR lives in the guest; here the contents are copied in. */
	flags = c->bulk_len || zeros ? flags | CL_MEM_COPY_HOST_PTR
				     : flags & ~(cl_mem_flags)CL_MEM_COPY_HOST_PTR;
	m = clCreateImage(in->context.h, flags, &f, &d, c->bulk_len ? c->bulk : (void *)zeros, &e);
	cmx_zero_host_put(zeros, need);
	if (!m) {
		free(sh);
		return e ? e : CL_OUT_OF_RESOURCES;
	}
	clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof(size), &size, NULL);
	/* The estimate above knows no padding of the driver's. */
	if (!in->buffer.h && (e = cmx_tenant_may_alloc(c->s->tenant, size))) {
		free(sh);
		clReleaseMemObject(m);
		return e;
	}
	/* Without contents it is zeroed before the tenant can read it (an
	 * image over a buffer shows the buffer's bytes). */
	if (!c->bulk_len && !in->buffer.h && !zeros && !unfilled &&
	    (e = cmx_zero_image(cmx_session_obj(c->s, in->context.id, CMX_K_CONTEXT), m, ext))) {
		free(sh);
		clReleaseMemObject(m);
		return e;
	}
	if (cmx_session_add(c->s, in->mem.id, CMX_K_MEM, m, in->context.h, 0, &o)) {
		free(sh);
		clReleaseMemObject(m);
		return CL_OUT_OF_HOST_MEMORY;
	}
	o->ext = sh;
	o->size = size;
	if (unfilled)
		c->s->srv->restore_unfilled(c->s, in->mem.id, m);
	/* An image over a buffer uses the buffer's memory, charged already. */
	cmx_session_charge(c->s, o, in->buffer.h ? 0 : size);
	out->size = size;
	return CL_SUCCESS;
}

int cmx_h_GetSupportedImageFormats(struct cmx_call *c, struct cmx_GetSupportedImageFormats_in *in,
				   struct cmx_GetSupportedImageFormats_out *out)
{
	cl_image_format *f;
	uint64_t *v;
	cl_uint n = 0;
	cl_int e = clGetSupportedImageFormats(in->context.h, in->flags, (cl_mem_object_type)in->type,
					      0, NULL, &n);

	if (e || !n)
		return e;
	f = calloc(n, sizeof(*f));
	c->scratch = v = calloc(n, sizeof(*v));
	if (!f || !v) {
		free(f);
		return CL_OUT_OF_HOST_MEMORY;
	}
	e = clGetSupportedImageFormats(in->context.h, in->flags, (cl_mem_object_type)in->type, n, f,
				       &n);
	for (cl_uint i = 0; !e && i < n; i++)
		v[i] = f[i].image_channel_order | (uint64_t)f[i].image_channel_data_type << 32;
	free(f);
	out->formats = (struct cmx_u64s){v, e ? 0 : n};
	return e;
}

int cmx_h_GetImageInfo(struct cmx_call *c, struct cmx_GetImageInfo_in *in,
		       struct cmx_GetImageInfo_out *out)
{
	/* A handle of the daemon means nothing to the guest, which answers
	 * CL_IMAGE_BUFFER itself. */
	if (in->param == CL_IMAGE_BUFFER)
		return CL_INVALID_VALUE;
	return CMX_INFO(c, &out->value, clGetImageInfo, in->mem.h, (cl_uint)in->param);
}

int cmx_image_region(struct cmx_call *c, uint64_t id, const struct cmx_u64s *origin,
			const struct cmx_u64s *region, size_t o[3], size_t r[3], uint64_t *bytes)
{
	struct cmx_obj *m = cmx_session_obj(c->s, id, CMX_K_MEM);
	const struct image_shape *sh = m ? m->ext : NULL;

	if (!sh)
		return CL_INVALID_MEM_OBJECT;
	if (origin->n != 3 || region->n != 3 || cmx_cl_box_bad(sh->extent, origin->v, region->v))
		return CL_INVALID_VALUE;
	for (int i = 0; i < 3; i++) {
		o[i] = origin->v[i];
		r[i] = region->v[i];
	}
	if (bytes && (mul(sh->elem, r[0], bytes) || mul(*bytes, r[1], bytes) ||
		      mul(*bytes, r[2], bytes) || *bytes > SIZE_MAX))
		return CL_INVALID_VALUE;
	return CL_SUCCESS;
}

static int write_image(struct cmx_call *c, struct cmx_WriteImage_in *in, int sync)
{
	size_t o[3], r[3];
	uint64_t bytes;
	cl_event ev;
	cl_int e = cmx_image_region(c, in->mem.id, &in->origin, &in->region, o, r, &bytes);

	if (e)
		return e;
	if (c->bulk_len != bytes)
		return CL_INVALID_VALUE;
	e = clEnqueueWriteImage(in->queue.h, in->mem.h, CL_FALSE, o, r, 0, 0, c->bulk,
				WAIT(in->wait), &ev);
	return cmx_write_staged(c, e, ev, &in->event, sync);
}

int cmx_h_WriteImage(struct cmx_call *c, struct cmx_WriteImage_in *in,
		     struct cmx_WriteImage_out *out)
{
	return write_image(c, in, c->sync);
}

static int read_image(struct cmx_call *c, struct cmx_ReadImage_in *in, int sync)
{
	size_t o[3], r[3];
	uint64_t bytes;
	cl_event ev;
	void *dst;
	cl_int e = cmx_image_region(c, in->mem.id, &in->origin, &in->region, o, r, &bytes);

	if (e)
		return e;
	dst = cmx_call_read_buffer(c, bytes);
	if (!dst)
		return CL_OUT_OF_HOST_MEMORY;
	e = clEnqueueReadImage(in->queue.h, in->mem.h, CL_FALSE, o, r, 0, 0, dst, WAIT(in->wait),
			       &ev);
	return cmx_read_staged(c, e, ev, &in->event, sync);
}

int cmx_h_ReadImage(struct cmx_call *c, struct cmx_ReadImage_in *in,
		     struct cmx_ReadImage_out *out)
{
	return read_image(c, in, c->sync);
}

int cmx_h_CopyImage(struct cmx_call *c, struct cmx_CopyImage_in *in)
{
	size_t so[3], dO[3], r[3];
	cl_event ev;
	cl_int e = cmx_image_region(c, in->src.id, &in->src_origin, &in->region, so, r, NULL);

	if (e || (e = cmx_image_region(c, in->dst.id, &in->dst_origin, &in->region, dO, r, NULL)))
		return e;
	e = clEnqueueCopyImage(in->queue.h, in->src.h, in->dst.h, so, dO, r, WAIT(in->wait), &ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_FillImage(struct cmx_call *c, struct cmx_FillImage_in *in)
{
	unsigned char color[16] = {0};
	size_t o[3], r[3];
	cl_event ev;
	cl_int e = cmx_image_region(c, in->mem.id, &in->origin, &in->region, o, r, NULL);

	if (e)
		return e;
	if (in->color.len != sizeof(color))
		return CL_INVALID_VALUE;
	memcpy(color, in->color.ptr, sizeof(color));
	e = clEnqueueFillImage(in->queue.h, in->mem.h, color, o, r, WAIT(in->wait), &ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_CopyImageToBuffer(struct cmx_call *c, struct cmx_CopyImageToBuffer_in *in)
{
	size_t o[3], r[3];
	uint64_t bytes;
	cl_event ev;
	cl_int e = cmx_image_region(c, in->src.id, &in->src_origin, &in->region, o, r, &bytes);

	if (e || (e = cmx_buffer_range(c, in->dst.id, in->dst_offset, bytes)))
		return e;
	e = clEnqueueCopyImageToBuffer(in->queue.h, in->src.h, in->dst.h, o, r, in->dst_offset,
				       WAIT(in->wait), &ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_CopyBufferToImage(struct cmx_call *c, struct cmx_CopyBufferToImage_in *in)
{
	size_t o[3], r[3];
	uint64_t bytes;
	cl_event ev;
	cl_int e = cmx_image_region(c, in->dst.id, &in->dst_origin, &in->region, o, r, &bytes);

	if (e || (e = cmx_buffer_range(c, in->src.id, in->src_offset, bytes)))
		return e;
	e = clEnqueueCopyBufferToImage(in->queue.h, in->src.h, in->dst.h, in->src_offset, o, r,
				       WAIT(in->wait), &ev);
	if (!e)
		cmx_event_bind(c, &in->event, ev);
	return e;
}

int cmx_h_CreateSampler(struct cmx_call *c, struct cmx_CreateSampler_in *in)
{
	cl_sampler_properties props[17];
	cl_bool norm = CL_TRUE;
	cl_addressing_mode addr = CL_ADDRESS_CLAMP;
	cl_filter_mode filter = CL_FILTER_NEAREST;
	cl_sampler smp;
	cl_int e;

	if (in->props.n % 2)
		return CL_INVALID_VALUE;
	for (uint64_t i = 0; i < in->props.n; i += 2) {
		props[i] = in->props.v[i];
		props[i + 1] = in->props.v[i + 1];
		switch (in->props.v[i]) {
		case CL_SAMPLER_NORMALIZED_COORDS:
			norm = (cl_bool)in->props.v[i + 1];
			break;
		case CL_SAMPLER_ADDRESSING_MODE:
			addr = (cl_addressing_mode)in->props.v[i + 1];
			break;
		case CL_SAMPLER_FILTER_MODE:
			filter = (cl_filter_mode)in->props.v[i + 1];
			break;
		default:
			return CL_INVALID_VALUE;
		}
	}
	props[in->props.n] = 0;
	if (c->s->srv->platform_version >= 200)
		smp = clCreateSamplerWithProperties(in->context.h, props, &e);
	else
		smp = clCreateSampler(in->context.h, norm, addr, filter, &e);
	if (!smp)
		return e ? e : CL_OUT_OF_RESOURCES;
	if (cmx_session_add(c->s, in->sampler.id, CMX_K_SAMPLER, smp, in->context.h, 0, NULL)) {
		clReleaseSampler(smp);
		return CL_OUT_OF_HOST_MEMORY;
	}
	return CL_SUCCESS;
}

int cmx_h_ReleaseSampler(struct cmx_call *c, struct cmx_ReleaseSampler_in *in)
{
	cmx_session_release(c->s, in->sampler.id, CMX_K_SAMPLER);
	return CL_SUCCESS;
}
