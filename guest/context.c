// SPDX-License-Identifier: MIT
// The lifetimes of contexts and of the devices they hold (sub-devices
// counted; the daemon's devices live as long as the platform).
#include <stdlib.h>

#include "entry.h"
#include "icd.h"

/* A sub-device's memory; its daemon id is released by the caller. */
void cmx_subdevice_free(cl_device_id d)
{
	d->magic = 0;
	for (size_t k = 0; k < sizeof(d->owned) / sizeof(*d->owned); k++)
		free(d->owned[k]);
	free(d->info);
	free(d->info_blob);
	free(d);
}

void cmx_subdevice_release_id(uint64_t id)
{
	struct cmx_ReleaseDevice_in in = { .device.id = id };

	(void)CMX_SEND(ReleaseDevice, &in);
}

cl_int cmx_clRetainDevice(cl_device_id d)
{
	if (!CMX_IS(d, CMX_MAGIC_DEVICE))
		return CL_INVALID_DEVICE;
	if (d->parent)
		atomic_fetch_add(&d->refs, 1);
	return CL_SUCCESS;
}

cl_int cmx_clReleaseDevice(cl_device_id d)
{
	cl_device_id parent;

	if (!CMX_IS(d, CMX_MAGIC_DEVICE))
		return CL_INVALID_DEVICE;
	if (!d->parent || atomic_fetch_sub(&d->refs, 1) != 1)
		return CL_SUCCESS;
	parent = d->parent;
	cmx_subdevice_release_id(d->id);
	cmx_subdevice_free(d);
	return cmx_clReleaseDevice(parent);
}

/* ---- contexts -------------------------------------------------------- */

/* The cached clGetSupportedImageFormats answers (guest/image.c). */
static void formats_free(cl_context c)
{
	for (struct cmx_formats *f = c->formats, *next; f; f = next) {
		next = f->next;
		free(f);
	}
	c->formats = NULL;
}

cl_int cmx_clRetainContext(cl_context c)
{
	if (!CMX_IS(c, CMX_MAGIC_CONTEXT))
		return CL_INVALID_CONTEXT;
	atomic_fetch_add(&c->refs, 1);
	return CL_SUCCESS;
}

cl_int cmx_clReleaseContext(cl_context c)
{
	struct cmx_ReleaseContext_in in;

	if (!CMX_IS(c, CMX_MAGIC_CONTEXT))
		return CL_INVALID_CONTEXT;
	if (atomic_fetch_sub(&c->refs, 1) != 1)
		return CL_SUCCESS;
	in.context.id = c->id;
	CMX_SEND(ReleaseContext, &in);
	/* Destructor callbacks run last-registered first (spec 5.2). */
	for (struct cmx_destructor *d = c->destructors, *next; d; d = next) {
		next = d->next;
		d->fn(c, d->user_data);
		free(d);
	}
	c->magic = 0;
	formats_free(c);
	pthread_mutex_destroy(&c->lock);
	for (cl_uint i = 0; i < c->ndevices; i++)
		cmx_clReleaseDevice(c->devices[i]);
	free(c->devices);
	free(c->props);
	free(c);
	return CL_SUCCESS;
}

cl_int cmx_clGetContextInfo(cl_context c, cl_context_info param, size_t size, void *value,
				   size_t *size_ret)
{
	cl_uint refs;

	if (!CMX_IS(c, CMX_MAGIC_CONTEXT))
		return CL_INVALID_CONTEXT;
	switch (param) {
	case CL_CONTEXT_REFERENCE_COUNT:
		refs = atomic_load(&c->refs);
		return cmx_info_copy(size, value, size_ret, &refs, sizeof(refs));
	case CL_CONTEXT_NUM_DEVICES:
		return cmx_info_copy(size, value, size_ret, &c->ndevices, sizeof(c->ndevices));
	case CL_CONTEXT_DEVICES:
		return cmx_info_copy(size, value, size_ret, c->devices,
				     c->ndevices * sizeof(*c->devices));
	case CL_CONTEXT_PROPERTIES:
		return cmx_info_copy(size, value, size_ret, c->props, c->nprops * sizeof(*c->props));
	}
	return CL_INVALID_VALUE;
}

cl_int cmx_clSetContextDestructorCallback(cl_context c,
						 void(CL_CALLBACK *fn)(cl_context, void *),
						 void *user_data)
{
	struct cmx_destructor *d;

	if (!CMX_IS(c, CMX_MAGIC_CONTEXT))
		return CL_INVALID_CONTEXT;
	if (!fn)
		return CL_INVALID_VALUE;
	d = malloc(sizeof(*d));
	if (!d)
		return CL_OUT_OF_HOST_MEMORY;
	d->fn = (void(CL_CALLBACK *)(void *, void *))fn;
	d->user_data = user_data;
	pthread_mutex_lock(&c->lock);
	d->next = c->destructors;
	c->destructors = d;
	pthread_mutex_unlock(&c->lock);
	return CL_SUCCESS;
}
