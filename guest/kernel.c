// SPDX-License-Identifier: MIT
// Kernels: creation from the cached kernel info, arguments checked in the
// guest and sent without a round trip, queries, and launches.
#define _GNU_SOURCE /* process_vm_readv */
#include "command.h"
#include "icd.h"
#include "object.h"
#include "program.h"
#include "entry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clcheck.h"
#include "log.h"

/* The schema's limit on a by-value argument (SetKernelArg's value). */
#define KERNEL_MAX_VALUE 65536u

/* The last value given for one argument, so a clone can be made where the
 * daemon's platform has no clCloneKernel. */
struct cmx_argval {
	uint64_t kind; /* enum cmx_arg: SetKernelArg's */
	uint64_t id;   /* mem or sampler */
	uint64_t size;
	void *bytes; /* CMX_ARG_VALUE */
	size_t cap;
};

/* One cached clGetKernelWorkGroupInfo answer. */
struct cmx_wginfo {
	struct cmx_wginfo *next;
	cl_device_id device;
	cl_kernel_work_group_info param;
	size_t size;
	unsigned char value[];
};

/* Every kernel is made here, so its object carries this file's state after
 * the public part; all of it under k.lock. */
struct cmx_kernel {
	struct _cl_kernel k;
	struct cmx_argval *vals;
	struct cmx_wginfo *wg;
	size_t reqd[3]; /* reqd_work_group_size, 0 when none */
};

static struct cmx_kernel *kern_of(cl_kernel k)
{
	return (struct cmx_kernel *)k;
}

/* Any object: what CMX_OBJECT_HEAD puts first. */
struct cmx_head {
	CMX_OBJECT_HEAD;
};

static void set_err(cl_int *errcode_ret, cl_int e)
{
	if (errcode_ret)
		*errcode_ret = e;
}

/* "__attribute__((reqd_work_group_size(16, 1, 1 )))", as drivers print it. */
static void parse_reqd(const char *attrs, size_t reqd[3])
{
	const char *s = attrs ? strstr(attrs, "reqd_work_group_size(") : NULL;
	size_t x, y, z;

	reqd[0] = reqd[1] = reqd[2] = 0;
	if (s && sscanf(s + strlen("reqd_work_group_size("), " %zu , %zu , %zu", &x, &y, &z) == 3) {
		reqd[0] = x;
		reqd[1] = y;
		reqd[2] = z;
	}
}

/* ---- creation and reference counts ---- */

/* A kernel object for info of p; the caller has counted it in p's
 * kernels_alive and refs (under p->lock), which the kernel now owns. */
static cl_kernel kernel_alloc(cl_program p, const struct cmx_kinfo *info)
{
	struct cmx_kernel *ck = cmx_object_new(sizeof(*ck), CMX_MAGIC_KERNEL);
	size_t words = (info->nargs + 63) / 64;

	if (!ck)
		return NULL;
	ck->k.arg_set = calloc(words ? words : 1, sizeof(uint64_t));
	ck->vals = calloc(info->nargs ? info->nargs : 1, sizeof(*ck->vals));
	if (!ck->k.arg_set || !ck->vals) {
		free(ck->k.arg_set);
		free(ck->vals);
		free(ck);
		return NULL;
	}
	ck->k.program = p;
	ck->k.info = info;
	if (info->reqd_known)
		memcpy(ck->reqd, info->reqd, sizeof(ck->reqd));
	else
		parse_reqd(info->attributes, ck->reqd);
	pthread_mutex_init(&ck->k.lock, NULL);
	return &ck->k;
}

static void wg_cache_clear(struct cmx_kernel *ck)
{
	while (ck->wg) {
		struct cmx_wginfo *w = ck->wg;
		ck->wg = w->next;
		free(w);
	}
}

static void kernel_free(cl_kernel k)
{
	struct cmx_kernel *ck = kern_of(k);
	cl_program p = k->program;

	for (cl_uint i = 0; i < k->info->nargs; i++)
		free(ck->vals[i].bytes);
	wg_cache_clear(ck);
	free(ck->vals);
	free(k->arg_set);
	pthread_mutex_destroy(&k->lock);
	k->magic = 0;
	free(ck);
	/* Pairs with the increments in program_hold(). */
	atomic_fetch_sub(&p->kernels_alive, 1);
	cmx_clReleaseProgram(p);
}

/* Counts one more kernel of p; p->lock held. */
static void program_hold(cl_program p)
{
	atomic_fetch_add(&p->kernels_alive, 1);
	atomic_fetch_add(&p->refs, 1);
}

/* Undoes program_hold() for a kernel that was never made. */
static void program_unhold(cl_program p)
{
	atomic_fetch_sub(&p->kernels_alive, 1);
	cmx_clReleaseProgram(p);
}

static cl_int kernel_send_create(cl_kernel k)
{
	struct cmx_CreateKernel_in in = {
	    .kernel.id = k->id,
	    .program.id = k->program->id,
	    .name = {k->info->name, strlen(k->info->name) + 1},
	};

	return CMX_SEND(CreateKernel, &in);
}

cl_kernel CL_API_CALL cmx_clCreateKernel(cl_program program, const char *kernel_name,
					 cl_int *errcode_ret)
{
	const struct cmx_kinfo *info = NULL;
	cl_kernel k;
	cl_int e;

	if (!CMX_IS(program, CMX_MAGIC_PROGRAM)) {
		set_err(errcode_ret, CL_INVALID_PROGRAM);
		return NULL;
	}
	if (!kernel_name) {
		set_err(errcode_ret, CL_INVALID_VALUE);
		return NULL;
	}
	pthread_mutex_lock(&program->lock);
	if (!program->built) {
		pthread_mutex_unlock(&program->lock);
		set_err(errcode_ret, CL_INVALID_PROGRAM_EXECUTABLE);
		return NULL;
	}
	for (cl_uint i = 0; i < program->nkernels && !info; i++)
		if (!strcmp(program->kernels[i].name, kernel_name))
			info = &program->kernels[i];
	if (!info) {
		pthread_mutex_unlock(&program->lock);
		set_err(errcode_ret, CL_INVALID_KERNEL_NAME);
		return NULL;
	}
	/* Counted under the lock, so that no build starts meanwhile and
	 * frees info under us. */
	program_hold(program);
	pthread_mutex_unlock(&program->lock);

	k = kernel_alloc(program, info);
	if (!k) {
		program_unhold(program);
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	e = kernel_send_create(k);
	if (e) {
		kernel_free(k);
		set_err(errcode_ret, e);
		return NULL;
	}
	set_err(errcode_ret, CL_SUCCESS);
	return k;
}

cl_int CL_API_CALL cmx_clCreateKernelsInProgram(cl_program program, cl_uint num_kernels,
						cl_kernel *kernels, cl_uint *num_kernels_ret)
{
	cl_uint n;
	cl_int e = CL_SUCCESS;

	if (!CMX_IS(program, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	pthread_mutex_lock(&program->lock);
	if (!program->built) {
		pthread_mutex_unlock(&program->lock);
		return CL_INVALID_PROGRAM_EXECUTABLE;
	}
	n = program->nkernels;
	if (kernels && num_kernels < n) {
		pthread_mutex_unlock(&program->lock);
		return CL_INVALID_VALUE;
	}
	if (kernels)
		for (cl_uint i = 0; i < n; i++)
			program_hold(program);
	pthread_mutex_unlock(&program->lock);

	if (kernels) {
		cl_uint made = 0, held = n;

		for (; made < n; made++) {
			kernels[made] = kernel_alloc(program, &program->kernels[made]);
			if (!kernels[made]) {
				e = CL_OUT_OF_HOST_MEMORY;
				break;
			}
			e = kernel_send_create(kernels[made]);
			if (e) {
				/* Gives back this kernel's hold. */
				kernel_free(kernels[made]);
				kernels[made] = NULL;
				held--;
				break;
			}
		}
		if (e) {
			/* The holds no kernel took, then the kernels made. */
			for (cl_uint i = made; i < held; i++)
				program_unhold(program);
			for (cl_uint i = 0; i < made; i++) {
				struct cmx_ReleaseKernel_in in = {.kernel.id = kernels[i]->id};
				(void)CMX_SEND(ReleaseKernel, &in);
				kernel_free(kernels[i]);
				kernels[i] = NULL;
			}
			return e;
		}
	}
	if (num_kernels_ret)
		*num_kernels_ret = n;
	return CL_SUCCESS;
}

static int device_version_at_least(cl_device_id d, int major, int minor)
{
	const struct cmx_devinfo *di = cmx_device_info(d, CL_DEVICE_VERSION);
	char buf[32];
	int ma = 0, mi = 0;

	if (!di || !di->size)
		return 0;
	snprintf(buf, sizeof(buf), "%.*s", (int)(di->size < 31 ? di->size : 31),
		 (const char *)di->value);
	if (sscanf(buf, "OpenCL %d.%d", &ma, &mi) != 2)
		return 0;
	return ma > major || (ma == major && mi >= minor);
}

static cl_int arg_send(cl_kernel k, cl_uint index, const struct cmx_argval *v)
{
	struct cmx_SetKernelArg_in in = {
	    .kernel.id = k->id,
	    .index = index,
	    .kind = v->kind,
	    .mem.id = v->kind == CMX_ARG_MEM ? v->id : 0,
	    .sampler.id = v->kind == CMX_ARG_SAMPLER ? v->id : 0,
	    .size = v->size,
	    .value = {v->kind == CMX_ARG_VALUE ? v->bytes : NULL,
		      v->kind == CMX_ARG_VALUE ? v->size : 0},
	};

	return CMX_SEND(SetKernelArg, &in);
}

cl_kernel CL_API_CALL cmx_clCloneKernel(cl_kernel source_kernel, cl_int *errcode_ret)
{
	struct cmx_kernel *src = kern_of(source_kernel), *dst;
	cl_program p;
	cl_kernel k;
	cl_uint nargs;
	int native;
	cl_int e = CL_SUCCESS;

	if (!CMX_IS(source_kernel, CMX_MAGIC_KERNEL)) {
		set_err(errcode_ret, CL_INVALID_KERNEL);
		return NULL;
	}
	p = source_kernel->program;
	nargs = source_kernel->info->nargs;
	pthread_mutex_lock(&p->lock);
	program_hold(p);
	pthread_mutex_unlock(&p->lock);
	k = kernel_alloc(p, source_kernel->info);
	if (!k) {
		program_unhold(p);
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	dst = kern_of(k);

	pthread_mutex_lock(&source_kernel->lock);
	memcpy(k->arg_set, source_kernel->arg_set, ((nargs + 63) / 64) * sizeof(uint64_t));
	for (cl_uint i = 0; i < nargs && !e; i++) {
		dst->vals[i] = src->vals[i];
		dst->vals[i].bytes = NULL;
		dst->vals[i].cap = 0;
		if (src->vals[i].kind == CMX_ARG_VALUE && src->vals[i].size) {
			dst->vals[i].bytes = malloc(src->vals[i].size);
			if (!dst->vals[i].bytes)
				e = CL_OUT_OF_HOST_MEMORY;
			else
				memcpy(dst->vals[i].bytes, src->vals[i].bytes, src->vals[i].size);
			dst->vals[i].cap = src->vals[i].size;
		}
	}
	pthread_mutex_unlock(&source_kernel->lock);
	if (e) {
		kernel_free(k);
		set_err(errcode_ret, e);
		return NULL;
	}

	/* The daemon clones natively where its platform can (2.1 and up);
	 * otherwise the clone is a new kernel given the same arguments. */
	native = p->ndevices > 0;
	for (cl_uint i = 0; i < p->ndevices; i++)
		native &= device_version_at_least(p->devices[i], 2, 1);
	if (native) {
		struct cmx_CloneKernel_in in = {.kernel.id = k->id, .source.id = source_kernel->id};
		e = CMX_SEND(CloneKernel, &in);
	} else {
		e = kernel_send_create(k);
		for (cl_uint i = 0; i < nargs && !e; i++)
			if (k->arg_set[i / 64] & (1ull << (i % 64)))
				e = arg_send(k, i, &dst->vals[i]);
	}
	if (e) {
		struct cmx_ReleaseKernel_in in = {.kernel.id = k->id};
		(void)CMX_SEND(ReleaseKernel, &in);
		kernel_free(k);
		set_err(errcode_ret, e);
		return NULL;
	}
	set_err(errcode_ret, CL_SUCCESS);
	return k;
}

cl_int CL_API_CALL cmx_clRetainKernel(cl_kernel kernel)
{
	if (!CMX_IS(kernel, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	atomic_fetch_add(&kernel->refs, 1);
	return CL_SUCCESS;
}

cl_int CL_API_CALL cmx_clReleaseKernel(cl_kernel kernel)
{
	struct cmx_ReleaseKernel_in in;

	if (!CMX_IS(kernel, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	if (atomic_fetch_sub(&kernel->refs, 1) != 1)
		return CL_SUCCESS;
	in.kernel.id = kernel->id;
	(void)CMX_SEND(ReleaseKernel, &in);
	kernel_free(kernel);
	return CL_SUCCESS;
}

/* ---- arguments ---- */

/* The kind of object at *value, read without trusting it: only for kernels
 * whose driver gave no argument info, where a by-value argument of pointer
 * size cannot be told from a handle otherwise. */
static uint32_t probe_magic(const void *value)
{
	const struct cmx_head *h;
	struct iovec local, remote;
	uint32_t magic = 0;

	memcpy(&h, value, sizeof(h));
	if (!h)
		return 0;
	local = (struct iovec){&magic, sizeof(magic)};
	remote = (struct iovec){(void *)&h->magic, sizeof(magic)};
	if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(magic))
		return 0;
	return magic;
}

/* An image argument: an image of the declared type whose flags allow the
 * declared access. */
static cl_int image_arg_check(const struct cmx_arginfo *ai, cl_mem m)
{
	cl_mem_object_type want = cmx_cl_image_arg_type(ai->type_name);

	if (!m)
		return CL_INVALID_ARG_VALUE;
	if (!m->image || (want && m->type != want))
		return CL_INVALID_MEM_OBJECT;
	if ((ai->access == CL_KERNEL_ARG_ACCESS_READ_ONLY && (m->flags & CL_MEM_WRITE_ONLY)) ||
	    (ai->access == CL_KERNEL_ARG_ACCESS_WRITE_ONLY && (m->flags & CL_MEM_READ_ONLY)))
		return CL_INVALID_ARG_VALUE;
	return CL_SUCCESS;
}

/* A device's CL_DEVICE_LOCAL_MEM_SIZE; 0 when unknown. */
static cl_ulong device_local_mem(cl_device_id d)
{
	const struct cmx_devinfo *di = cmx_device_info(d, CL_DEVICE_LOCAL_MEM_SIZE);
	cl_ulong v = 0;

	if (di && di->size >= sizeof(v))
		memcpy(&v, di->value, sizeof(v));
	return v;
}

/* The most local memory one argument may ask for: what the largest of the
 * program's devices has (a launch checks the sum on its own device). */
static cl_ulong program_local_mem(cl_program p)
{
	cl_ulong best = 0;

	for (cl_uint i = 0; i < p->ndevices; i++) {
		cl_ulong v = device_local_mem(p->devices[i]);
		if (v > best)
			best = v;
	}
	return best;
}

/* A __local argument's size: at least a byte, at most the device's local
 * memory. The driver would take any size: PoCL 3.1 aborts its process at
 * launch on one larger than its memory (natively the application's own;
 * here the daemon, for every tenant). */
static cl_int local_size_check(cl_kernel k, size_t size)
{
	cl_ulong limit = program_local_mem(k->program);

	if (!size || (limit && size > limit))
		return CL_INVALID_ARG_SIZE;
	return CL_SUCCESS;
}

/* Checks an argument against the kernel info; fills v (bytes not copied). */
static cl_int arg_check(const struct cmx_arginfo *ai, size_t size, const void *value,
			struct cmx_argval *v)
{
	memset(v, 0, sizeof(*v));
	v->size = size;
	switch (ai->address) {
	case CL_KERNEL_ARG_ADDRESS_GLOBAL:
	case CL_KERNEL_ARG_ADDRESS_CONSTANT: {
		cl_mem m = NULL;

		if (size != sizeof(cl_mem))
			return CL_INVALID_ARG_SIZE;
		if (value)
			memcpy(&m, value, sizeof(m));
		if (m && !CMX_IS(m, CMX_MAGIC_MEM))
			return CL_INVALID_MEM_OBJECT;
		if (!strncmp(ai->type_name, "image", 5)) {
			cl_int e = image_arg_check(ai, m);
			if (e)
				return e;
		} else if (m && m->image) {
			return CL_INVALID_MEM_OBJECT;
		}
		v->kind = CMX_ARG_MEM;
		v->id = m ? m->id : 0;
		return CL_SUCCESS;
	}
	case CL_KERNEL_ARG_ADDRESS_LOCAL:
		if (value)
			return CL_INVALID_ARG_VALUE;
		if (!size)
			return CL_INVALID_ARG_SIZE;
		v->kind = CMX_ARG_LOCAL;
		return CL_SUCCESS;
	case CL_KERNEL_ARG_ADDRESS_PRIVATE:
		if (!strcmp(ai->type_name, "sampler_t")) {
			const struct cmx_head *smp = NULL;

			if (size != sizeof(cl_sampler))
				return CL_INVALID_ARG_SIZE;
			if (value)
				memcpy(&smp, value, sizeof(smp));
			if (!CMX_IS(smp, CMX_MAGIC_SAMPLER))
				return CL_INVALID_SAMPLER;
			v->kind = CMX_ARG_SAMPLER;
			v->id = smp->id;
			return CL_SUCCESS;
		}
		if (!value)
			return CL_INVALID_ARG_VALUE;
		if (!size || size > KERNEL_MAX_VALUE || (ai->value_size && size != ai->value_size))
			return CL_INVALID_ARG_SIZE;
		v->kind = CMX_ARG_VALUE;
		return CL_SUCCESS;
	}
	/* No argument info from the driver: guess from what was given. A NULL
	 * value is a __local size (or a NULL buffer: the same native call). */
	if (!value) {
		if (!size)
			return CL_INVALID_ARG_SIZE;
		v->kind = CMX_ARG_LOCAL;
		return CL_SUCCESS;
	}
	if (size == sizeof(void *)) {
		const struct cmx_head *h;

		memcpy(&h, value, sizeof(h));
		switch (probe_magic(value)) {
		case CMX_MAGIC_MEM:
			v->kind = CMX_ARG_MEM;
			v->id = h->id;
			return CL_SUCCESS;
		case CMX_MAGIC_SAMPLER:
			v->kind = CMX_ARG_SAMPLER;
			v->id = h->id;
			return CL_SUCCESS;
		}
	}
	if (!size || size > KERNEL_MAX_VALUE)
		return CL_INVALID_ARG_SIZE;
	v->kind = CMX_ARG_VALUE;
	return CL_SUCCESS;
}

cl_int CL_API_CALL cmx_clSetKernelArg(cl_kernel kernel, cl_uint arg_index, size_t arg_size,
				      const void *arg_value)
{
	struct cmx_kernel *ck = kern_of(kernel);
	struct cmx_argval v, *slot;
	cl_int e;

	if (!CMX_IS(kernel, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	if (arg_index >= kernel->info->nargs)
		return CL_INVALID_ARG_INDEX;
	e = arg_check(&kernel->info->args[arg_index], arg_size, arg_value, &v);
	if (!e && v.kind == CMX_ARG_LOCAL)
		e = local_size_check(kernel, arg_size);
	if (e)
		return e;

	pthread_mutex_lock(&kernel->lock);
	slot = &ck->vals[arg_index];
	if (v.kind == CMX_ARG_VALUE) {
		if (slot->cap < arg_size) {
			void *b = realloc(slot->bytes, arg_size);
			if (!b) {
				pthread_mutex_unlock(&kernel->lock);
				return CL_OUT_OF_HOST_MEMORY;
			}
			slot->bytes = b;
			slot->cap = arg_size;
		}
		memcpy(slot->bytes, arg_value, arg_size);
	}
	v.bytes = slot->bytes;
	v.cap = slot->cap;
	/* Sent under the lock: the daemon sees a kernel's arguments in the
	 * order their values were recorded here. */
	e = arg_send(kernel, arg_index, &v);
	if (!e) {
		*slot = v;
		kernel->arg_set[arg_index / 64] |= 1ull << (arg_index % 64);
		/* Local memory changes what the work-group queries answer. */
		if (v.kind == CMX_ARG_LOCAL)
			wg_cache_clear(ck);
	}
	pthread_mutex_unlock(&kernel->lock);
	return e;
}

cl_int CL_API_CALL cmx_clSetKernelExecInfo(cl_kernel kernel, cl_kernel_exec_info param_name,
					   size_t param_value_size, const void *param_value)
{
	if (!CMX_IS(kernel, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	switch (param_name) {
	case CL_KERNEL_EXEC_INFO_SVM_PTRS:
	case CL_KERNEL_EXEC_INFO_SVM_FINE_GRAIN_SYSTEM:
		/* clmux offers no shared virtual memory: "CL_INVALID_OPERATION
		 * if no devices in the context associated with kernel support
		 * SVM", whatever the value (the CTS passes 0, NULL). */
		return CL_INVALID_OPERATION;
	}
	return CL_INVALID_VALUE;
}

/* ---- queries ---- */

cl_int CL_API_CALL cmx_clGetKernelInfo(cl_kernel kernel, cl_kernel_info param_name,
				       size_t param_value_size, void *param_value,
				       size_t *param_value_size_ret)
{
	size_t sz = param_value_size, *szr = param_value_size_ret;
	void *v = param_value;

	if (!CMX_IS(kernel, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	switch (param_name) {
	case CL_KERNEL_FUNCTION_NAME:
		return cmx_info_str(sz, v, szr, kernel->info->name);
	case CL_KERNEL_NUM_ARGS:
		return cmx_info_copy(sz, v, szr, &kernel->info->nargs, sizeof(cl_uint));
	case CL_KERNEL_REFERENCE_COUNT: {
		cl_uint refs = atomic_load(&kernel->refs);
		return cmx_info_copy(sz, v, szr, &refs, sizeof(refs));
	}
	case CL_KERNEL_CONTEXT:
		return cmx_info_copy(sz, v, szr, &kernel->program->ctx, sizeof(cl_context));
	case CL_KERNEL_PROGRAM:
		return cmx_info_copy(sz, v, szr, &kernel->program, sizeof(cl_program));
	case CL_KERNEL_ATTRIBUTES:
		return cmx_info_str(sz, v, szr, kernel->info->attributes);
	}
	return CL_INVALID_VALUE;
}

/* The daemon always builds with -cl-kernel-arg-info (the guest checks
 * arguments with it); the application sees argument info only where it
 * asked for it, as natively: a program from source or IL built without
 * the option has none. */
static int arg_info_asked(cl_program p)
{
	int asked;

	pthread_mutex_lock(&p->lock);
	asked = !(p->source || p->il) || (p->options && strstr(p->options, "-cl-kernel-arg-info"));
	pthread_mutex_unlock(&p->lock);
	return asked;
}

cl_int CL_API_CALL cmx_clGetKernelArgInfo(cl_kernel kernel, cl_uint arg_index,
					  cl_kernel_arg_info param_name, size_t param_value_size,
					  void *param_value, size_t *param_value_size_ret)
{
	size_t sz = param_value_size, *szr = param_value_size_ret;
	const struct cmx_arginfo *ai;
	void *v = param_value;

	if (!CMX_IS(kernel, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	if (arg_index >= kernel->info->nargs)
		return CL_INVALID_ARG_INDEX;
	if (!arg_info_asked(kernel->program))
		return CL_KERNEL_ARG_INFO_NOT_AVAILABLE;
	ai = &kernel->info->args[arg_index];
	switch (param_name) {
	case CL_KERNEL_ARG_ADDRESS_QUALIFIER:
		if (!ai->address)
			return CL_KERNEL_ARG_INFO_NOT_AVAILABLE;
		return cmx_info_copy(sz, v, szr, &ai->address, sizeof(ai->address));
	case CL_KERNEL_ARG_ACCESS_QUALIFIER:
		if (!ai->access)
			return CL_KERNEL_ARG_INFO_NOT_AVAILABLE;
		return cmx_info_copy(sz, v, szr, &ai->access, sizeof(ai->access));
	case CL_KERNEL_ARG_TYPE_QUALIFIER:
		if (!ai->address)
			return CL_KERNEL_ARG_INFO_NOT_AVAILABLE;
		return cmx_info_copy(sz, v, szr, &ai->type_qual, sizeof(ai->type_qual));
	case CL_KERNEL_ARG_TYPE_NAME:
		if (!ai->type_name[0])
			return CL_KERNEL_ARG_INFO_NOT_AVAILABLE;
		return cmx_info_str(sz, v, szr, ai->type_name);
	case CL_KERNEL_ARG_NAME:
		if (!ai->name[0])
			return CL_KERNEL_ARG_INFO_NOT_AVAILABLE;
		return cmx_info_str(sz, v, szr, ai->name);
	}
	return CL_INVALID_VALUE;
}

/* Checks a per-device kernel query's kernel, and sets *out to the device
 * it is about: the given one, or the program's only one. */
static cl_int query_device(cl_kernel k, cl_device_id d, cl_device_id *out)
{
	cl_program p;

	if (!CMX_IS(k, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	p = k->program;
	if (!d)
		*out = p->ndevices == 1 ? p->devices[0] : NULL;
	else if (CMX_IS(d, CMX_MAGIC_DEVICE) && cmx_program_has_device(p, d))
		*out = d;
	else
		*out = NULL;
	return *out ? CL_SUCCESS : CL_INVALID_DEVICE;
}

/* Answers that change with the arguments or the launch are never cached. */
static int wg_cacheable(cl_kernel_work_group_info param)
{
	return param != CL_KERNEL_GLOBAL_WORK_SIZE && param != CL_KERNEL_LOCAL_MEM_SIZE;
}

/* A cached answer copied to the caller; 1 when there was one. */
static int wg_cache_get(struct cmx_kernel *ck, cl_device_id d, cl_kernel_work_group_info param,
			size_t size, void *value, size_t *size_ret, cl_int *e)
{
	int hit = 0;

	pthread_mutex_lock(&ck->k.lock);
	for (struct cmx_wginfo *w = ck->wg; w && !hit; w = w->next) {
		if (w->device == d && w->param == param) {
			*e = cmx_info_copy(size, value, size_ret, w->value, w->size);
			hit = 1;
		}
	}
	pthread_mutex_unlock(&ck->k.lock);
	return hit;
}

static void wg_cache_put(struct cmx_kernel *ck, cl_device_id d, cl_kernel_work_group_info param,
			 const void *value, size_t size)
{
	struct cmx_wginfo *w = malloc(sizeof(*w) + size);

	if (!w)
		return;
	w->device = d;
	w->param = param;
	w->size = size;
	memcpy(w->value, value, size);
	pthread_mutex_lock(&ck->k.lock);
	w->next = ck->wg;
	ck->wg = w;
	pthread_mutex_unlock(&ck->k.lock);
}

cl_int CL_API_CALL cmx_clGetKernelWorkGroupInfo(cl_kernel kernel, cl_device_id device,
						cl_kernel_work_group_info param_name,
						size_t param_value_size, void *param_value,
						size_t *param_value_size_ret)
{
	struct cmx_GetKernelWorkGroupInfo_in in;
	struct cmx_GetKernelWorkGroupInfo_out out;
	struct cmx_reply reply;
	cl_device_id d;
	cl_int e;
	int rc;

	e = query_device(kernel, device, &d);
	if (e)
		return e;
	if (wg_cacheable(param_name) &&
	    wg_cache_get(kern_of(kernel), d, param_name, param_value_size, param_value,
			 param_value_size_ret, &e))
		return e;
	in = (struct cmx_GetKernelWorkGroupInfo_in){
	    .kernel.id = kernel->id,
	    .device.id = d->id,
	    .param = param_name,
	};
	memset(&out, 0, sizeof(out));
	rc = cmx_rpc_GetKernelWorkGroupInfo(cmx_icd.s, &in, &out, &reply);
	if (!rc && reply.status == CL_SUCCESS && wg_cacheable(param_name))
		wg_cache_put(kern_of(kernel), d, param_name, out.value.ptr, out.value.len);
	return cmx_info_reply(rc, &reply, &out.value, param_value_size, param_value,
			      param_value_size_ret);
}

cl_int CL_API_CALL cmx_clGetKernelSubGroupInfo(cl_kernel kernel, cl_device_id device,
					       cl_kernel_sub_group_info param_name,
					       size_t input_value_size, const void *input_value,
					       size_t param_value_size, void *param_value,
					       size_t *param_value_size_ret)
{
	struct cmx_GetKernelSubGroupInfo_in in;
	struct cmx_GetKernelSubGroupInfo_out out;
	struct cmx_reply reply;
	cl_device_id d;
	cl_int e;
	int rc;

	e = query_device(kernel, device, &d);
	if (e)
		return e;
	if (input_value_size > 64 || (input_value_size && !input_value))
		return CL_INVALID_VALUE;
	in = (struct cmx_GetKernelSubGroupInfo_in){
	    .kernel.id = kernel->id,
	    .device.id = d->id,
	    .param = param_name,
	    .input = {input_value, input_value ? input_value_size : 0},
	    .size = param_value_size,
	};
	memset(&out, 0, sizeof(out));
	rc = cmx_rpc_GetKernelSubGroupInfo(cmx_icd.s, &in, &out, &reply);
	return cmx_info_reply(rc, &reply, &out.value, param_value_size, param_value,
			      param_value_size_ret);
}

/* ---- launches ---- */

/* Whether work-groups may be smaller at the edges: the device supports it
 * and the program was built for OpenCL C 2.0 or later without
 * -cl-uniform-work-group-size. */
static int nonuniform_ok(cl_kernel k, cl_device_id d)
{
	const struct cmx_devinfo *di = cmx_device_info(d, CL_DEVICE_NON_UNIFORM_WORK_GROUP_SUPPORT);
	const char *opts = k->program->options;
	cl_bool yes = CL_FALSE;

	if (di && di->size >= sizeof(yes))
		memcpy(&yes, di->value, sizeof(yes));
	if (!yes || !opts)
		return 0;
	if (strstr(opts, "-cl-uniform-work-group-size"))
		return 0;
	return strstr(opts, "-cl-std=CL2") || strstr(opts, "-cl-std=CL3");
}

static int args_all_set(cl_kernel k)
{
	cl_uint n = k->info->nargs;
	int ok = 1;

	pthread_mutex_lock(&k->lock);
	for (cl_uint i = 0; i < n && ok; i++)
		ok = !!(k->arg_set[i / 64] & (1ull << (i % 64)));
	pthread_mutex_unlock(&k->lock);
	return ok;
}

/* The __local memory the arguments ask for, against the launch device's:
 * CL_OUT_OF_RESOURCES, as drivers refuse a launch that cannot fit. The
 * kernel's own __local variables are the daemon's to add (it asks the
 * driver); a sum of sizes each at most the memory cannot overflow. */
static cl_int local_sum_check(cl_kernel k, cl_device_id d)
{
	struct cmx_kernel *ck = kern_of(k);
	cl_ulong limit = device_local_mem(d), sum = 0;

	if (!limit)
		return CL_SUCCESS;
	pthread_mutex_lock(&k->lock);
	for (cl_uint i = 0; i < k->info->nargs; i++)
		if (ck->vals[i].kind == CMX_ARG_LOCAL &&
		    (k->arg_set[i / 64] & (1ull << (i % 64))))
			sum += ck->vals[i].size;
	pthread_mutex_unlock(&k->lock);
	return sum > limit ? CL_OUT_OF_RESOURCES : CL_SUCCESS;
}

static cl_uint device_addr_bits(cl_device_id d)
{
	const struct cmx_devinfo *di = cmx_device_info(d, CL_DEVICE_ADDRESS_BITS);
	cl_uint bits = 64;

	if (di && di->size >= sizeof(bits))
		memcpy(&bits, di->value, sizeof(bits));
	return bits;
}

/* The launch checks the spec wants at once, from what the guest knows. */
static cl_int ndrange_check(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *offset,
			    const size_t *global, const size_t *local)
{
	struct cmx_kernel *ck = kern_of(k);
	cl_device_id d = q->device;
	cl_uint max_dims = d->max_dims ? d->max_dims : 3;
	uint64_t limit = device_addr_bits(d) == 32 ? UINT32_MAX : UINT64_MAX;
	size_t total = 1, kernel_wg = 0;
	int has_reqd = ck->reqd[0] != 0;
	cl_int e;

	if (!cmx_program_has_device(k->program, d))
		return CL_INVALID_PROGRAM_EXECUTABLE;
	if (!args_all_set(k))
		return CL_INVALID_KERNEL_ARGS;
	if (dim < 1 || dim > max_dims || dim > 3)
		return CL_INVALID_WORK_DIMENSION;
	if (!global)
		return CL_INVALID_GLOBAL_WORK_SIZE;
	for (cl_uint i = 0; i < dim; i++)
		if (!global[i] || global[i] > limit)
			return CL_INVALID_GLOBAL_WORK_SIZE;
	if (offset)
		for (cl_uint i = 0; i < dim; i++)
			if (offset[i] > limit - global[i])
				return CL_INVALID_GLOBAL_OFFSET;
	if (!local)
		return has_reqd ? CL_INVALID_WORK_GROUP_SIZE : CL_SUCCESS;

	for (cl_uint i = 0; i < dim; i++) {
		if (!local[i])
			return CL_INVALID_WORK_GROUP_SIZE;
		if (has_reqd && local[i] != ck->reqd[i])
			return CL_INVALID_WORK_GROUP_SIZE;
		total *= local[i];
	}
	for (cl_uint i = dim; has_reqd && i < 3; i++)
		if (ck->reqd[i] != 1)
			return CL_INVALID_WORK_GROUP_SIZE;
	if (!nonuniform_ok(k, d))
		for (cl_uint i = 0; i < dim; i++)
			if (global[i] % local[i])
				return CL_INVALID_WORK_GROUP_SIZE;
	if (d->max_wg_size && total > d->max_wg_size)
		return CL_INVALID_WORK_GROUP_SIZE;
	/* The kernel's own limit, where a query has already brought it. */
	if (wg_cache_get(ck, d, CL_KERNEL_WORK_GROUP_SIZE, sizeof(kernel_wg), &kernel_wg, NULL,
			 &e) &&
	    e == CL_SUCCESS && kernel_wg && total > kernel_wg)
		return CL_INVALID_WORK_GROUP_SIZE;
	for (cl_uint i = 0; i < dim; i++)
		if (d->max_wi_sizes[i] && local[i] > d->max_wi_sizes[i])
			return CL_INVALID_WORK_ITEM_SIZE;
	return CL_SUCCESS;
}

/*
 * A kernel that may print: its output comes as KernelOutput, which lands
 * like a non-blocking read's data (guest/notify.c writes it to fd 1), so
 * clFinish, blocking commands and clWaitForEvents on its event return only
 * once it is out.
 */
static cl_int printing_send(cl_command_queue q, cl_event ev, const struct cmx_EnqueueKernel_in *k)
{
	struct cmx_pending_read *p = cmx_pending_new(q, ev, NULL, 0);
	struct cmx_EnqueueKernelPrintf_in in;

	if (!p)
		return CL_OUT_OF_HOST_MEMORY;
	in = (struct cmx_EnqueueKernelPrintf_in){
	    .queue = k->queue,
	    .kernel = k->kernel,
	    .offset = k->offset,
	    .global = k->global,
	    .local = k->local,
	    .wait = k->wait,
	    .event = k->event,
	    .tag = (uint64_t)(uintptr_t)p,
	};
	return cmx_pending_send(p, &cmx_desc_EnqueueKernelPrintf_in, &in, 0);
}

cl_int cmx_kernel_launch_check(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *offset,
			       const size_t *global, const size_t *local)
{
	cl_int e;

	if (!CMX_IS(q, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	if (!CMX_IS(k, CMX_MAGIC_KERNEL))
		return CL_INVALID_KERNEL;
	if (q->ctx != k->program->ctx)
		return CL_INVALID_CONTEXT;
	e = ndrange_check(q, k, dim, offset, global, local);
	if (!e)
		e = local_sum_check(k, q->device);
	return e;
}

static cl_int kernel_enqueue(cl_command_queue q, cl_kernel k, cl_uint dim, const size_t *offset,
			     const size_t *global, const size_t *local, cl_uint nwait,
			     const cl_event *wait, cl_event *event, cl_command_type type)
{
	uint64_t off[3], gl[3], lo[3], ev_id = 0;
	struct cmx_EnqueueKernel_in in;
	struct cmx_waitlist w;
	cl_event ev;
	cl_int e;

	e = cmx_kernel_launch_check(q, k, dim, offset, global, local);
	if (e)
		return e;
	e = cmx_waitlist_init(&w, nwait, wait, q->ctx);
	if (e)
		return e;
	for (cl_uint i = 0; i < dim; i++) {
		off[i] = offset ? offset[i] : 0;
		gl[i] = global[i];
		lo[i] = local ? local[i] : 0;
	}
	ev = cmx_event_for(event, q, type, &ev_id);
	if (event && !ev) {
		cmx_waitlist_fini(&w);
		return CL_OUT_OF_HOST_MEMORY;
	}
	in = (struct cmx_EnqueueKernel_in){
	    .queue.id = q->id,
	    .kernel.id = k->id,
	    .offset = {off, offset ? dim : 0},
	    .global = {gl, dim},
	    .local = {lo, local ? dim : 0},
	    .wait = {.v = w.ids, .n = w.n},
	    .event.id = ev_id,
	};
	e = k->program->may_print ? printing_send(q, ev, &in) : CMX_SEND(EnqueueKernel, &in);
	cmx_waitlist_fini(&w);
	if (e) {
		if (ev) {
			cmx_event_discard(ev);
			*event = NULL;
		}
		return e;
	}
	if (event)
		*event = ev;
	return CL_SUCCESS;
}

cl_int CL_API_CALL cmx_clEnqueueNDRangeKernel(cl_command_queue command_queue, cl_kernel kernel,
					      cl_uint work_dim, const size_t *global_work_offset,
					      const size_t *global_work_size,
					      const size_t *local_work_size,
					      cl_uint num_events_in_wait_list,
					      const cl_event *event_wait_list, cl_event *event)
{
	return kernel_enqueue(command_queue, kernel, work_dim, global_work_offset, global_work_size,
			      local_work_size, num_events_in_wait_list, event_wait_list, event,
			      CL_COMMAND_NDRANGE_KERNEL);
}

cl_int CL_API_CALL cmx_clEnqueueTask(cl_command_queue command_queue, cl_kernel kernel,
				     cl_uint num_events_in_wait_list,
				     const cl_event *event_wait_list, cl_event *event)
{
	static const size_t one = 1;

	return kernel_enqueue(command_queue, kernel, 1, NULL, &one, &one, num_events_in_wait_list,
			      event_wait_list, event, CL_COMMAND_TASK);
}

cl_int CL_API_CALL cmx_clEnqueueNativeKernel(cl_command_queue command_queue,
					     void(CL_CALLBACK *user_func)(void *), void *args,
					     size_t cb_args, cl_uint num_mem_objects,
					     const cl_mem *mem_list, const void **args_mem_loc,
					     cl_uint num_events_in_wait_list,
					     const cl_event *event_wait_list, cl_event *event)
{
	if (!CMX_IS(command_queue, CMX_MAGIC_QUEUE))
		return CL_INVALID_COMMAND_QUEUE;
	/* Host functions cannot run on the daemon's device. */
	return CL_INVALID_OPERATION;
}
