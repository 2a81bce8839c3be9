// SPDX-License-Identifier: MIT
// Programs: creation, builds, and the kernel info every build brings back.
#include "icd.h"
#include "mayprint.h"
#include "object.h"
#include "program.h"
#include "entry.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "clcheck.h"
#include "log.h"

/* Devices one call may name (the schema's max for id[]:device). */
#define PROGRAM_MAX_DEVICES 64
/* Sources and IL up to this size travel in their creation call; larger
 * ones in parts of at most PART_MAX bytes (ProgramPart), since a message's
 * arguments are at most CMX_MAX_ARGS. */
#define PROGRAM_ONE_MAX (CMX_MAX_ARGS - 4096)
#define PART_MAX	(8u << 20)

/*
 * Every program is made here, so its object carries what only this file
 * needs after the public part: whether a build, compile or link is running.
 */
struct cmx_program {
	struct _cl_program p;
	int busy; /* under p.lock */
};

static struct cmx_program *prog_of(cl_program p)
{
	return (struct cmx_program *)p;
}

/* ---- kernel info (host/exec_program.c, describe_kernels()) ---- */

static void kinfo_free(struct cmx_kinfo *k, cl_uint n)
{
	if (!k)
		return;
	for (cl_uint i = 0; i < n; i++)
		free(k[i].args);
	free(k);
}

/* Drops a program's kernel info; the caller holds p->lock and has made sure
 * no kernel points into it (kernels_alive == 0). */
static void program_kernels_drop(cl_program p)
{
	kinfo_free(p->kernels, p->nkernels);
	free(p->kernels_blob);
	p->kernels = NULL;
	p->kernels_blob = NULL;
	p->nkernels = 0;
}

/* A string of the kernel info: the decoder has checked its one NUL. */
static const char *kinfo_str(const struct cmx_blob *b)
{
	return b->len ? b->ptr : "";
}

static size_t program_addr_bytes(cl_program p)
{
	const struct cmx_devinfo *di =
	    p->ndevices ? cmx_device_info(p->devices[0], CL_DEVICE_ADDRESS_BITS) : NULL;
	cl_uint bits = 64;

	if (di && di->size >= sizeof(bits))
		memcpy(&bits, di->value, sizeof(bits));
	return bits == 32 ? 4 : 8;
}

/*
 * The guest's view of a build's kernel info (KernelInfo records, decoded
 * and bounds-checked by the codec). The strings point into the reply's
 * buffer, which the program keeps as kernels_blob.
 */
static cl_int kinfo_parse(cl_program p, const struct cmx_KernelInfo_array *in,
			  struct cmx_kinfo **out, cl_uint *nout)
{
	size_t addr_bytes = program_addr_bytes(p);
	struct cmx_kinfo *ks;

	*out = NULL;
	*nout = 0;
	if (!in->n)
		return CL_SUCCESS;
	if (!(ks = calloc(in->n, sizeof(*ks))))
		return CL_OUT_OF_HOST_MEMORY;
	for (uint64_t i = 0; i < in->n; i++) {
		const struct cmx_KernelInfo *ki = &in->v[i];

		ks[i].name = kinfo_str(&ki->name);
		ks[i].attributes = kinfo_str(&ki->attributes);
		ks[i].nargs = (cl_uint)ki->args.n;
		if (ki->args.n && !(ks[i].args = calloc(ki->args.n, sizeof(*ks[i].args)))) {
			kinfo_free(ks, (cl_uint)in->n);
			return CL_OUT_OF_HOST_MEMORY;
		}
		for (uint64_t a = 0; a < ki->args.n; a++) {
			const struct cmx_KernelArg *ka = &ki->args.v[a];
			struct cmx_arginfo *ai = &ks[i].args[a];

			ai->address = (cl_kernel_arg_address_qualifier)ka->address;
			ai->access = (cl_kernel_arg_access_qualifier)ka->access;
			ai->type_qual = (cl_kernel_arg_type_qualifier)ka->type_qual;
			ai->type_name = kinfo_str(&ka->type_name);
			ai->name = kinfo_str(&ka->name);
			if (ai->address == CL_KERNEL_ARG_ADDRESS_PRIVATE &&
			    strcmp(ai->type_name, "sampler_t") != 0)
				ai->value_size = cmx_cl_type_size(ai->type_name, addr_bytes);
		}
		/* Without it (the driver was not asked): read from the
		 * attributes. */
		if (ki->reqd.n == 3) {
			for (int d = 0; d < 3; d++)
				ks[i].reqd[d] = (size_t)ki->reqd.v[d];
			ks[i].reqd_known = 1;
		}
	}
	*out = ks;
	*nout = (cl_uint)in->n;
	return CL_SUCCESS;
}

/* ---- helpers ---- */

int cmx_program_has_device(cl_program p, cl_device_id d)
{
	for (cl_uint i = 0; i < p->ndevices; i++)
		if (p->devices[i] == d)
			return 1;
	return 0;
}

static int context_has_device(cl_context c, cl_device_id d)
{
	for (cl_uint i = 0; i < c->ndevices; i++)
		if (c->devices[i] == d)
			return 1;
	return 0;
}

/* The device list of a build, compile or link, as wire ids: the given
 * list (checked against `have`), or none, meaning all of them. */
static cl_int device_ids(cl_uint n, const cl_device_id *list, int (*have)(void *, cl_device_id),
			 void *obj, uint64_t *ids)
{
	if ((n == 0) != (list == NULL))
		return CL_INVALID_VALUE;
	if (n > PROGRAM_MAX_DEVICES)
		return CL_INVALID_DEVICE;
	for (cl_uint i = 0; i < n; i++) {
		if (!CMX_IS(list[i], CMX_MAGIC_DEVICE) || !have(obj, list[i]))
			return CL_INVALID_DEVICE;
		ids[i] = list[i]->id;
	}
	return CL_SUCCESS;
}

static int have_program_device(void *p, cl_device_id d)
{
	return cmx_program_has_device(p, d);
}

static int have_context_device(void *c, cl_device_id d)
{
	return context_has_device(c, d);
}

/* A fresh program of ctx for devs (copied); retains ctx. */
static cl_program program_new(cl_context ctx, cl_uint ndev, const cl_device_id *devs)
{
	struct cmx_program *cp = cmx_object_new(sizeof(*cp), CMX_MAGIC_PROGRAM);
	cl_program p;

	if (!cp)
		return NULL;
	p = &cp->p;
	p->devices = calloc(ndev ? ndev : 1, sizeof(*p->devices));
	if (!p->devices) {
		free(cp);
		return NULL;
	}
	memcpy(p->devices, devs, ndev * sizeof(*devs));
	p->ndevices = ndev;
	p->ctx = ctx;
	pthread_mutex_init(&p->lock, NULL);
	cmx_clRetainContext(ctx);
	return p;
}

/* Frees a program the daemon never heard of, or has been told to release. */
static void program_free(cl_program p)
{
	cl_context ctx = p->ctx;

	program_kernels_drop(p);
	pthread_mutex_destroy(&p->lock);
	free(p->source);
	free(p->il);
	free(p->devices);
	free(p->options);
	p->magic = 0;
	free(prog_of(p));
	cmx_clReleaseContext(ctx);
}

static void set_err(cl_int *errcode_ret, cl_int e)
{
	if (errcode_ret)
		*errcode_ret = e;
}

/* Marks p busy (a build, compile or link running) after checking the spec's
 * CL_INVALID_OPERATION cases; drops its executable, which the new build
 * replaces (so no kernel is made from it meanwhile). */
static cl_int program_begin(cl_program p)
{
	cl_int e = CL_SUCCESS;

	pthread_mutex_lock(&p->lock);
	if (prog_of(p)->busy || atomic_load(&p->kernels_alive) > 0) {
		e = CL_INVALID_OPERATION;
	} else {
		prog_of(p)->busy = 1;
		p->built = 0;
		program_kernels_drop(p);
	}
	pthread_mutex_unlock(&p->lock);
	return e;
}

static char *dup_options(const char *options)
{
	return strdup(options ? options : "");
}

/* The end of a clCreateProgramWith*: p when the daemon made it (e is
 * CL_SUCCESS), else NULL, p freed. */
static cl_program program_created(cl_program p, cl_int e, cl_int *errcode_ret)
{
	set_err(errcode_ret, e);
	if (e) {
		program_free(p);
		return NULL;
	}
	return p;
}

/* The checks clBuildProgram and clCompileProgram start with; fills ids. */
static cl_int build_check(cl_program p, cl_uint n, const cl_device_id *list,
			  void(CL_CALLBACK *pfn_notify)(cl_program, void *), void *user_data,
			  uint64_t *ids)
{
	cl_int e;

	if (!CMX_IS(p, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	e = device_ids(n, list, have_program_device, p, ids);
	if (e)
		return e;
	if (!pfn_notify && user_data)
		return CL_INVALID_VALUE;
	return CL_SUCCESS;
}

/* ---- creation ---- */

/* The daemon keeps one program's parts per session: one upload at a time. */
static pthread_mutex_t parts_lock = PTHREAD_MUTEX_INITIALIZER;

/* The bytes of program p in parts, under parts_lock: 0 or -errno. */
static int parts_send(cl_program p, const void *bytes, size_t len)
{
	int rc = 0;

	for (size_t off = 0; off < len && !rc; off += PART_MAX) {
		size_t n = len - off < PART_MAX ? len - off : PART_MAX;
		struct cmx_ProgramPart_in part = {
		    .program = p->id,
		    .offset = off,
		    .total = len,
		    .data = {(const char *)bytes + off, n},
		};
		rc = cmx_send_ProgramPart(cmx_icd.s, &part);
	}
	return rc;
}

/* Creates p on the daemon from bytes too large for one message: the
 * parts, then the creation that takes them. */
static cl_int program_parts(cl_program p, cl_context ctx, int il, const void *bytes, size_t len)
{
	struct cmx_CreateProgramWithParts_in in = {
	    .program.id = p->id, .context.id = ctx->id, .il = (uint64_t)il, .length = len};
	struct cmx_CreateProgramWithParts_out out;
	struct cmx_reply reply;
	cl_int e = CL_SUCCESS;
	int rc = 0;

	pthread_mutex_lock(&parts_lock);
	rc = parts_send(p, bytes, len);
	if (!rc)
		rc = cmx_rpc_CreateProgramWithParts(cmx_icd.s, &in, NULL, 0, &out, &reply);
	pthread_mutex_unlock(&parts_lock);
	if (rc)
		return cmx_transport_err(rc);
	e = reply.status;
	cmx_reply_fini(&reply);
	if (e == CL_OUT_OF_HOST_MEMORY)
		cmx_warn("a program %s of %zu bytes: the daemon holds no room for it (past the "
			 "tenant's mem quota?): CL_OUT_OF_HOST_MEMORY",
			 il ? "IL" : "source", len);
	return e;
}

cl_program CL_API_CALL cmx_clCreateProgramWithSource(cl_context context, cl_uint count,
						     const char **strings, const size_t *lengths,
						     cl_int *errcode_ret)
{
	struct cmx_CreateProgramWithSource_in in;
	size_t total = 0, off = 0;
	cl_program p;
	char *src;

	if (!CMX_IS(context, CMX_MAGIC_CONTEXT)) {
		set_err(errcode_ret, CL_INVALID_CONTEXT);
		return NULL;
	}
	if (!count || !strings) {
		set_err(errcode_ret, CL_INVALID_VALUE);
		return NULL;
	}
	for (cl_uint i = 0; i < count; i++) {
		size_t n;

		if (!strings[i]) {
			set_err(errcode_ret, CL_INVALID_VALUE);
			return NULL;
		}
		n = lengths && lengths[i] ? lengths[i] : strlen(strings[i]);
		if (n > SIZE_MAX - 1 - total) {
			set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
			return NULL;
		}
		total += n;
	}
	src = malloc(total + 1);
	if (!src) {
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	for (cl_uint i = 0; i < count; i++) {
		size_t n = lengths && lengths[i] ? lengths[i] : strlen(strings[i]);

		memcpy(src + off, strings[i], n);
		off += n;
	}
	src[total] = '\0';

	p = program_new(context, context->ndevices, context->devices);
	if (!p) {
		free(src);
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	p->source = src;
	p->source_len = total;
	p->may_print = cmx_may_print(src, total);
	if (total > PROGRAM_ONE_MAX)
		return program_created(p, program_parts(p, context, 0, src, total), errcode_ret);
	in = (struct cmx_CreateProgramWithSource_in){
	    .program.id = p->id,
	    .context.id = context->id,
	    .source = {src, total},
	};
	return program_created(p, CMX_SEND(CreateProgramWithSource, &in), errcode_ret);
}

cl_program CL_API_CALL cmx_clCreateProgramWithBinary(cl_context context, cl_uint num_devices,
						     const cl_device_id *device_list,
						     const size_t *lengths,
						     const unsigned char **binaries,
						     cl_int *binary_status, cl_int *errcode_ret)
{
	struct cmx_CreateProgramWithBinary_in in;
	struct cmx_CreateProgramWithBinary_out out;
	uint64_t ids[PROGRAM_MAX_DEVICES], lens[PROGRAM_MAX_DEVICES];
	struct cmx_reply reply;
	size_t total = 0, off = 0;
	unsigned char *cat;
	cl_program p;
	cl_int e;
	int rc;

	if (!CMX_IS(context, CMX_MAGIC_CONTEXT)) {
		set_err(errcode_ret, CL_INVALID_CONTEXT);
		return NULL;
	}
	if (!num_devices || !device_list || !lengths || !binaries) {
		set_err(errcode_ret, CL_INVALID_VALUE);
		return NULL;
	}
	e = device_ids(num_devices, device_list, have_context_device, context, ids);
	if (e) {
		set_err(errcode_ret, e);
		return NULL;
	}
	e = CL_SUCCESS;
	for (cl_uint i = 0; i < num_devices; i++) {
		int bad = !lengths[i] || !binaries[i];

		if (binary_status)
			binary_status[i] = bad ? CL_INVALID_VALUE : CL_SUCCESS;
		if (bad)
			e = CL_INVALID_VALUE;
		else if (lengths[i] > SIZE_MAX - total)
			e = CL_OUT_OF_HOST_MEMORY;
		else
			total += lengths[i];
		lens[i] = lengths[i];
	}
	if (e) {
		set_err(errcode_ret, e);
		return NULL;
	}
	cat = malloc(total);
	if (!cat) {
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	for (cl_uint i = 0; i < num_devices; i++) {
		memcpy(cat + off, binaries[i], lengths[i]);
		off += lengths[i];
	}
	p = program_new(context, num_devices, device_list);
	if (!p) {
		free(cat);
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	p->may_print = cmx_may_print(cat, total);
	in = (struct cmx_CreateProgramWithBinary_in){
	    .program.id = p->id,
	    .context.id = context->id,
	    .devices = {.v = ids, .n = num_devices},
	    .lengths = {.v = lens, .n = num_devices},
	    .binaries = {cat, total},
	};
	memset(&out, 0, sizeof(out));
	if (total <= PROGRAM_ONE_MAX) {
		rc = cmx_rpc_CreateProgramWithBinary(cmx_icd.s, &in, &out, &reply);
	} else {
		/* Too large for one message: in parts (as a large source). */
		struct cmx_CreateProgramWithBinaryParts_in pin = {
		    .program = in.program,
		    .context = in.context,
		    .devices = in.devices,
		    .lengths = in.lengths,
		    .length = total,
		};
		struct cmx_CreateProgramWithBinaryParts_out pout;
		memset(&pout, 0, sizeof(pout));
		pthread_mutex_lock(&parts_lock);
		rc = parts_send(p, cat, total);
		if (!rc)
			rc = cmx_rpc_CreateProgramWithBinaryParts(cmx_icd.s, &pin, NULL, 0, &pout,
								  &reply);
		pthread_mutex_unlock(&parts_lock);
		out.status = pout.status;
		if (!rc && reply.status == CL_OUT_OF_HOST_MEMORY)
			cmx_warn("binaries of %zu bytes: the daemon holds no room for them (past the "
				 "tenant's mem quota?): CL_OUT_OF_HOST_MEMORY",
				 total);
	}
	free(cat);
	if (rc) {
		program_free(p);
		set_err(errcode_ret, cmx_transport_err(rc));
		return NULL;
	}
	e = reply.status;
	if (binary_status && out.status.n == num_devices)
		for (cl_uint i = 0; i < num_devices; i++)
			binary_status[i] = (cl_int)(int64_t)out.status.v[i];
	cmx_reply_fini(&reply);
	/* On failure the daemon made no program: nothing to release there. */
	return program_created(p, e, errcode_ret);
}

static int device_has_il(cl_device_id d)
{
	const struct cmx_devinfo *di = cmx_device_info(d, CL_DEVICE_IL_VERSION);

	return di && di->size > 0 && ((const char *)di->value)[0] != '\0';
}

cl_program CL_API_CALL cmx_clCreateProgramWithIL(cl_context context, const void *il, size_t length,
						 cl_int *errcode_ret)
{
	struct cmx_CreateProgramWithIL_in in;
	int any = 0;
	cl_program p;
	void *copy;

	if (!CMX_IS(context, CMX_MAGIC_CONTEXT)) {
		set_err(errcode_ret, CL_INVALID_CONTEXT);
		return NULL;
	}
	if (!il || !length) {
		set_err(errcode_ret, CL_INVALID_VALUE);
		return NULL;
	}
	for (cl_uint i = 0; i < context->ndevices; i++)
		any |= device_has_il(context->devices[i]);
	if (!any) {
		set_err(errcode_ret, CL_INVALID_OPERATION);
		return NULL;
	}
	copy = malloc(length);
	if (!copy) {
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	memcpy(copy, il, length);
	p = program_new(context, context->ndevices, context->devices);
	if (!p) {
		free(copy);
		set_err(errcode_ret, CL_OUT_OF_HOST_MEMORY);
		return NULL;
	}
	p->il = copy;
	p->il_len = length;
	p->may_print = cmx_may_print(il, length);
	if (length > PROGRAM_ONE_MAX)
		return program_created(p, program_parts(p, context, 1, copy, length), errcode_ret);
	in = (struct cmx_CreateProgramWithIL_in){
	    .program.id = p->id,
	    .context.id = context->id,
	    .il = {copy, length},
	};
	return program_created(p, CMX_SEND(CreateProgramWithIL, &in), errcode_ret);
}

cl_program CL_API_CALL cmx_clCreateProgramWithBuiltInKernels(cl_context context,
							     cl_uint num_devices,
							     const cl_device_id *device_list,
							     const char *kernel_names,
							     cl_int *errcode_ret)
{
	uint64_t ids[PROGRAM_MAX_DEVICES];
	cl_int e;

	if (!CMX_IS(context, CMX_MAGIC_CONTEXT)) {
		set_err(errcode_ret, CL_INVALID_CONTEXT);
		return NULL;
	}
	if (!num_devices || !device_list || !kernel_names) {
		set_err(errcode_ret, CL_INVALID_VALUE);
		return NULL;
	}
	e = device_ids(num_devices, device_list, have_context_device, context, ids);
	/* No device of clmux has built-in kernels: any name is unsupported. */
	set_err(errcode_ret, e ? e : CL_INVALID_VALUE);
	return NULL;
}

/* ---- reference counts ---- */

cl_int CL_API_CALL cmx_clRetainProgram(cl_program program)
{
	if (!CMX_IS(program, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	atomic_fetch_add(&program->refs, 1);
	return CL_SUCCESS;
}

cl_int CL_API_CALL cmx_clReleaseProgram(cl_program program)
{
	struct cmx_ReleaseProgram_in in;

	if (!CMX_IS(program, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	if (atomic_fetch_sub(&program->refs, 1) != 1)
		return CL_SUCCESS;
	in.program.id = program->id;
	(void)CMX_SEND(ReleaseProgram, &in);
	program_free(program);
	return CL_SUCCESS;
}

/* ---- build, compile, link ---- */

cl_int CL_API_CALL cmx_clBuildProgram(cl_program program, cl_uint num_devices,
				      const cl_device_id *device_list, const char *options,
				      void(CL_CALLBACK *pfn_notify)(cl_program, void *),
				      void *user_data)
{
	struct cmx_BuildProgram_in in;
	struct cmx_BuildProgram_out out;
	uint64_t ids[PROGRAM_MAX_DEVICES];
	struct cmx_kinfo *ks = NULL;
	struct cmx_reply reply;
	void *blob = NULL;
	cl_uint nks = 0;
	char *opts, *wire = NULL;
	cl_int e;
	int rc;

	e = build_check(program, num_devices, device_list, pfn_notify, user_data, ids);
	if (e)
		return e;
	opts = dup_options(options);
	if (!opts)
		return CL_OUT_OF_HOST_MEMORY;
	e = program_begin(program);
	if (e) {
		free(opts);
		return e;
	}

	e = cmx_include_prepare(program, opts, &wire);
	if (wire && cmx_may_print(wire, strlen(wire) + 1))
		program->may_print = 1;
	in = (struct cmx_BuildProgram_in){
	    .program.id = program->id,
	    .devices = {.v = ids, .n = num_devices},
	    .options = {wire, wire ? strlen(wire) + 1 : 0},
	};
	memset(&out, 0, sizeof(out));
	rc = e ? 0 : cmx_rpc_BuildProgram(cmx_icd.s, &in, &out, &reply);
	free(wire);
	if (e) {
		/* nothing was built */
	} else if (rc) {
		e = cmx_transport_err(rc);
	} else {
		e = reply.status;
		if (e == CL_SUCCESS)
			e = kinfo_parse(program, &out.kernels, &ks, &nks);
		/* The kernels' strings point into the reply's buffer. */
		if (e == CL_SUCCESS) {
			blob = reply.buf;
			reply.buf = NULL;
		}
		cmx_reply_fini(&reply);
	}

	pthread_mutex_lock(&program->lock);
	free(program->options);
	program->options = opts;
	if (e == CL_SUCCESS) {
		program->kernels = ks;
		program->nkernels = nks;
		program->kernels_blob = blob;
		program->built = 1;
		program->binary_type = CL_PROGRAM_BINARY_TYPE_EXECUTABLE;
	}
	prog_of(program)->busy = 0;
	pthread_mutex_unlock(&program->lock);

	/* The build has ended when the call returns; the spec lets the
	 * callback run on the application's thread. */
	if (pfn_notify)
		pfn_notify(program, user_data);
	return e;
}

cl_int CL_API_CALL cmx_clCompileProgram(cl_program program, cl_uint num_devices,
					const cl_device_id *device_list, const char *options,
					cl_uint num_input_headers, const cl_program *input_headers,
					const char **header_include_names,
					void(CL_CALLBACK *pfn_notify)(cl_program, void *),
					void *user_data)
{
	struct cmx_CompileProgram_in in;
	struct cmx_CompileProgram_out out;
	uint64_t ids[PROGRAM_MAX_DEVICES];
	uint64_t *hids = NULL;
	struct cmx_reply reply;
	size_t names_len = 0, off = 0;
	char *names = NULL, *opts = NULL, *wire = NULL;
	cl_int e;
	int rc;

	e = build_check(program, num_devices, device_list, pfn_notify, user_data, ids);
	if (e)
		return e;
	if ((num_input_headers == 0) != (input_headers == NULL) ||
	    (num_input_headers == 0) != (header_include_names == NULL))
		return CL_INVALID_VALUE;
	if (num_input_headers > 1024)
		return CL_INVALID_VALUE;
	if (!program->source && !program->il)
		return CL_INVALID_OPERATION;
	for (cl_uint i = 0; i < num_input_headers; i++) {
		if (!CMX_IS(input_headers[i], CMX_MAGIC_PROGRAM))
			return CL_INVALID_PROGRAM;
		if (!header_include_names[i])
			return CL_INVALID_VALUE;
		names_len += strlen(header_include_names[i]) + 1;
	}
	if (num_input_headers) {
		hids = malloc(num_input_headers * sizeof(*hids));
		names = malloc(names_len);
		if (!hids || !names) {
			e = CL_OUT_OF_HOST_MEMORY;
			goto out;
		}
		for (cl_uint i = 0; i < num_input_headers; i++) {
			size_t n = strlen(header_include_names[i]) + 1;

			hids[i] = input_headers[i]->id;
			memcpy(names + off, header_include_names[i], n);
			off += n;
		}
	}
	opts = dup_options(options);
	if (!opts) {
		e = CL_OUT_OF_HOST_MEMORY;
		goto out;
	}
	e = program_begin(program);
	if (e)
		goto out;

	e = cmx_include_prepare(program, opts, &wire);
	if (wire && cmx_may_print(wire, strlen(wire) + 1))
		program->may_print = 1;
	for (cl_uint i = 0; i < num_input_headers; i++)
		program->may_print |= input_headers[i]->may_print;
	in = (struct cmx_CompileProgram_in){
	    .program.id = program->id,
	    .devices = {.v = ids, .n = num_devices},
	    .options = {wire, wire ? strlen(wire) + 1 : 0},
	    .headers = {.v = hids, .n = num_input_headers},
	    .header_names = {names, names_len},
	};
	rc = e ? 0 : cmx_rpc_CompileProgram(cmx_icd.s, &in, &out, &reply);
	free(wire);
	if (e) {
		/* nothing was compiled */
	} else if (rc) {
		e = cmx_transport_err(rc);
	} else {
		e = reply.status;
		cmx_reply_fini(&reply);
	}

	pthread_mutex_lock(&program->lock);
	free(program->options);
	program->options = opts;
	opts = NULL;
	program->binary_type =
	    e == CL_SUCCESS ? CL_PROGRAM_BINARY_TYPE_COMPILED_OBJECT : CL_PROGRAM_BINARY_TYPE_NONE;
	prog_of(program)->busy = 0;
	pthread_mutex_unlock(&program->lock);

	if (pfn_notify)
		pfn_notify(program, user_data);
out:
	free(opts);
	free(names);
	free(hids);
	return e;
}

cl_program CL_API_CALL cmx_clLinkProgram(cl_context context, cl_uint num_devices,
					 const cl_device_id *device_list, const char *options,
					 cl_uint num_input_programs,
					 const cl_program *input_programs,
					 void(CL_CALLBACK *pfn_notify)(cl_program, void *),
					 void *user_data, cl_int *errcode_ret)
{
	struct cmx_LinkProgram_in in;
	struct cmx_LinkProgram_out out;
	uint64_t ids[PROGRAM_MAX_DEVICES];
	uint64_t *pids = NULL;
	struct cmx_kinfo *ks = NULL;
	struct cmx_reply reply;
	cl_program p = NULL;
	void *blob = NULL;
	cl_uint nks = 0;
	char *opts = NULL;
	cl_int e;
	int rc;

	if (!CMX_IS(context, CMX_MAGIC_CONTEXT)) {
		set_err(errcode_ret, CL_INVALID_CONTEXT);
		return NULL;
	}
	e = device_ids(num_devices, device_list, have_context_device, context, ids);
	if (e)
		goto fail;
	if (!num_input_programs || !input_programs || (!pfn_notify && user_data) ||
	    num_input_programs > 1024) {
		e = CL_INVALID_VALUE;
		goto fail;
	}
	for (cl_uint i = 0; i < num_input_programs; i++) {
		cl_program ip = input_programs[i];

		if (!CMX_IS(ip, CMX_MAGIC_PROGRAM) || ip->ctx != context) {
			e = CL_INVALID_PROGRAM;
			goto fail;
		}
		/* A source or IL program links only once compiled (binaries:
		 * the daemon checks their type). */
		pthread_mutex_lock(&ip->lock);
		if ((ip->source || ip->il) &&
		    ip->binary_type != CL_PROGRAM_BINARY_TYPE_COMPILED_OBJECT &&
		    ip->binary_type != CL_PROGRAM_BINARY_TYPE_LIBRARY)
			e = CL_INVALID_OPERATION;
		pthread_mutex_unlock(&ip->lock);
		if (e)
			goto fail;
	}
	pids = malloc(num_input_programs * sizeof(*pids));
	opts = dup_options(options);
	if (!pids || !opts) {
		e = CL_OUT_OF_HOST_MEMORY;
		goto fail;
	}
	for (cl_uint i = 0; i < num_input_programs; i++)
		pids[i] = input_programs[i]->id;
	if (num_devices)
		p = program_new(context, num_devices, device_list);
	else
		p = program_new(context, context->ndevices, context->devices);
	if (!p) {
		e = CL_OUT_OF_HOST_MEMORY;
		goto fail;
	}

	in = (struct cmx_LinkProgram_in){
	    .program.id = p->id,
	    .context.id = context->id,
	    .devices = {.v = ids, .n = num_devices},
	    .options = {opts, strlen(opts) + 1},
	    .inputs = {.v = pids, .n = num_input_programs},
	};
	memset(&out, 0, sizeof(out));
	rc = cmx_rpc_LinkProgram(cmx_icd.s, &in, &out, &reply);
	if (rc) {
		e = cmx_transport_err(rc);
		goto fail;
	}
	e = reply.status;
	if (e == CL_SUCCESS)
		e = kinfo_parse(p, &out.kernels, &ks, &nks);
	if (e == CL_SUCCESS) {
		blob = reply.buf;
		reply.buf = NULL;
	}
	cmx_reply_fini(&reply);
	if (e) {
		/* The daemon holds our id after every link: the program a
		 * failed native link made (for its log), or a poisoned id. */
		struct cmx_ReleaseProgram_in rel = {.program.id = p->id};
		(void)CMX_SEND(ReleaseProgram, &rel);
		goto fail;
	}
	p->kernels = ks;
	p->nkernels = nks;
	p->kernels_blob = blob;
	p->options = opts;
	/* As the daemon judges it: the inputs, and the options. */
	p->may_print = cmx_may_print(opts, strlen(opts) + 1);
	for (cl_uint i = 0; i < num_input_programs; i++)
		p->may_print |= input_programs[i]->may_print;
	if (strstr(opts, "-create-library")) {
		p->binary_type = CL_PROGRAM_BINARY_TYPE_LIBRARY;
	} else {
		p->binary_type = CL_PROGRAM_BINARY_TYPE_EXECUTABLE;
		p->built = 1;
	}
	free(pids);
	if (pfn_notify)
		pfn_notify(p, user_data);
	set_err(errcode_ret, CL_SUCCESS);
	return p;
fail:
	if (p)
		program_free(p);
	free(opts);
	free(pids);
	set_err(errcode_ret, e);
	return NULL;
}

cl_int CL_API_CALL cmx_clUnloadCompiler(void)
{
	return CL_SUCCESS;
}

cl_int CL_API_CALL cmx_clUnloadPlatformCompiler(cl_platform_id platform)
{
	if (!CMX_IS(platform, CMX_MAGIC_PLATFORM))
		return CL_INVALID_PLATFORM;
	return CL_SUCCESS;
}

/* ---- queries ---- */

/* A GetProgramInfo answer; *reply holds it until cmx_reply_fini(). */
static cl_int program_info_fwd(cl_program p, cl_program_info param, struct cmx_reply *reply,
			       struct cmx_blob *value)
{
	struct cmx_GetProgramInfo_in in = {.program.id = p->id, .param = param};
	struct cmx_GetProgramInfo_out out;
	int rc;

	memset(&out, 0, sizeof(out));
	rc = cmx_rpc_GetProgramInfo(cmx_icd.s, &in, &out, reply);
	if (rc)
		return cmx_transport_err(rc);
	if (reply->status) {
		cl_int e = reply->status;
		cmx_reply_fini(reply);
		return e;
	}
	*value = out.value;
	return CL_SUCCESS;
}

/* CL_PROGRAM_BINARIES: the daemon sends them concatenated; they are cut by
 * CL_PROGRAM_BINARY_SIZES into the application's per-device buffers. */
static cl_int program_binaries(cl_program p, size_t size, void *value, size_t *size_ret)
{
	size_t need = p->ndevices * sizeof(unsigned char *), total = 0, off = 0;
	unsigned char **dst = value;
	struct cmx_reply rs, rb;
	struct cmx_blob sizes, bins;
	uint64_t n;
	cl_int e;

	if (value && size < need)
		return CL_INVALID_VALUE;
	if (size_ret)
		*size_ret = need;
	if (!value)
		return CL_SUCCESS;
	e = program_info_fwd(p, CL_PROGRAM_BINARY_SIZES, &rs, &sizes);
	if (e)
		return e;
	n = sizes.len / sizeof(uint64_t);
	e = program_info_fwd(p, CL_PROGRAM_BINARIES, &rb, &bins);
	if (e) {
		cmx_reply_fini(&rs);
		return e;
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t len;

		memcpy(&len, (const uint8_t *)sizes.ptr + i * sizeof(len), sizeof(len));
		if (len > bins.len - total) {
			e = CL_OUT_OF_RESOURCES;
			goto out;
		}
		total += len;
	}
	for (uint64_t i = 0; i < n && i < p->ndevices; i++) {
		uint64_t len;

		memcpy(&len, (const uint8_t *)sizes.ptr + i * sizeof(len), sizeof(len));
		if (dst[i] && len)
			memcpy(dst[i], (const uint8_t *)bins.ptr + off, len);
		off += len;
	}
out:
	cmx_reply_fini(&rb);
	cmx_reply_fini(&rs);
	return e;
}

static cl_int program_kernel_names(cl_program p, size_t size, void *value, size_t *size_ret)
{
	size_t len = 1, off = 0;
	cl_int e;
	char *s;

	pthread_mutex_lock(&p->lock);
	if (!p->built) {
		pthread_mutex_unlock(&p->lock);
		return CL_INVALID_PROGRAM_EXECUTABLE;
	}
	for (cl_uint i = 0; i < p->nkernels; i++)
		len += strlen(p->kernels[i].name) + 1;
	s = malloc(len);
	if (!s) {
		pthread_mutex_unlock(&p->lock);
		return CL_OUT_OF_HOST_MEMORY;
	}
	s[0] = '\0';
	for (cl_uint i = 0; i < p->nkernels; i++) {
		size_t n = strlen(p->kernels[i].name);

		if (i)
			s[off++] = ';';
		memcpy(s + off, p->kernels[i].name, n);
		off += n;
	}
	s[off] = '\0';
	pthread_mutex_unlock(&p->lock);
	e = cmx_info_str(size, value, size_ret, s);
	free(s);
	return e;
}

cl_int CL_API_CALL cmx_clGetProgramInfo(cl_program program, cl_program_info param_name,
					size_t param_value_size, void *param_value,
					size_t *param_value_size_ret)
{
	size_t sz = param_value_size, *szr = param_value_size_ret;
	void *v = param_value;

	if (!CMX_IS(program, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	switch (param_name) {
	case CL_PROGRAM_REFERENCE_COUNT: {
		cl_uint refs = atomic_load(&program->refs);
		return cmx_info_copy(sz, v, szr, &refs, sizeof(refs));
	}
	case CL_PROGRAM_CONTEXT:
		return cmx_info_copy(sz, v, szr, &program->ctx, sizeof(program->ctx));
	case CL_PROGRAM_NUM_DEVICES:
		return cmx_info_copy(sz, v, szr, &program->ndevices, sizeof(program->ndevices));
	case CL_PROGRAM_DEVICES:
		return cmx_info_copy(sz, v, szr, program->devices,
				     program->ndevices * sizeof(*program->devices));
	case CL_PROGRAM_SOURCE:
		if (!program->source)
			return cmx_info_str(sz, v, szr, "");
		return cmx_info_copy(sz, v, szr, program->source, program->source_len + 1);
	case CL_PROGRAM_IL:
		if (!program->il) {
			if (szr)
				*szr = 0;
			return CL_SUCCESS;
		}
		return cmx_info_copy(sz, v, szr, program->il, program->il_len);
	case CL_PROGRAM_NUM_KERNELS: {
		size_t n;

		pthread_mutex_lock(&program->lock);
		n = program->nkernels;
		if (!program->built) {
			pthread_mutex_unlock(&program->lock);
			return CL_INVALID_PROGRAM_EXECUTABLE;
		}
		pthread_mutex_unlock(&program->lock);
		return cmx_info_copy(sz, v, szr, &n, sizeof(n));
	}
	case CL_PROGRAM_KERNEL_NAMES:
		return program_kernel_names(program, sz, v, szr);
	case CL_PROGRAM_BINARIES:
		return program_binaries(program, sz, v, szr);
	case CL_PROGRAM_BINARY_SIZES:
	case CL_PROGRAM_SCOPE_GLOBAL_CTORS_PRESENT:
	case CL_PROGRAM_SCOPE_GLOBAL_DTORS_PRESENT: {
		struct cmx_reply reply;
		struct cmx_blob val;
		cl_int e = program_info_fwd(program, param_name, &reply, &val);

		if (e)
			return e;
		e = cmx_info_copy(sz, v, szr, val.ptr, val.len);
		cmx_reply_fini(&reply);
		return e;
	}
	}
	return CL_INVALID_VALUE;
}

cl_int CL_API_CALL cmx_clGetProgramBuildInfo(cl_program program, cl_device_id device,
					     cl_program_build_info param_name,
					     size_t param_value_size, void *param_value,
					     size_t *param_value_size_ret)
{
	struct cmx_GetProgramBuildInfo_in in;
	struct cmx_GetProgramBuildInfo_out out;
	struct cmx_reply reply;
	int rc;

	if (!CMX_IS(program, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	if (!CMX_IS(device, CMX_MAGIC_DEVICE) || !cmx_program_has_device(program, device))
		return CL_INVALID_DEVICE;
	/* The application's own options: the daemon adds to them (argument
	 * info, include directories). */
	if (param_name == CL_PROGRAM_BUILD_OPTIONS) {
		cl_int e = CL_INVALID_PROGRAM; /* not used: options unset */

		pthread_mutex_lock(&program->lock);
		if (program->options)
			e = cmx_info_str(param_value_size, param_value, param_value_size_ret,
					 program->options);
		pthread_mutex_unlock(&program->lock);
		if (e != CL_INVALID_PROGRAM)
			return e;
	}
	in = (struct cmx_GetProgramBuildInfo_in){
	    .program.id = program->id,
	    .device.id = device->id,
	    .param = param_name,
	};
	memset(&out, 0, sizeof(out));
	rc = cmx_rpc_GetProgramBuildInfo(cmx_icd.s, &in, &out, &reply);
	return cmx_info_reply(rc, &reply, &out.value, param_value_size, param_value,
			      param_value_size_ret);
}

cl_int CL_API_CALL cmx_clSetProgramReleaseCallback(
    cl_program program, void(CL_CALLBACK *pfn_notify)(cl_program, void *), void *user_data)
{
	if (!CMX_IS(program, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	/* No device has program-scope global destructors to run first. */
	return CL_INVALID_OPERATION;
}

cl_int CL_API_CALL cmx_clSetProgramSpecializationConstant(cl_program program, cl_uint spec_id,
							  size_t spec_size, const void *spec_value)
{
	if (!CMX_IS(program, CMX_MAGIC_PROGRAM))
		return CL_INVALID_PROGRAM;
	if (!program->il)
		return CL_INVALID_OPERATION;
	if (!spec_value)
		return CL_INVALID_VALUE;
	/* The wire has no call for specialization constants yet. */
	cmx_warn("clSetProgramSpecializationConstant: not forwarded (no wire call)");
	return CL_INVALID_OPERATION;
}
