// SPDX-License-Identifier: MIT
// Images and samplers: creation (checked by the driver, one round trip),
// the context's format lists (cached), transfers packed on the wire, and
// samplers answered from what the guest keeps.
#include <stdlib.h>
#include <string.h>

#include "clcheck.h"
#include "copy.h"
#include "entry.h"
#include "command.h"
#include "icd.h"
#include "image.h"
#include "mem.h"
#include "object.h"

static int is_image_type(cl_mem_object_type t)
{
	switch (t) {
	case CL_MEM_OBJECT_IMAGE1D:
	case CL_MEM_OBJECT_IMAGE1D_ARRAY:
	case CL_MEM_OBJECT_IMAGE1D_BUFFER:
	case CL_MEM_OBJECT_IMAGE2D:
	case CL_MEM_OBJECT_IMAGE2D_ARRAY:
	case CL_MEM_OBJECT_IMAGE3D:
		return 1;
	}
	return 0;
}

/* Some device of ctx reports CL_DEVICE_IMAGE_SUPPORT. */
static int ctx_has_images(cl_context ctx)
{
	for (cl_uint i = 0; i < ctx->ndevices; i++) {
		const struct cmx_devinfo *di = cmx_device_info(ctx->devices[i], CL_DEVICE_IMAGE_SUPPORT);
		if (di && di->size == sizeof(cl_bool) && *(const cl_bool *)di->value)
			return 1;
	}
	return 0;
}

size_t cmx_image_elem_size(const cl_image_format *f)
{
	return cmx_cl_elem_size(f->image_channel_order, f->image_channel_data_type);
}

static cl_int formats_get(cl_context ctx, cl_mem_flags flags, cl_mem_object_type type,
			  const struct cmx_formats **out);
static int format_listed(const struct cmx_formats *f, const cl_image_format *want);

/* ---- creation ---- */

/* The largest answer of a size_t limit among ctx's devices. */
static size_t ctx_limit(cl_context ctx, cl_uint param)
{
	size_t best = 0;

	for (cl_uint i = 0; i < ctx->ndevices; i++) {
		const struct cmx_devinfo *di = cmx_device_info(ctx->devices[i], param);
		if (di && di->size == sizeof(size_t) && *(const size_t *)di->value > best)
			best = *(const size_t *)di->value;
	}
	return best;
}

/* The dimensions a type uses: present (CL_INVALID_IMAGE_DESCRIPTOR) and
 * within the devices' limits (CL_INVALID_IMAGE_SIZE). */
static cl_int dims_check(cl_context ctx, const cl_image_desc *d)
{
	size_t dims[3] = {d->image_width, 1, 1}, lim[3] = {0, 1, 1}, arr = 1;

	switch (d->image_type) {
	case CL_MEM_OBJECT_IMAGE1D_BUFFER:
		lim[0] = ctx_limit(ctx, CL_DEVICE_IMAGE_MAX_BUFFER_SIZE);
		break;
	case CL_MEM_OBJECT_IMAGE1D:
		lim[0] = ctx_limit(ctx, CL_DEVICE_IMAGE2D_MAX_WIDTH);
		break;
	case CL_MEM_OBJECT_IMAGE1D_ARRAY:
		lim[0] = ctx_limit(ctx, CL_DEVICE_IMAGE2D_MAX_WIDTH);
		arr = d->image_array_size;
		break;
	case CL_MEM_OBJECT_IMAGE2D_ARRAY:
		arr = d->image_array_size;
		/* fall through */
	case CL_MEM_OBJECT_IMAGE2D:
		lim[0] = ctx_limit(ctx, CL_DEVICE_IMAGE2D_MAX_WIDTH);
		lim[1] = ctx_limit(ctx, CL_DEVICE_IMAGE2D_MAX_HEIGHT);
		dims[1] = d->image_height;
		break;
	case CL_MEM_OBJECT_IMAGE3D:
		lim[0] = ctx_limit(ctx, CL_DEVICE_IMAGE3D_MAX_WIDTH);
		lim[1] = ctx_limit(ctx, CL_DEVICE_IMAGE3D_MAX_HEIGHT);
		lim[2] = ctx_limit(ctx, CL_DEVICE_IMAGE3D_MAX_DEPTH);
		dims[1] = d->image_height;
		dims[2] = d->image_depth;
		break;
	}
	if (!dims[0] || !dims[1] || !dims[2] || !arr)
		return CL_INVALID_IMAGE_DESCRIPTOR;
	for (int i = 0; i < 3; i++)
		if (lim[i] && dims[i] > lim[i])
			return CL_INVALID_IMAGE_SIZE;
	if (arr > 1 && ctx_limit(ctx, CL_DEVICE_IMAGE_MAX_ARRAY_SIZE) &&
	    arr > ctx_limit(ctx, CL_DEVICE_IMAGE_MAX_ARRAY_SIZE))
		return CL_INVALID_IMAGE_SIZE;
	return CL_SUCCESS;
}

/*
 * Pitches describe host memory: none without it (a 2D image over a buffer
 * may name its own row pitch), never shorter than a row or a slice (PoCL
 * 3.1 copies whole rows from a shorter pitch, reading past the contents).
 */
static cl_int pitches_check(const cl_image_desc *d, size_t elem, const void *host_ptr)
{
	if (!host_ptr && (d->image_slice_pitch || (d->image_row_pitch && !d->buffer)))
		return CL_INVALID_IMAGE_DESCRIPTOR;
	if (cmx_cl_image_pitches_bad(d->image_type, d->image_width, d->image_height, elem,
				     d->image_row_pitch, d->image_slice_pitch))
		return CL_INVALID_IMAGE_DESCRIPTOR;
	return CL_SUCCESS;
}

/* An image over a buffer lies inside it: its rows (a 1D image's one). */
static int fits_buffer(const cl_image_desc *d, size_t elem, cl_mem buf)
{
	uint64_t need;

	return !__builtin_mul_overflow(
		   d->image_row_pitch ? d->image_row_pitch : d->image_width * elem,
		   d->image_type == CL_MEM_OBJECT_IMAGE2D ? d->image_height : 1, &need) &&
	       need <= buf->size;
}

/* The pitches of contents laid out in host memory, defaults filled. */
static void host_pitches(cl_image_desc *d, size_t elem)
{
	if (!d->image_row_pitch)
		d->image_row_pitch = d->image_width * elem;
	if (d->image_slice_pitch)
		return;
	if (d->image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY)
		d->image_slice_pitch = d->image_row_pitch;
	else if (d->image_type == CL_MEM_OBJECT_IMAGE3D ||
		 d->image_type == CL_MEM_OBJECT_IMAGE2D_ARRAY)
		d->image_slice_pitch = d->image_row_pitch * d->image_height;
}

void cmx_image_host_pitches(cl_mem m, size_t *row, size_t *slice)
{
	cl_image_desc d = m->image->desc;

	host_pitches(&d, m->image->elem);
	*row = d.image_row_pitch;
	*slice = d.image_slice_pitch;
}

/* The rows of the contents, packed: *out is host_ptr itself when they
 * already are, else a copy (freed by the caller); d's pitches and *bytes
 * then describe the packed layout. */
static cl_int contents_pack(cl_image_desc *d, size_t elem, void *host_ptr, void **out,
			   uint64_t *bytes)
{
	size_t w = d->image_width * elem, rows = 1, slices = 1, row = d->image_row_pitch;
	size_t slice = d->image_slice_pitch;

	switch (d->image_type) {
	case CL_MEM_OBJECT_IMAGE2D:
		rows = d->image_height;
		break;
	case CL_MEM_OBJECT_IMAGE3D:
		rows = d->image_height, slices = d->image_depth;
		break;
	case CL_MEM_OBJECT_IMAGE2D_ARRAY:
		rows = d->image_height, slices = d->image_array_size;
		break;
	case CL_MEM_OBJECT_IMAGE1D_ARRAY:
		rows = d->image_array_size, row = slice;
		break;
	}
	*out = host_ptr;
	/* Pitches shorter than a row or slice were refused (pitches_check()). */
	if ((rows == 1 || row == w) && (slices == 1 || slice == w * rows))
		return CL_SUCCESS;
	*out = malloc(w * rows * slices);
	if (!*out)
		return CL_OUT_OF_HOST_MEMORY;
	cmx_pitched_copy(host_ptr, *out, w, rows, slices, row, slice, 1);
	d->image_row_pitch = w;
	d->image_slice_pitch = d->image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY ? w
			       : d->image_type == CL_MEM_OBJECT_IMAGE3D ||
					 d->image_type == CL_MEM_OBJECT_IMAGE2D_ARRAY
				   ? w * rows
				   : 0;
	*bytes = w * rows * slices;
	return CL_SUCCESS;
}

/* Bytes of host memory the contents take; nonzero when that overflows. */
static int host_bytes(const cl_image_desc *d, uint64_t *out)
{
	switch (d->image_type) {
	case CL_MEM_OBJECT_IMAGE2D:
		return __builtin_mul_overflow((uint64_t)d->image_row_pitch, d->image_height, out);
	case CL_MEM_OBJECT_IMAGE3D:
		return __builtin_mul_overflow((uint64_t)d->image_slice_pitch, d->image_depth, out);
	case CL_MEM_OBJECT_IMAGE1D_ARRAY:
	case CL_MEM_OBJECT_IMAGE2D_ARRAY:
		return __builtin_mul_overflow((uint64_t)d->image_slice_pitch, d->image_array_size,
					      out);
	}
	*out = d->image_row_pitch;
	return 0;
}

static cl_mem image_create(cl_context ctx, const cl_mem_properties *props, cl_mem_flags flags,
			   const cl_image_format *format, const cl_image_desc *desc,
			   void *host_ptr, cl_int *errcode_ret)
{
	int has_host = (flags & (CL_MEM_USE_HOST_PTR | CL_MEM_COPY_HOST_PTR)) != 0;
	uint64_t fmt[2], dv[9], bytes = 0;
	struct cmx_CreateImage_out out;
	struct cmx_CreateImage_in in;
	const struct cmx_formats *fl;
	struct cmx_image *img;
	void *packed = NULL;
	cl_mem buf = NULL, m;
	struct cmx_reply r;
	cl_image_desc d;
	size_t elem;
	cl_int e;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT))
		return cmx_fail(errcode_ret, CL_INVALID_CONTEXT);
	if (props && props[0])
		return cmx_fail(errcode_ret, CL_INVALID_PROPERTY);
	if (cmx_mem_flags_check(flags & ~(cl_mem_flags)CL_MEM_KERNEL_READ_AND_WRITE))
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	if (!format || !(elem = cmx_image_elem_size(format)))
		return cmx_fail(errcode_ret, CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
	if (!desc || !is_image_type(desc->image_type))
		return cmx_fail(errcode_ret, CL_INVALID_IMAGE_DESCRIPTOR);
	if (!ctx_has_images(ctx))
		return cmx_fail(errcode_ret, CL_INVALID_OPERATION);
	if ((e = dims_check(ctx, desc)))
		return cmx_fail(errcode_ret, e);
	if (has_host != (host_ptr != NULL))
		return cmx_fail(errcode_ret, CL_INVALID_HOST_PTR);
	if ((e = pitches_check(desc, elem, host_ptr)))
		return cmx_fail(errcode_ret, e);
	d = *desc;
	if (d.buffer) {
		buf = d.buffer;
		if (!CMX_IS(buf, CMX_MAGIC_MEM) || buf->ctx != ctx ||
		    (d.image_type != CL_MEM_OBJECT_IMAGE1D_BUFFER &&
		     d.image_type != CL_MEM_OBJECT_IMAGE2D) ||
		    !fits_buffer(&d, elem, buf))
			return cmx_fail(errcode_ret, CL_INVALID_IMAGE_DESCRIPTOR);
	} else if (d.image_type == CL_MEM_OBJECT_IMAGE1D_BUFFER) {
		return cmx_fail(errcode_ret, CL_INVALID_IMAGE_DESCRIPTOR);
	}
	/* The spec's error for a format the device lacks (a driver may give
	 * another), from the cached list for the kernel access asked for:
	 * NVIDIA lists formats for no host pointer flags (CL_INVALID_VALUE). */
	if ((e = formats_get(ctx,
			     flags & (CL_MEM_READ_WRITE | CL_MEM_WRITE_ONLY | CL_MEM_READ_ONLY |
				      CL_MEM_KERNEL_READ_AND_WRITE),
			     desc->image_type, &fl)))
		return cmx_fail(errcode_ret, e);
	if (!format_listed(fl, format))
		return cmx_fail(errcode_ret, CL_IMAGE_FORMAT_NOT_SUPPORTED);
	/* Contents travel packed, with explicit pitches, so the daemon knows
	 * how many bytes the driver will read (and a driver that mishandles
	 * pitched host memory, as Oclgrind 21.10 does, never sees any). */
	if (has_host) {
		host_pitches(&d, elem);
		if (host_bytes(&d, &bytes) || bytes > SIZE_MAX)
			return cmx_fail(errcode_ret, CL_INVALID_IMAGE_SIZE);
		e = contents_pack(&d, elem, host_ptr, &packed, &bytes);
		if (e)
			return cmx_fail(errcode_ret, e);
	}

	img = calloc(1, sizeof(*img));
	m = img ? cmx_mem_new(ctx, flags, 0) : NULL;
	if (!m) {
		free(img);
		if (packed != host_ptr)
			free(packed);
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	}
	img->format = *format;
	img->desc = *desc;
	img->elem = elem;
	m->image = img;
	m->type = desc->image_type;
	if (props && !(m->props = calloc(1, sizeof(*m->props)))) {
		cmx_mem_free(m);
		if (packed != host_ptr)
			free(packed);
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	}
	m->nprops = props ? 1 : 0;
	fmt[0] = format->image_channel_order;
	fmt[1] = format->image_channel_data_type;
	dv[0] = d.image_type, dv[1] = d.image_width, dv[2] = d.image_height;
	dv[3] = d.image_depth, dv[4] = d.image_array_size, dv[5] = d.image_row_pitch;
	dv[6] = d.image_slice_pitch, dv[7] = d.num_mip_levels, dv[8] = d.num_samples;
	in = (struct cmx_CreateImage_in){.mem = {m->id},
					 .context = {ctx->id},
					 .flags = flags,
					 .format = {fmt, 2},
					 .desc = {dv, 9},
					 .buffer = {buf ? buf->id : 0}};
	e = cmx_rpc_CreateImage(cmx_icd.s, &in, packed, bytes, &out, &r);
	if (packed != host_ptr)
		free(packed);
	if (e) {
		e = cmx_transport_err(e);
	} else {
		e = r.status;
		m->size = out.size;
		cmx_reply_fini(&r);
	}
	if (e) {
		cmx_mem_free(m);
		return cmx_fail(errcode_ret, e);
	}
	if (flags & CL_MEM_USE_HOST_PTR)
		m->host_ptr = host_ptr;
	if (buf) {
		/* The memory object it views outlives it, here and (by the order
		 * of releases) in the daemon. */
		m->parent = buf;
		cmx_clRetainMemObject(buf);
	}
	cmx_clRetainContext(ctx);
	return cmx_succeed(errcode_ret, m);
}

cl_mem cmx_clCreateImage(cl_context ctx, cl_mem_flags flags, const cl_image_format *format,
			 const cl_image_desc *desc, void *host_ptr, cl_int *errcode_ret)
{
	return image_create(ctx, NULL, flags, format, desc, host_ptr, errcode_ret);
}

cl_mem cmx_clCreateImageWithProperties(cl_context ctx, const cl_mem_properties *props,
				       cl_mem_flags flags, const cl_image_format *format,
				       const cl_image_desc *desc, void *host_ptr,
				       cl_int *errcode_ret)
{
	return image_create(ctx, props, flags, format, desc, host_ptr, errcode_ret);
}

cl_mem cmx_clCreateImage2D(cl_context ctx, cl_mem_flags flags, const cl_image_format *format,
			   size_t width, size_t height, size_t row_pitch, void *host_ptr,
			   cl_int *errcode_ret)
{
	cl_image_desc d = {.image_type = CL_MEM_OBJECT_IMAGE2D,
			   .image_width = width,
			   .image_height = height,
			   .image_row_pitch = row_pitch};

	return image_create(ctx, NULL, flags, format, &d, host_ptr, errcode_ret);
}

cl_mem cmx_clCreateImage3D(cl_context ctx, cl_mem_flags flags, const cl_image_format *format,
			   size_t width, size_t height, size_t depth, size_t row_pitch,
			   size_t slice_pitch, void *host_ptr, cl_int *errcode_ret)
{
	cl_image_desc d = {.image_type = CL_MEM_OBJECT_IMAGE3D,
			   .image_width = width,
			   .image_height = height,
			   .image_depth = depth,
			   .image_row_pitch = row_pitch,
			   .image_slice_pitch = slice_pitch};

	return image_create(ctx, NULL, flags, format, &d, host_ptr, errcode_ret);
}

/* ---- formats: asked once per context, flags and type ---- */

static cl_int formats_load(cl_context ctx, cl_mem_flags flags, cl_mem_object_type type,
			   struct cmx_formats **out)
{
	struct cmx_GetSupportedImageFormats_in in = {
	    .context = {ctx->id}, .flags = flags, .type = type};
	struct cmx_GetSupportedImageFormats_out o;
	struct cmx_formats *f;
	struct cmx_reply r;
	int e = cmx_rpc_GetSupportedImageFormats(cmx_icd.s, &in, &o, &r);
	cl_int status;

	if (e)
		return cmx_transport_err(e);
	status = r.status;
	if (status || o.formats.n > 65536) {
		cmx_reply_fini(&r);
		return status ? status : CL_OUT_OF_RESOURCES;
	}
	f = calloc(1, sizeof(*f) + o.formats.n * sizeof(f->v[0]));
	if (!f) {
		cmx_reply_fini(&r);
		return CL_OUT_OF_HOST_MEMORY;
	}
	f->flags = flags;
	f->type = type;
	f->n = (cl_uint)o.formats.n;
	for (cl_uint i = 0; i < f->n; i++) {
		f->v[i].image_channel_order = (cl_channel_order)(uint32_t)o.formats.v[i];
		f->v[i].image_channel_data_type = (cl_channel_type)(o.formats.v[i] >> 32);
	}
	cmx_reply_fini(&r);
	*out = f;
	return CL_SUCCESS;
}

/* The cached answer for (flags, type), asked for on first use. */
static cl_int formats_get(cl_context ctx, cl_mem_flags flags, cl_mem_object_type type,
			  const struct cmx_formats **out)
{
	struct cmx_formats *f;
	cl_int e;

	pthread_mutex_lock(&ctx->lock);
	for (f = ctx->formats; f && (f->flags != flags || f->type != type); f = f->next)
		;
	pthread_mutex_unlock(&ctx->lock);
	if (!f) {
		e = formats_load(ctx, flags, type, &f);
		if (e)
			return e;
		/* Two threads may both have asked: either answer will do. */
		pthread_mutex_lock(&ctx->lock);
		f->next = ctx->formats;
		ctx->formats = f;
		pthread_mutex_unlock(&ctx->lock);
	}
	*out = f;
	return CL_SUCCESS;
}

static int format_listed(const struct cmx_formats *f, const cl_image_format *want)
{
	for (cl_uint i = 0; i < f->n; i++)
		if (f->v[i].image_channel_order == want->image_channel_order &&
		    f->v[i].image_channel_data_type == want->image_channel_data_type)
			return 1;
	return 0;
}

cl_int cmx_clGetSupportedImageFormats(cl_context ctx, cl_mem_flags flags, cl_mem_object_type type,
				      cl_uint nentries, cl_image_format *formats, cl_uint *nformats)
{
	const struct cmx_formats *f;
	cl_int e;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT))
		return CL_INVALID_CONTEXT;
	if (cmx_mem_flags_check(flags & ~(cl_mem_flags)CL_MEM_KERNEL_READ_AND_WRITE) ||
	    (!nentries && formats) || !is_image_type(type))
		return CL_INVALID_VALUE;
	if (!ctx_has_images(ctx)) {
		if (nformats)
			*nformats = 0;
		return CL_SUCCESS;
	}
	e = formats_get(ctx, flags, type, &f);
	if (e)
		return e;
	if (formats)
		memcpy(formats, f->v, (nentries < f->n ? nentries : f->n) * sizeof(*formats));
	if (nformats)
		*nformats = f->n;
	return CL_SUCCESS;
}

cl_int cmx_clGetImageInfo(cl_mem m, cl_image_info param, size_t size, void *value,
			  size_t *size_ret)
{
	struct cmx_GetImageInfo_in in;
	struct cmx_GetImageInfo_out out;
	struct cmx_reply r;

	if (!CMX_IS(m, CMX_MAGIC_MEM) || !m->image)
		return CL_INVALID_MEM_OBJECT;
	if (param == CL_IMAGE_BUFFER) {
		cl_mem b = m->image->desc.image_type == CL_MEM_OBJECT_IMAGE1D_BUFFER ? m->parent : NULL;
		return cmx_info_copy(size, value, size_ret, &b, sizeof(b));
	}
	if (param == CL_IMAGE_FORMAT)
		return cmx_info_copy(size, value, size_ret, &m->image->format,
				     sizeof(m->image->format));
	in = (struct cmx_GetImageInfo_in){.mem = {m->id}, .param = param};
	return cmx_info_reply(cmx_rpc_GetImageInfo(cmx_icd.s, &in, &out, &r), &r, &out.value, size,
			      value, size_ret);
}

/* ---- commands ---- */

cl_int cmx_image_check(cl_command_queue q, cl_mem m)
{
	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (!CMX_IS(m, CMX_MAGIC_MEM) || !m->image)
		return CL_INVALID_MEM_OBJECT;
	if (m->ctx != q->ctx)
		return CL_INVALID_CONTEXT;
	return ctx_has_images(q->ctx) ? CL_SUCCESS : CL_INVALID_OPERATION;
}

cl_int cmx_image_region_check(cl_mem m, const size_t *o, const size_t *r)
{
	const cl_image_desc *d = &m->image->desc;
	uint64_t ext[3], o64[3], r64[3];

	if (!o || !r)
		return CL_INVALID_VALUE;
	for (int i = 0; i < 3; i++)
		o64[i] = o[i], r64[i] = r[i];
	if (cmx_cl_image_extent(d->image_type, d->image_width, d->image_height, d->image_depth,
				d->image_array_size, ext) ||
	    cmx_cl_box_bad(ext, o64, r64))
		return CL_INVALID_VALUE;
	return CL_SUCCESS;
}

/* A host region's geometry: w bytes a row, rows, slices, and the
 * application's pitches (defaults filled; a 1D array's rows are its
 * images, slice_pitch apart). */
struct host_region {
	uint64_t o[3], r[3]; /* for the wire */
	size_t w, rows, slices, row, slice, packed;
};

static cl_int host_region(cl_mem m, const size_t *o, const size_t *r, size_t row, size_t slice,
			  struct host_region *h)
{
	cl_int e = cmx_image_region_check(m, o, r);

	if (e)
		return e;
	for (int i = 0; i < 3; i++)
		h->o[i] = o[i], h->r[i] = r[i];
	/* No overflow: the region fits in the image, whose size fits. */
	h->w = r[0] * m->image->elem;
	h->rows = r[1];
	h->slices = r[2];
	h->packed = h->w * r[1] * r[2];
	if (!row)
		row = h->w;
	else if (row < h->w)
		return CL_INVALID_VALUE;
	if (m->image->desc.image_type == CL_MEM_OBJECT_IMAGE1D_ARRAY) {
		h->row = slice ? slice : row;
		if (h->row < h->w)
			return CL_INVALID_VALUE;
		h->slice = h->row * r[1];
		return CL_SUCCESS;
	}
	h->row = row;
	if (!slice)
		slice = row * r[1];
	else if (r[2] > 1 && slice < row * r[1])
		return CL_INVALID_VALUE;
	h->slice = slice;
	return CL_SUCCESS;
}

static int region_is_packed(const struct host_region *h)
{
	return (h->rows == 1 || h->row == h->w) && (h->slices == 1 || h->slice == h->w * h->rows);
}

cl_int cmx_clEnqueueReadImage(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t *origin,
			      const size_t *region, size_t row_pitch, size_t slice_pitch, void *ptr,
			      cl_uint n, const cl_event *list, cl_event *event)
{
	struct cmx_ReadImage_in in;
	struct cmx_pending_read *p;
	struct host_region h;
	struct cmx_cmd c;
	void *tmp;
	cl_int e = cmx_image_check(q, m);

	if (!e)
		e = host_region(m, origin, region, row_pitch, slice_pitch, &h);
	if (!e && !ptr)
		e = CL_INVALID_VALUE;
	if (!e)
		e = cmx_mem_host_access(m, 1, 0);
	if (e)
		return e;
	tmp = region_is_packed(&h) ? ptr : malloc(h.packed);
	if (!tmp)
		return CL_OUT_OF_HOST_MEMORY;
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_READ_IMAGE);
	if (e)
		goto out_tmp;
	in = (struct cmx_ReadImage_in){.queue = {q->id},
				       .mem = {m->id},
				       .origin = {h.o, 3},
				       .region = {h.r, 3},
				       .wait = CMD_WAIT(&c),
				       .event = {c.ev_id}};
	if (blocking) {
		struct cmx_ReadImage_out o;
		struct cmx_reply r;

		e = cmx_reply_status(cmx_rpc_ReadImage(cmx_icd.s, &in, &o, &r, tmp, h.packed), &r);
		if (!e && tmp != ptr)
			cmx_pitched_copy(ptr, tmp, h.w, h.rows, h.slices, h.row, h.slice, 0);
		e = cmx_cmd_end(&c, e);
		if (!e)
			cmx_blocking_done(q, n, list);
		goto out_tmp;
	}
	p = cmx_pending_new(q, c.ev, tmp, h.packed);
	if (!p) {
		e = cmx_cmd_end(&c, CL_OUT_OF_HOST_MEMORY);
		goto out_tmp;
	}
	if (tmp != ptr) {
		/* cmx_read_landed() spreads it out and frees tmp. */
		p->out = ptr;
		p->region[0] = h.w, p->region[1] = h.rows, p->region[2] = h.slices;
		p->row_pitch = h.row;
		p->slice_pitch = h.slice;
	}
	in.tag = (uintptr_t)p;
	e = cmx_pending_send(p, &cmx_desc_ReadImage_in, &in, 0);
	return cmx_cmd_end(&c, e);

out_tmp:
	if (tmp != ptr)
		free(tmp);
	return e;
}

/* Reads the packed region into dst: blocking, it is there on return;
 * otherwise finish(arg) runs when it lands (guest/map.c's image maps). */
cl_int cmx_image_read_packed(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t *origin,
			     const size_t *region, void *dst, struct cmx_cmd *c,
			     void (*finish)(struct cmx_pending_read *, int), void *arg)
{
	struct cmx_pending_read *p;
	struct cmx_ReadImage_in in;
	struct host_region h;
	cl_int e = host_region(m, origin, region, 0, 0, &h);

	if (e)
		return e;
	in = (struct cmx_ReadImage_in){.queue = {q->id},
				       .mem = {m->id},
				       .origin = {h.o, 3},
				       .region = {h.r, 3},
				       .wait = CMD_WAIT(c),
				       .event = {c->ev_id}};
	if (blocking) {
		struct cmx_ReadImage_out o;
		struct cmx_reply r;

		return cmx_reply_status(cmx_rpc_ReadImage(cmx_icd.s, &in, &o, &r, dst, h.packed),
					&r);
	}
	p = cmx_pending_new(q, c->ev, dst, h.packed);
	if (!p)
		return CL_OUT_OF_HOST_MEMORY;
	p->finish = finish;
	p->arg = arg;
	in.tag = (uintptr_t)p;
	return cmx_pending_send(p, &cmx_desc_ReadImage_in, &in, 0);
}

/* Sends a write of packed data (the data leaves with the command). */
cl_int cmx_image_write_packed(cl_command_queue q, cl_mem m, cl_bool blocking, const uint64_t o[3],
			      const uint64_t r[3], const void *data, size_t len, struct cmx_cmd *c)
{
	struct cmx_WriteImage_in in = {.queue = {q->id},
				       .mem = {m->id},
				       .origin = {o, 3},
				       .region = {r, 3},
				       .wait = CMD_WAIT(c),
				       .event = {c->ev_id}};

	if (blocking) {
		struct cmx_WriteImage_out out;
		struct cmx_reply rep;

		return cmx_reply_status(cmx_rpc_WriteImage(cmx_icd.s, &in, data, len, &out, &rep),
					&rep);
	}
	return CMX_SEND(WriteImage, &in, data, len);
}

cl_int cmx_clEnqueueWriteImage(cl_command_queue q, cl_mem m, cl_bool blocking, const size_t *origin,
			       const size_t *region, size_t row_pitch, size_t slice_pitch,
			       const void *ptr, cl_uint n, const cl_event *list, cl_event *event)
{
	struct host_region h;
	struct cmx_cmd c;
	void *tmp;
	cl_int e = cmx_image_check(q, m);

	if (!e)
		e = host_region(m, origin, region, row_pitch, slice_pitch, &h);
	if (!e && !ptr)
		e = CL_INVALID_VALUE;
	if (!e)
		e = cmx_mem_host_access(m, 0, 1);
	if (e)
		return e;
	tmp = region_is_packed(&h) ? (void *)ptr : malloc(h.packed);
	if (!tmp)
		return CL_OUT_OF_HOST_MEMORY;
	if (tmp != ptr)
		cmx_pitched_copy((char *)ptr, tmp, h.w, h.rows, h.slices, h.row, h.slice, 1);
	e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_WRITE_IMAGE);
	if (!e) {
		e = cmx_cmd_end(&c, cmx_image_write_packed(q, m, blocking, h.o, h.r, tmp, h.packed,
							   &c));
		if (!e && blocking)
			cmx_blocking_done(q, n, list);
	}
	if (tmp != ptr)
		free(tmp);
	return e;
}

static int same_format(const cl_image_format *a, const cl_image_format *b)
{
	return a->image_channel_order == b->image_channel_order &&
	       a->image_channel_data_type == b->image_channel_data_type;
}

/* Two boxes of one image share a pixel. */
static int boxes_meet(const size_t *a, const size_t *b, const size_t *r)
{
	for (int i = 0; i < 3; i++)
		if (a[i] + r[i] <= b[i] || b[i] + r[i] <= a[i])
			return 0;
	return 1;
}

static void u64x3(uint64_t *out, const size_t *in)
{
	for (int i = 0; i < 3; i++)
		out[i] = in[i];
}

cl_int cmx_copy_image_check(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
			    const size_t *dor, const size_t *region)
{
	cl_int e = cmx_image_check(q, src);

	if (!e)
		e = cmx_image_check(q, dst);
	if (e)
		return e;
	if (!same_format(&src->image->format, &dst->image->format))
		return CL_IMAGE_FORMAT_MISMATCH;
	if ((e = cmx_image_region_check(src, so, region)) ||
	    (e = cmx_image_region_check(dst, dor, region)))
		return e;
	if (src == dst && boxes_meet(so, dor, region))
		return CL_MEM_COPY_OVERLAP;
	return CL_SUCCESS;
}

cl_int cmx_clEnqueueCopyImage(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
			      const size_t *dor, const size_t *region, cl_uint n,
			      const cl_event *list, cl_event *event)
{
	struct cmx_CopyImage_in in;
	uint64_t s64[3], d64[3], r64[3];
	struct cmx_cmd c;
	cl_int e = cmx_copy_image_check(q, src, dst, so, dor, region);

	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_COPY_IMAGE)))
		return e;
	u64x3(s64, so), u64x3(d64, dor), u64x3(r64, region);
	in = (struct cmx_CopyImage_in){.queue = {q->id},
				       .src = {src->id},
				       .dst = {dst->id},
				       .src_origin = {s64, 3},
				       .dst_origin = {d64, 3},
				       .region = {r64, 3},
				       .wait = CMD_WAIT(&c),
				       .event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(CopyImage, &in));
}

cl_int cmx_fill_image_check(cl_command_queue q, cl_mem m, const void *color, const size_t *origin,
			    const size_t *region, unsigned char col[16])
{
	cl_int e = cmx_image_check(q, m);

	if (!e)
		e = cmx_image_region_check(m, origin, region);
	if (!e && !color)
		e = CL_INVALID_VALUE;
	if (e)
		return e;
	/* A depth image's color is one float; every other, four components. */
	memset(col, 0, 16);
	memcpy(col, color, m->image->format.image_channel_order == CL_DEPTH ? 4 : 16);
	return CL_SUCCESS;
}

cl_int cmx_clEnqueueFillImage(cl_command_queue q, cl_mem m, const void *color, const size_t *origin,
			      const size_t *region, cl_uint n, const cl_event *list,
			      cl_event *event)
{
	unsigned char col[16];
	uint64_t o64[3], r64[3];
	struct cmx_FillImage_in in;
	struct cmx_cmd c;
	cl_int e = cmx_fill_image_check(q, m, color, origin, region, col);

	if (e || (e = cmx_cmd_begin(&c, q, n, list, event, CL_COMMAND_FILL_IMAGE)))
		return e;
	u64x3(o64, origin), u64x3(r64, region);
	in = (struct cmx_FillImage_in){.queue = {q->id},
				       .mem = {m->id},
				       .color = {col, sizeof(col)},
				       .origin = {o64, 3},
				       .region = {r64, 3},
				       .wait = CMD_WAIT(&c),
				       .event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(FillImage, &in));
}

cl_int cmx_image_buffer_check(cl_command_queue q, cl_mem img, cl_mem buf, size_t off,
			      const size_t *origin, const size_t *region)
{
	size_t bytes;
	cl_int e = cmx_image_check(q, img);

	if (!e)
		e = cmx_image_region_check(img, origin, region);
	if (e)
		return e;
	if (!CMX_IS(buf, CMX_MAGIC_MEM) || buf->type != CL_MEM_OBJECT_BUFFER)
		return CL_INVALID_MEM_OBJECT;
	if (buf->ctx != q->ctx)
		return CL_INVALID_CONTEXT;
	/* The image region was checked: its byte count does not overflow. */
	bytes = img->image->elem * region[0] * region[1] * region[2];
	if (off > buf->size || bytes > buf->size - off)
		return CL_INVALID_VALUE;
	return CL_SUCCESS;
}

/* The checks of an image <-> buffer copy, then its command. */
static cl_int image_buffer_begin(struct cmx_cmd *c, cl_command_queue q, cl_mem img, cl_mem buf,
				 size_t off, const size_t *origin, const size_t *region,
				 cl_uint n, const cl_event *list, cl_event *event,
				 cl_command_type type)
{
	cl_int e = cmx_image_buffer_check(q, img, buf, off, origin, region);

	return e ? e : cmx_cmd_begin(c, q, n, list, event, type);
}

cl_int cmx_clEnqueueCopyImageToBuffer(cl_command_queue q, cl_mem src, cl_mem dst, const size_t *so,
				      const size_t *region, size_t doff, cl_uint n,
				      const cl_event *list, cl_event *event)
{
	struct cmx_CopyImageToBuffer_in in;
	uint64_t o64[3], r64[3];
	struct cmx_cmd c;
	cl_int e = image_buffer_begin(&c, q, src, dst, doff, so, region, n, list, event,
				      CL_COMMAND_COPY_IMAGE_TO_BUFFER);

	if (e)
		return e;
	u64x3(o64, so), u64x3(r64, region);
	in = (struct cmx_CopyImageToBuffer_in){.queue = {q->id},
					       .src = {src->id},
					       .dst = {dst->id},
					       .src_origin = {o64, 3},
					       .region = {r64, 3},
					       .dst_offset = doff,
					       .wait = CMD_WAIT(&c),
					       .event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(CopyImageToBuffer, &in));
}

cl_int cmx_clEnqueueCopyBufferToImage(cl_command_queue q, cl_mem src, cl_mem dst, size_t soff,
				      const size_t *dor, const size_t *region, cl_uint n,
				      const cl_event *list, cl_event *event)
{
	struct cmx_CopyBufferToImage_in in;
	uint64_t o64[3], r64[3];
	struct cmx_cmd c;
	cl_int e = image_buffer_begin(&c, q, dst, src, soff, dor, region, n, list, event,
				      CL_COMMAND_COPY_BUFFER_TO_IMAGE);

	if (e)
		return e;
	u64x3(o64, dor), u64x3(r64, region);
	in = (struct cmx_CopyBufferToImage_in){.queue = {q->id},
					       .src = {src->id},
					       .dst = {dst->id},
					       .src_offset = soff,
					       .dst_origin = {o64, 3},
					       .region = {r64, 3},
					       .wait = CMD_WAIT(&c),
					       .event = {c.ev_id}};
	return cmx_cmd_end(&c, CMX_SEND(CopyBufferToImage, &in));
}

/* ---- samplers: every answer is kept here ---- */

static cl_sampler sampler_create(cl_context ctx, cl_bool norm, cl_addressing_mode addr,
				 cl_filter_mode filter, const cl_sampler_properties *props,
				 size_t nprops, cl_int *errcode_ret)
{
	uint64_t wire[6] = {CL_SAMPLER_NORMALIZED_COORDS, norm, CL_SAMPLER_ADDRESSING_MODE, addr,
			    CL_SAMPLER_FILTER_MODE, filter};
	struct cmx_CreateSampler_in in;
	cl_sampler s;
	cl_int e;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT))
		return cmx_fail(errcode_ret, CL_INVALID_CONTEXT);
	if ((norm != CL_TRUE && norm != CL_FALSE) ||
	    (addr != CL_ADDRESS_NONE && addr != CL_ADDRESS_CLAMP_TO_EDGE &&
	     addr != CL_ADDRESS_CLAMP && addr != CL_ADDRESS_REPEAT &&
	     addr != CL_ADDRESS_MIRRORED_REPEAT) ||
	    (filter != CL_FILTER_NEAREST && filter != CL_FILTER_LINEAR))
		return cmx_fail(errcode_ret, CL_INVALID_VALUE);
	if (!ctx_has_images(ctx))
		return cmx_fail(errcode_ret, CL_INVALID_OPERATION);
	s = cmx_object_new(sizeof(*s), CMX_MAGIC_SAMPLER);
	if (!s)
		return cmx_fail(errcode_ret, CL_OUT_OF_HOST_MEMORY);
	s->ctx = ctx;
	s->normalized = norm;
	s->addressing = addr;
	s->filter = filter;
	if (nprops)
		memcpy(s->props, props, nprops * sizeof(*props));
	s->nprops = nprops;
	in = (struct cmx_CreateSampler_in){
	    .sampler = {s->id}, .context = {ctx->id}, .props = {wire, 6}};
	e = CMX_SEND(CreateSampler, &in);
	if (e) {
		free(s);
		return cmx_fail(errcode_ret, e);
	}
	cmx_clRetainContext(ctx);
	return cmx_succeed(errcode_ret, s);
}

cl_sampler cmx_clCreateSampler(cl_context ctx, cl_bool normalized, cl_addressing_mode addressing,
			       cl_filter_mode filter, cl_int *errcode_ret)
{
	return sampler_create(ctx, normalized, addressing, filter, NULL, 0, errcode_ret);
}

cl_sampler cmx_clCreateSamplerWithProperties(cl_context ctx, const cl_sampler_properties *props,
					     cl_int *errcode_ret)
{
	cl_bool norm = CL_TRUE;
	cl_addressing_mode addr = CL_ADDRESS_CLAMP;
	cl_filter_mode filter = CL_FILTER_NEAREST;
	unsigned seen = 0;
	size_t n = 0;

	if (!CMX_IS(ctx, CMX_MAGIC_CONTEXT))
		return cmx_fail(errcode_ret, CL_INVALID_CONTEXT);
	for (; props && props[n]; n += 2) {
		unsigned bit;

		switch (props[n]) {
		case CL_SAMPLER_NORMALIZED_COORDS:
			bit = 1, norm = (cl_bool)props[n + 1];
			break;
		case CL_SAMPLER_ADDRESSING_MODE:
			bit = 2, addr = (cl_addressing_mode)props[n + 1];
			break;
		case CL_SAMPLER_FILTER_MODE:
			bit = 4, filter = (cl_filter_mode)props[n + 1];
			break;
		default:
			return cmx_fail(errcode_ret, CL_INVALID_VALUE);
		}
		if (seen & bit)
			return cmx_fail(errcode_ret, CL_INVALID_VALUE);
		seen |= bit;
	}
	return sampler_create(ctx, norm, addr, filter, props, props ? n + 1 : 0, errcode_ret);
}

cl_int cmx_clRetainSampler(cl_sampler s)
{
	if (!CMX_IS(s, CMX_MAGIC_SAMPLER))
		return CL_INVALID_SAMPLER;
	atomic_fetch_add(&s->refs, 1);
	return CL_SUCCESS;
}

cl_int cmx_clReleaseSampler(cl_sampler s)
{
	struct cmx_ReleaseSampler_in in;
	cl_context ctx;

	if (!CMX_IS(s, CMX_MAGIC_SAMPLER))
		return CL_INVALID_SAMPLER;
	if (atomic_fetch_sub(&s->refs, 1) != 1)
		return CL_SUCCESS;
	s->magic = 0;
	ctx = s->ctx;
	in.sampler.id = s->id;
	CMX_SEND(ReleaseSampler, &in);
	free(s);
	cmx_clReleaseContext(ctx);
	return CL_SUCCESS;
}

cl_int cmx_clGetSamplerInfo(cl_sampler s, cl_sampler_info param, size_t size, void *value,
			    size_t *size_ret)
{
	union {
		cl_uint u;
		cl_context ctx;
		cl_bool b;
		cl_addressing_mode a;
		cl_filter_mode f;
	} v;
	size_t n;

	if (!CMX_IS(s, CMX_MAGIC_SAMPLER))
		return CL_INVALID_SAMPLER;
	switch (param) {
	case CL_SAMPLER_REFERENCE_COUNT:
		v.u = atomic_load(&s->refs), n = sizeof(v.u);
		break;
	case CL_SAMPLER_CONTEXT:
		v.ctx = s->ctx, n = sizeof(v.ctx);
		break;
	case CL_SAMPLER_NORMALIZED_COORDS:
		v.b = s->normalized, n = sizeof(v.b);
		break;
	case CL_SAMPLER_ADDRESSING_MODE:
		v.a = s->addressing, n = sizeof(v.a);
		break;
	case CL_SAMPLER_FILTER_MODE:
		v.f = s->filter, n = sizeof(v.f);
		break;
	case CL_SAMPLER_PROPERTIES:
		return cmx_info_copy(size, value, size_ret, s->props, s->nprops * sizeof(*s->props));
	default:
		return CL_INVALID_VALUE;
	}
	return cmx_info_copy(size, value, size_ret, &v, n);
}
