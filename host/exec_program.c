// SPDX-License-Identifier: MIT
// Handlers: programs and kernels. Builds run on the executor; their reply
// describes every kernel so the guest creates kernels and checks arguments
// without a round trip.
#include "binkeep.h"
#include "buildcheck.h"
#include "defer.h"
#include "exec.h"
#include "incdir.h"
#include "kprintf.h"
#include "log.h"
#include "parts.h"
#include "record.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenant.h"

/* The program `id` of ctx from source (il 0) or IL (il 1). */
static int program_make(struct cmx_call *c, uint64_t id, cl_context ctx, int il, const void *bytes,
			size_t len)
{
	const char *src = bytes ? bytes : "";
	cl_program p;
	cl_int e;

	if (il && c->s->srv->platform_version < 210)
		return CL_INVALID_OPERATION;
	p = il ? clCreateProgramWithIL(ctx, bytes, len, &e)
	       : clCreateProgramWithSource(ctx, 1, &src, &len, &e);
	if (e)
		return e;
	if (cmx_session_add(c->s, id, CMX_K_PROGRAM, p, ctx, 0, NULL)) {
		clReleaseProgram(p);
		return CL_OUT_OF_HOST_MEMORY;
	}
	cmx_kprintf_program(c->s, id, bytes, len);
	return CL_SUCCESS;
}

int cmx_h_CreateProgramWithSource(struct cmx_call *c, struct cmx_CreateProgramWithSource_in *in)
{
	return program_make(c, in->program.id, in->context.h, 0, in->source.ptr, in->source.len);
}

int cmx_h_ProgramPart(struct cmx_call *c, struct cmx_ProgramPart_in *in)
{
	struct cmx_session *s = c->s;
	struct cmx_parts *p;

	if (in->offset == 0) {
		/* A new program's first part: what an earlier one left goes. */
		cmx_parts_drop(s);
		if (!(s->parts = calloc(1, sizeof(*s->parts))))
			return CL_OUT_OF_HOST_MEMORY;
		p = s->parts;
		p->program = in->program;
		p->total = in->total;
		if (!in->total || in->total > CMX_MAX_BULK)
			return cmx_parts_fail(s, CL_INVALID_VALUE);
		if (cmx_tenant_may_alloc(s->tenant, in->total)) {
			cmx_dbg("session %llu: a program of %llu bytes in parts: past the quota",
				(unsigned long long)s->id, (unsigned long long)in->total);
			return cmx_parts_fail(s, CL_OUT_OF_HOST_MEMORY);
		}
		if (!(p->data = malloc(in->total)))
			return cmx_parts_fail(s, CL_OUT_OF_HOST_MEMORY);
		p->charged = in->total;
		cmx_parts_charge(s, (int64_t)in->total);
	}
	p = s->parts;
	if (!p || p->program != in->program)
		return CL_INVALID_VALUE;
	if (p->err)
		return p->err;
	if (in->offset != p->len || in->total != p->total || in->data.len > p->total - p->len)
		return cmx_parts_fail(s, CL_INVALID_VALUE);
	memcpy(p->data + p->len, in->data.ptr, in->data.len);
	p->len += in->data.len;
	return CL_SUCCESS;
}

/* The `length` bytes a creation from parts takes: its payload (a
 * restore's replay of a kept record) or what ProgramPart staged for the
 * program, all of them. CL_SUCCESS or the error, *bytes set. */
static int parts_bytes(struct cmx_call *c, uint64_t program, uint64_t length, const void **bytes)
{
	struct cmx_parts *p = c->s->parts;

	*bytes = c->bulk;
	if (!length)
		return CL_INVALID_VALUE;
	if (c->bulk_len)
		return c->bulk_len == length ? CL_SUCCESS : CL_INVALID_VALUE;
	if (!p || p->program != program)
		return CL_INVALID_VALUE;
	if (p->err)
		return p->err;
	if (p->len != p->total || p->len != length)
		return CL_INVALID_VALUE;
	*bytes = p->data;
	return CL_SUCCESS;
}

/* The staged parts of program are used up, whatever the creation's end. */
static void parts_done(struct cmx_call *c, uint64_t program)
{
	if (!c->bulk_len && c->s->parts && c->s->parts->program == program)
		cmx_parts_drop(c->s);
}

int cmx_h_CreateProgramWithParts(struct cmx_call *c, struct cmx_CreateProgramWithParts_in *in,
				 struct cmx_CreateProgramWithParts_out *out)
{
	const void *bytes;
	int e;

	(void)out;
	/* Sent again after a restore that made it (host/record.c): its
	 * parts may have been used up before the checkpoint. */
	if (c->applied) {
		parts_done(c, in->program.id);
		return CL_SUCCESS;
	}
	e = in->il > 1 ? CL_INVALID_VALUE : parts_bytes(c, in->program.id, in->length, &bytes);
	if (!e)
		e = cmx_record_payload(c, bytes, in->length);
	if (!e)
		e = program_make(c, in->program.id, in->context.h, (int)in->il, bytes,
				 (size_t)in->length);
	parts_done(c, in->program.id);
	return e;
}

/* The program `id` of ctx from n binaries, concatenated in bytes (len),
 * lengths[i] bytes for devs[i]; each one's status in *out (freed with the
 * call). */
static int binary_make(struct cmx_call *c, uint64_t id, cl_context ctx, size_t n,
		       const cl_device_id *devs, const uint64_t *lengths, const void *bytes,
		       size_t len, struct cmx_u64s *out)
{
	const unsigned char **bins;
	size_t *lens, total = 0;
	cl_int *st, e;
	uint64_t *status;
	cl_program p;

	if (c->applied) {
		/* Sent again after a restore that made it (host/record.c):
		 * each binary loaded then (CL_SUCCESS, 0), or it would not
		 * exist. */
		status = calloc(n, sizeof(*status));
		if (!status)
			return CL_OUT_OF_HOST_MEMORY;
		*out = (struct cmx_u64s){status, n};
		c->scratch = status;
		return CL_SUCCESS;
	}
	bins = calloc(n, sizeof(*bins));
	lens = calloc(n, sizeof(*lens));
	st = calloc(n, sizeof(*st));
	status = calloc(n, sizeof(*status));
	if (!bins || !lens || !st || !status) {
		e = CL_OUT_OF_HOST_MEMORY;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (lengths[i] > len - total) {
			e = CL_INVALID_VALUE;
			goto out;
		}
		bins[i] = (const unsigned char *)bytes + total;
		lens[i] = lengths[i];
		total += lens[i];
	}
	p = clCreateProgramWithBinary(ctx, (cl_uint)n, devs, lens, bins, st, &e);
	for (size_t i = 0; i < n; i++)
		status[i] = (uint64_t)(int64_t)st[i];
	out->v = status;
	out->n = n;
	c->scratch = status;
	status = NULL;
	if (!e && cmx_session_add(c->s, id, CMX_K_PROGRAM, p, ctx, 0, NULL)) {
		clReleaseProgram(p);
		e = CL_OUT_OF_HOST_MEMORY;
	}
	if (!e)
		cmx_kprintf_program(c->s, id, bytes, len);
out:
	free(bins);
	free(lens);
	free(st);
	free(status);
	return e;
}

int cmx_h_CreateProgramWithBinary(struct cmx_call *c, struct cmx_CreateProgramWithBinary_in *in,
				  struct cmx_CreateProgramWithBinary_out *out)
{
	if (!in->devices.n || in->lengths.n != in->devices.n)
		return CL_INVALID_VALUE;
	return binary_make(c, in->program.id, in->context.h, in->devices.n,
			   (const cl_device_id *)in->devices.h, in->lengths.v, in->binaries.ptr,
			   in->binaries.len, &out->status);
}

int cmx_h_CreateProgramWithBinaryParts(struct cmx_call *c,
				       struct cmx_CreateProgramWithBinaryParts_in *in,
				       struct cmx_CreateProgramWithBinaryParts_out *out)
{
	const void *bytes = NULL;
	int e;

	if (!in->devices.n || in->lengths.n != in->devices.n)
		e = CL_INVALID_VALUE;
	else if (c->applied)
		/* Sent again after a restore that made it: binary_make()
		 * answers; its parts may have been used up before. */
		e = CL_SUCCESS;
	else
		e = parts_bytes(c, in->program.id, in->length, &bytes);
	if (!e && !c->applied)
		e = cmx_record_payload(c, bytes, in->length);
	if (!e)
		e = binary_make(c, in->program.id, in->context.h, in->devices.n,
				(const cl_device_id *)in->devices.h, in->lengths.v, bytes,
				(size_t)in->length, &out->status);
	parts_done(c, in->program.id);
	return e;
}

int cmx_h_CreateProgramWithIL(struct cmx_call *c, struct cmx_CreateProgramWithIL_in *in)
{
	return program_make(c, in->program.id, in->context.h, 1, in->il.ptr, in->il.len);
}

int cmx_h_ReleaseProgram(struct cmx_call *c, struct cmx_ReleaseProgram_in *in)
{
	cmx_session_release(c->s, in->program.id, CMX_K_PROGRAM);
	return CL_SUCCESS;
}

/*
 * One string of a kernel (arg < 0) or of its argument arg, whole: OpenCL
 * bounds neither names nor attributes (a 4096-character kernel name builds
 * on PoCL), so the size is asked first. What the driver does not give is
 * sent as the one byte NUL; bytes without their NUL (Oclgrind 21.10's
 * attributes) are cut at the first NUL or ended with one.
 */
static struct cmx_blob kernel_str(struct cmx_call *c, cl_kernel k, long arg, cl_uint param)
{
	size_t len = 0;
	char *s = NULL;
	cl_int e;

	e = arg < 0 ? clGetKernelInfo(k, param, 0, NULL, &len)
		    : clGetKernelArgInfo(k, (cl_uint)arg, param, 0, NULL, &len);
	if (e == CL_SUCCESS && len && len < CMX_MAX_ARGS && (s = cmx_call_alloc(c, len + 1))) {
		e = arg < 0 ? clGetKernelInfo(k, param, len, s, NULL)
			    : clGetKernelArgInfo(k, (cl_uint)arg, param, len, s, NULL);
		s[len] = 0;
	}
	if (e == CL_SUCCESS && s)
		return (struct cmx_blob){s, strlen(s) + 1};
	return (struct cmx_blob){"", 1};
}

/*
 * Every kernel of the program, by name, leaving out those the driver fails
 * to create: Oclgrind's clCreateKernelsInProgram hands out a kernel it could
 * not make (clpeak's half-precision kernels: "Unsupported constant type"),
 * on which clGetKernelInfo crashed the daemon, where natively the
 * application never creates it. Without the names (below OpenCL 1.2): all
 * at once. The count, or 0 with nothing allocated.
 */
static cl_uint create_kernels(cl_program p, cl_kernel **out)
{
	size_t len = 0;
	cl_uint n = 0, got = 0;
	char *names, *save = NULL;
	cl_kernel *ks;

	if (clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, 0, NULL, &len) != CL_SUCCESS || !len) {
		if (clCreateKernelsInProgram(p, 0, NULL, &n) != CL_SUCCESS || !n ||
		    !(ks = calloc(n, sizeof(*ks))))
			return 0;
		if (clCreateKernelsInProgram(p, n, ks, &n) != CL_SUCCESS) {
			free(ks);
			return 0;
		}
		*out = ks;
		return n;
	}
	if (!(names = malloc(len + 1)))
		return 0;
	if (clGetProgramInfo(p, CL_PROGRAM_KERNEL_NAMES, len, names, NULL) != CL_SUCCESS)
		names[0] = 0;
	names[len] = 0;
	for (size_t i = 0; names[i]; i++)
		n += names[i] == ';';
	if (!(ks = calloc((size_t)n + 1, sizeof(*ks)))) {
		free(names);
		return 0;
	}
	for (char *name = strtok_r(names, ";", &save); name && got <= n;
	     name = strtok_r(NULL, ";", &save)) {
		cl_int e;
		cl_kernel k = clCreateKernel(p, name, &e);

		if (k && e == CL_SUCCESS)
			ks[got++] = k;
	}
	free(names);
	if (!got) {
		free(ks);
		return 0;
	}
	*out = ks;
	return got;
}

/* The program's first device, for queries that need one (Oclgrind refuses
 * a NULL device even where the program has only one); NULL if none. */
static cl_device_id first_device(cl_program p)
{
	cl_uint n = 0;
	cl_device_id *devs, d = NULL;

	if (clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof(n), &n, NULL) != CL_SUCCESS || !n ||
	    !(devs = calloc(n, sizeof(*devs))))
		return NULL;
	if (clGetProgramInfo(p, CL_PROGRAM_DEVICES, n * sizeof(*devs), devs, NULL) == CL_SUCCESS)
		d = devs[0];
	free(devs);
	return d;
}

/*
 * The kernel info records (schema/program.schema, KernelInfo) of every
 * kernel of p, in memory that lives as long as the call c. Fails only for
 * want of memory.
 */
static cl_int describe_kernels(struct cmx_call *c, cl_program p, struct cmx_KernelInfo_array *out)
{
	cl_kernel *ks = NULL;
	cl_uint n = create_kernels(p, &ks);
	cl_device_id dev = first_device(p);
	struct cmx_KernelInfo *ki = n ? cmx_call_alloc(c, n * sizeof(*ki)) : NULL;
	cl_int e = n && !ki ? CL_OUT_OF_HOST_MEMORY : CL_SUCCESS;

	for (cl_uint k = 0; k < n && !e; k++) {
		struct cmx_KernelArg *args = NULL;
		uint64_t *reqd = cmx_call_alloc(c, 3 * sizeof(*reqd));
		size_t wg[3] = {0, 0, 0};
		cl_uint nargs = 0;

		clGetKernelInfo(ks[k], CL_KERNEL_NUM_ARGS, sizeof(nargs), &nargs, NULL);
		if (!reqd || (nargs && !(args = cmx_call_alloc(c, nargs * sizeof(*args))))) {
			e = CL_OUT_OF_HOST_MEMORY;
			break;
		}
		ki[k].name = kernel_str(c, ks[k], -1, CL_KERNEL_FUNCTION_NAME);
		ki[k].attributes = kernel_str(c, ks[k], -1, CL_KERNEL_ATTRIBUTES);
		/* What reqd_work_group_size says, which the guest checks launches
		 * against: from the driver's own answer, not the attributes'
		 * text (Oclgrind's is garbage). */
		if (!dev || clGetKernelWorkGroupInfo(ks[k], dev, CL_KERNEL_COMPILE_WORK_GROUP_SIZE,
						     sizeof(wg), wg, NULL) != CL_SUCCESS)
			memset(wg, 0, sizeof(wg));
		for (int d = 0; d < 3; d++)
			reqd[d] = wg[d];
		ki[k].reqd = (struct cmx_u64s){reqd, 3};
		for (cl_uint a = 0; a < nargs; a++) {
			cl_kernel_arg_address_qualifier aq = 0;
			cl_kernel_arg_access_qualifier acc = 0;
			cl_kernel_arg_type_qualifier tq = 0;
			clGetKernelArgInfo(ks[k], a, CL_KERNEL_ARG_ADDRESS_QUALIFIER, sizeof(aq),
					   &aq, NULL);
			clGetKernelArgInfo(ks[k], a, CL_KERNEL_ARG_ACCESS_QUALIFIER, sizeof(acc),
					   &acc, NULL);
			clGetKernelArgInfo(ks[k], a, CL_KERNEL_ARG_TYPE_QUALIFIER, sizeof(tq), &tq,
					   NULL);
			args[a] = (struct cmx_KernelArg){
			    .address = aq,
			    .access = acc,
			    .type_qual = tq,
			    .type_name = kernel_str(c, ks[k], a, CL_KERNEL_ARG_TYPE_NAME),
			    .name = kernel_str(c, ks[k], a, CL_KERNEL_ARG_NAME),
			};
		}
		ki[k].args = (struct cmx_KernelArg_array){args, nargs};
	}
	for (cl_uint k = 0; k < n; k++)
		clReleaseKernel(ks[k]);
	free(ks);
	*out = e ? (struct cmx_KernelInfo_array){NULL, 0} : (struct cmx_KernelInfo_array){ki, n};
	return e;
}

/* Argument info is what the guest checks clSetKernelArg against; some
 * drivers keep it only when asked. */
static char *with_arg_info(const char *options)
{
	static const char opt[] = " -cl-kernel-arg-info";
	size_t n = options ? strlen(options) : 0;
	char *s;

	if (options && strstr(options, "-cl-kernel-arg-info"))
		return strdup(options);
	s = malloc(n + sizeof(opt));
	if (s) {
		memcpy(s, options ? options : "", n);
		memcpy(s + n, opt, sizeof(opt));
	}
	return s;
}

/* Native programs that a build, compile or link of this worker works on.
 * Those run on executor threads side by side, and a driver's program is
 * not safe against a second build of itself: PoCL 3.1 drops a program's
 * binaries when a compile starts, and aborts in a link that reads them
 * meanwhile. The loop thread keeps them apart as OpenCL has it: a build
 * or compile of a program that is building, or a link of one, gets
 * CL_INVALID_OPERATION; so does a build or compile of a program that a
 * link is reading. Few are busy at a time (one per executor thread). */
struct cmx_busy_program {
	cl_program p;
	unsigned building, linking;
};

static struct cmx_busy_program *busy_find(struct cmx_server *srv, cl_program p)
{
	struct cmx_busy_programs *bp = &srv->busy_programs;

	for (size_t i = 0; i < bp->n; i++)
		if (bp->v[i].p == p)
			return &bp->v[i];
	return NULL;
}

static int busy_mark(struct cmx_server *srv, cl_program p, int building)
{
	struct cmx_busy_programs *bp = &srv->busy_programs;
	struct cmx_busy_program *b = busy_find(srv, p);

	if (!b) {
		if (bp->n == bp->cap) {
			size_t cap = bp->cap ? 2 * bp->cap : 8;
			void *n = realloc(bp->v, cap * sizeof(*bp->v));
			if (!n)
				return -ENOMEM;
			bp->v = n;
			bp->cap = cap;
		}
		b = &bp->v[bp->n++];
		*b = (struct cmx_busy_program){.p = p};
	}
	if (building)
		b->building++;
	else
		b->linking++;
	return 0;
}

static void busy_unmark(struct cmx_server *srv, cl_program p, int building)
{
	struct cmx_busy_programs *bp = &srv->busy_programs;
	struct cmx_busy_program *b = busy_find(srv, p);

	if (!b)
		return;
	if (building)
		b->building--;
	else
		b->linking--;
	if (!b->building && !b->linking)
		*b = bp->v[--bp->n];
}

/* A build's pre-flight (host/buildcheck.h): the tenant's limits as they
 * were at the call, and the log line of a build a limit stopped; and the
 * native program, held (and marked busy) until the build's end. */
struct build_job {
	struct cmx_build_limits l;
	cl_program p;
	char why[200];
	/* A restore's build (host/binkeep.h): its tenant, the bytes it may
	 * have kept (its mem quota less what else it held at the call), and
	 * the program loaded from a kept binary in p's place (or NULL). */
	int restoring;
	char tenant[CMX_TENANT_NAME];
	uint64_t room;
	cl_program made;
};

/* On the loop: what t's kept binaries may come to (host/binkeep.h), its
 * mem quota less all else it holds. */
static uint64_t keep_room(const struct cmx_tenant *t)
{
	uint64_t other = t->bytes - t->kept;

	if (t->q.mem == CMX_UNLIMITED)
		return CMX_UNLIMITED;
	return t->q.mem > other ? t->q.mem - other : 0;
}

static struct build_job *build_job_create(struct cmx_call *c, cl_int *err)
{
	struct cmx_ref *prog = c->in; /* program is the first argument of both */
	struct build_job *j;
	const struct cmx_quota *q = &c->s->tenant->q;

	if (busy_find(c->s->srv, prog->h)) {
		*err = CL_INVALID_OPERATION;
		return NULL;
	}
	if (!(j = calloc(1, sizeof(*j))) || busy_mark(c->s->srv, prog->h, 1)) {
		free(j);
		*err = CL_OUT_OF_HOST_MEMORY;
		return NULL;
	}
	/* Held by the build until it ends, whatever the guest releases, and
	 * released on the loop: while the mark stands, no other program can
	 * get its address. */
	clRetainProgram(prog->h);
	j->p = prog->h;
	j->l = (struct cmx_build_limits){
	    .tenant = c->s->tenant,
	    .mem = q->build_mem,
	    .secs = q->build_time,
	    .builds = q->builds == CMX_UNLIMITED ? 0 : q->builds,
	};
	/* Without a pre-flight to run: a kept binary skips it. */
	j->restoring = c->s->restore && !cmx_buildcheck_wanted(&j->l);
	snprintf(j->tenant, sizeof(j->tenant), "%s", c->s->tenant->name);
	j->room = keep_room(c->s->tenant);
	return j;
}

/* The program's source, or NULL where it was made from a binary or IL
 * (nothing of the tenant's is compiled then, or the driver compiles it
 * from what it made itself). */
static char *program_source(cl_program p)
{
	size_t n = 0;
	char *src;

	if (clGetProgramInfo(p, CL_PROGRAM_SOURCE, 0, NULL, &n) != CL_SUCCESS || n <= 1 ||
	    !(src = malloc(n + 1)))
		return NULL;
	if (clGetProgramInfo(p, CL_PROGRAM_SOURCE, n, src, NULL) != CL_SUCCESS) {
		free(src);
		return NULL;
	}
	src[n] = '\0';
	return src;
}

/* 1 when the pre-flight stopped the build (j->why says why); else the
 * native build goes on. */
static int preflight(struct build_job *j, cl_program p, const char *opts, int compile,
		     size_t nh, const char *const *hnames, const cl_program *headers)
{
	struct cmx_build_src b = {.compile = compile, .options = opts, .nheaders = nh,
				  .hnames = hnames};
	char **hsrc = NULL;
	int r = 0;

	if (!cmx_buildcheck_wanted(&j->l) || !(b.source = program_source(p)))
		return 0;
	if (nh && !(hsrc = calloc(nh, sizeof(*hsrc))))
		goto out;
	for (size_t i = 0; i < nh; i++)
		if (!(hsrc[i] = program_source(headers[i])) && !(hsrc[i] = strdup("")))
			goto out;
	b.hsources = (const char *const *)hsrc;
	r = cmx_buildcheck_run(&j->l, &b, j->why, sizeof(j->why)) == 1;
out:
	for (size_t i = 0; hsrc && i < nh; i++)
		free(hsrc[i]);
	free(hsrc);
	free((char *)b.source);
	return r;
}

/* On the loop: the stopped build's log line is the program's log until
 * its next build (cmx_h_GetProgramBuildInfo answers from it). */
static void build_done(struct cmx_call *c, int status)
{
	struct build_job *j = c->ctx;
	struct cmx_ref *prog = c->in; /* program is the first argument of both */
	struct cmx_obj *o = c->s->closed ? NULL
					 : cmx_session_obj(c->s, prog->id, CMX_K_PROGRAM);

	if (o) {
		free(o->ext);
		o->ext = j->why[0] ? strdup(j->why) : NULL;
	}
	if (j->made && o && o->h == j->p) {
		/* The object's program is the one loaded from the kept
		 * binary; the one made from source goes (its source stays
		 * the guest's, and its records' for the next checkpoint). */
		o->h = j->made;
		clReleaseProgram(j->p);
	} else if (j->made) {
		clReleaseProgram(j->made);
	}
	busy_unmark(c->s->srv, j->p, 1);
	clReleaseProgram(j->p);
	/* What its build kept, or dropped of others', charged now. */
	if (j->restoring)
		cmx_binkeep_charge(&c->s->srv->tenants);
	free(j);
	c->ctx = NULL;
	cmx_call_done(c, status);
}

/* A restore's build of p, on the executor: for a program of one device
 * made from source, loaded from the binary of an identical build of a
 * session restored beside it (j->made, which build_done() puts in p's
 * place; the driver's build log of it may be empty), else built from
 * source, leaving its binary for the others. */
static cl_int build_restoring(struct build_job *j, cl_program p,
			      const struct cmx_BuildProgram_in *in, const char *opts)
{
	cl_device_id dev = NULL;
	cl_context ctx = NULL;
	cl_uint n = 0;
	char *src;
	cl_int e;
	int mine;

	if (clGetProgramInfo(p, CL_PROGRAM_NUM_DEVICES, sizeof(n), &n, NULL) || n != 1 ||
	    clGetProgramInfo(p, CL_PROGRAM_DEVICES, sizeof(dev), &dev, NULL) ||
	    clGetProgramInfo(p, CL_PROGRAM_CONTEXT, sizeof(ctx), &ctx, NULL) ||
	    (in->devices.n && (in->devices.n != 1 || in->devices.h[0] != (void *)dev)) ||
	    !(src = program_source(p)))
		return clBuildProgram(p, (cl_uint)in->devices.n,
				      in->devices.n ? (const cl_device_id *)in->devices.h : NULL,
				      opts, NULL, NULL);
	j->made = cmx_binkeep_build(j->tenant, j->room, ctx, dev, opts, src, &mine);
	if (j->made) {
		free(src);
		return CL_SUCCESS;
	}
	e = clBuildProgram(p, 1, &dev, opts, NULL, NULL);
	if (mine)
		cmx_binkeep_put(j->tenant, j->room, dev, opts, src, e ? NULL : p);
	free(src);
	return e;
}

static int build_work(struct cmx_call *c)
{
	struct cmx_BuildProgram_in *in = c->in;
	struct cmx_BuildProgram_out *out = c->out;
	struct build_job *j = c->ctx;
	const cl_device_id *devs = in->devices.n ? (const cl_device_id *)in->devices.h : NULL;
	char *given = cmx_incdir_options(c->s->id, in->program.id,
					 in->options.len ? in->options.ptr : NULL);
	char *opts = given ? with_arg_info(given) : NULL;
	cl_int e;

	if (!opts) {
		e = CL_OUT_OF_HOST_MEMORY;
	} else if (c->applied) {
		/* Sent again after a restore that built it (host/record.c). */
		e = CL_SUCCESS;
	} else if (preflight(c->ctx, in->program.h, opts, 0, 0, NULL, NULL)) {
		e = CL_BUILD_PROGRAM_FAILURE;
	} else {
		e = j->restoring ? build_restoring(j, in->program.h, in, opts)
				 : clBuildProgram(in->program.h, (cl_uint)in->devices.n, devs, opts,
						  NULL, NULL);
		/* NVIDIA's compiler emits PTX that ptxas rejects for a kernel
		 * with no parameters once -cl-kernel-arg-info is given: build
		 * again as the application asked, without argument info (the
		 * guest then checks arguments from what it is given), and so
		 * report that build's log. */
		if (e == CL_BUILD_PROGRAM_FAILURE && strcmp(opts, given))
			e = clBuildProgram(in->program.h, (cl_uint)in->devices.n, devs, given,
					   NULL, NULL);
	}
	free(opts);
	free(given);
	cmx_incdir_drop(c->s->id, in->program.id);
	if (e)
		return e;
	/* Under the build's own reference: a guest that released the program
	 * (or ended its session) meanwhile holds none. */
	return describe_kernels(c, j->made ? j->made : in->program.h, &out->kernels);
}

int cmx_h_BuildProgram(struct cmx_call *c, struct cmx_BuildProgram_in *in,
		       struct cmx_BuildProgram_out *out)
{
	cl_int e;

	if (!(c->ctx = build_job_create(c, &e)))
		return e;
	/* A -D option can name printf too. */
	cmx_kprintf_program(c->s, in->program.id, in->options.ptr, in->options.len);
	return cmx_defer_work(c, build_work, build_done);
}

static int compile_work(struct cmx_call *c)
{
	struct cmx_CompileProgram_in *in = c->in;
	size_t nh = in->headers.n;
	const char **names = nh ? calloc(nh, sizeof(*names)) : NULL;
	const char *p = in->header_names.ptr, *end = p ? p + in->header_names.len : p;
	char *opts = cmx_incdir_options(c->s->id, in->program.id,
					in->options.len ? in->options.ptr : NULL);
	cl_int e = CL_SUCCESS;

	if ((nh && !names) || !opts)
		e = CL_OUT_OF_HOST_MEMORY;
	for (size_t i = 0; i < nh && !e; i++) {
		const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
		if (!nul)
			e = CL_INVALID_VALUE;
		names[i] = p;
		p = nul ? nul + 1 : end;
	}
	/* Sent again after a restore that compiled it: done (host/record.c). */
	if (!e && !c->applied &&
	    preflight(c->ctx, in->program.h, opts, 1, nh, names,
		      nh ? (const cl_program *)in->headers.h : NULL))
		e = CL_COMPILE_PROGRAM_FAILURE;
	else if (!e && !c->applied)
		e = clCompileProgram(in->program.h, (cl_uint)in->devices.n,
				     in->devices.n ? (const cl_device_id *)in->devices.h : NULL,
				     opts, (cl_uint)nh,
				     nh ? (const cl_program *)in->headers.h : NULL, names, NULL,
				     NULL);
	free(opts);
	free(names);
	cmx_incdir_drop(c->s->id, in->program.id);
	for (size_t i = 0; i < nh; i++)
		clReleaseProgram(in->headers.h[i]);
	return e;
}

int cmx_h_CompileProgram(struct cmx_call *c, struct cmx_CompileProgram_in *in,
			 struct cmx_CompileProgram_out *out)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->program.id, CMX_K_PROGRAM);
	cl_int e;

	cmx_kprintf_program(c->s, in->program.id, in->options.ptr, in->options.len);
	for (uint64_t i = 0; o && i < in->headers.n; i++) {
		struct cmx_obj *h = cmx_session_obj(c->s, in->headers.v[i], CMX_K_PROGRAM);
		if (h)
			o->flags |= h->flags & CMX_OBJ_PRINTS;
	}
	if (!(c->ctx = build_job_create(c, &e)))
		return e;
	/* The headers are held by the compile until it ends, as the program
	 * is: the guest may release any of them (or end its session)
	 * meanwhile. */
	for (uint64_t i = 0; i < in->headers.n; i++)
		clRetainProgram(in->headers.h[i]);
	return cmx_defer_work(c, compile_work, build_done);
}

/* Every input is a compiled object or a library for every device the link
 * is for: a driver may assert on anything else (PoCL 3.1 aborts on a
 * program whose compile failed), and a guest must not bring down the
 * daemon. */
static cl_int link_inputs_check(struct cmx_LinkProgram_in *in)
{
	for (uint64_t i = 0; i < in->inputs.n; i++) {
		cl_program p = in->inputs.h[i];
		/* As many as the schema lets `devices` hold (max=64): more than
		 * the daemon's root devices, with sub-devices, or repeated. */
		cl_device_id devs[64];
		size_t n = 0;

		if (in->devices.n) {
			n = in->devices.n < 64 ? in->devices.n : 64;
			memcpy(devs, in->devices.h, n * sizeof(*devs));
		} else if (clGetProgramInfo(p, CL_PROGRAM_DEVICES, sizeof(devs), devs, &n) ==
			   CL_SUCCESS) {
			n /= sizeof(*devs);
		} else {
			return CL_INVALID_PROGRAM;
		}
		for (size_t d = 0; d < n; d++) {
			cl_program_binary_type t = CL_PROGRAM_BINARY_TYPE_NONE;
			cl_build_status st = CL_BUILD_NONE;

			clGetProgramBuildInfo(p, devs[d], CL_PROGRAM_BINARY_TYPE, sizeof(t), &t, NULL);
			clGetProgramBuildInfo(p, devs[d], CL_PROGRAM_BUILD_STATUS, sizeof(st), &st,
					      NULL);
			/* A failed compile may keep its binary type (PoCL). */
			if ((t != CL_PROGRAM_BINARY_TYPE_COMPILED_OBJECT &&
			     t != CL_PROGRAM_BINARY_TYPE_LIBRARY) ||
			    st == CL_BUILD_ERROR || st == CL_BUILD_IN_PROGRESS)
				return CL_INVALID_OPERATION;
		}
	}
	return CL_SUCCESS;
}

static int link_work(struct cmx_call *c)
{
	struct cmx_LinkProgram_in *in = c->in;
	struct cmx_LinkProgram_out *out = c->out;
	char *opts = with_arg_info(in->options.len ? in->options.ptr : NULL);
	cl_program p;
	cl_int e;

	if (!opts)
		return CL_OUT_OF_HOST_MEMORY;
	e = link_inputs_check(in);
	if (e) {
		free(opts);
		return e;
	}
	p = clLinkProgram(in->context.h, (cl_uint)in->devices.n,
			  in->devices.n ? (const cl_device_id *)in->devices.h : NULL, opts,
			  (cl_uint)in->inputs.n, (const cl_program *)in->inputs.h, NULL, NULL, &e);
	/* As in build_work: once more without the argument info we added. */
	if ((e == CL_LINK_PROGRAM_FAILURE || e == CL_BUILD_PROGRAM_FAILURE) &&
	    strcmp(opts, in->options.len ? in->options.ptr : "")) {
		if (p)
			clReleaseProgram(p);
		p = clLinkProgram(in->context.h, (cl_uint)in->devices.n,
				  in->devices.n ? (const cl_device_id *)in->devices.h : NULL,
				  in->options.len ? in->options.ptr : NULL, (cl_uint)in->inputs.n,
				  (const cl_program *)in->inputs.h, NULL, NULL, &e);
	}
	free(opts);
	c->result = p;
	if (e)
		return e;
	return describe_kernels(c, p, &out->kernels);
}

static void link_done(struct cmx_call *c, int status)
{
	struct cmx_LinkProgram_in *in = c->in;
	cl_program p = c->result;
	struct cmx_obj *o = NULL;

	/* The id exists after every link, so the guest's ReleaseProgram is
	 * always right: the native program (a failed link may make one, for
	 * its log), or a poisoned id holding the error. */
	if (p && (c->s->closed ||
		  cmx_session_add(c->s, in->program.id, CMX_K_PROGRAM, p, in->context.h, 0, &o)))
		clReleaseProgram(p);
	/* Linked from printing objects, or told to print by an option. */
	for (uint64_t i = 0; o && i < in->inputs.n; i++) {
		struct cmx_obj *from = cmx_session_obj(c->s, in->inputs.v[i], CMX_K_PROGRAM);
		if (from)
			o->flags |= from->flags & CMX_OBJ_PRINTS;
	}
	if (o)
		cmx_kprintf_program(c->s, in->program.id, in->options.ptr, in->options.len);
	else if (!p && status && !c->s->closed)
		cmx_session_add(c->s, in->program.id, CMX_K_PROGRAM, NULL, NULL, status, NULL);
	for (uint64_t i = 0; i < in->inputs.n; i++) {
		busy_unmark(c->s->srv, in->inputs.h[i], 0);
		clReleaseProgram(in->inputs.h[i]);
	}
	clReleaseContext(in->context.h);
	cmx_call_done(c, status);
}

int cmx_h_LinkProgram(struct cmx_call *c, struct cmx_LinkProgram_in *in,
		      struct cmx_LinkProgram_out *out)
{
	if (c->applied) {
		/* Sent again after a restore that linked it (host/record.c):
		 * its kernels described, as the lost reply did. */
		struct cmx_obj *o = cmx_session_obj(c->s, in->program.id, CMX_K_PROGRAM);
		return o && o->h ? describe_kernels(c, o->h, &out->kernels) : CL_INVALID_PROGRAM;
	}
	for (uint64_t i = 0; i < in->inputs.n; i++) {
		struct cmx_busy_program *b = busy_find(c->s->srv, in->inputs.h[i]);
		if (b && b->building)
			return CL_INVALID_OPERATION;
	}
	for (uint64_t i = 0; i < in->inputs.n; i++) {
		if (busy_mark(c->s->srv, in->inputs.h[i], 0)) {
			while (i--)
				busy_unmark(c->s->srv, in->inputs.h[i], 0);
			return CL_OUT_OF_HOST_MEMORY;
		}
	}
	/* Held by the link until it ends: the guest may release the inputs
	 * or the context (or end its session) meanwhile. */
	clRetainContext(in->context.h);
	for (uint64_t i = 0; i < in->inputs.n; i++)
		clRetainProgram(in->inputs.h[i]);
	return cmx_defer_work(c, link_work, link_done);
}

int cmx_h_IncludeFiles(struct cmx_call *c, struct cmx_IncludeFiles_in *in)
{
	struct cmx_IncludeFiles_bulk files;
	void *blob;
	int e;

	/* The payload may be a block of the guest-shared area, which a second
	 * guest thread can rewrite between two looks: the printf scan and the
	 * file writer would see different names and bytes. Both work from one
	 * private copy (docs/protocol.md, "Shared memory is read once"). */
	blob = malloc(c->bulk_len ? c->bulk_len : 1);
	if (!blob)
		return CL_OUT_OF_HOST_MEMORY;
	if (c->bulk_len)
		memcpy(blob, c->bulk, c->bulk_len);
	e = cmx_codec_decode(&cmx_desc_IncludeFiles_bulk, blob, c->bulk_len, &files);
	if (e) {
		free(blob);
		return e == -ENOMEM ? CL_OUT_OF_HOST_MEMORY : CL_INVALID_VALUE;
	}
	/* A header the program includes may print (as the guest judges it:
	 * guest/include.c). */
	for (uint64_t i = 0; i < files.files.n; i++) {
		cmx_kprintf_program(c->s, in->program.id, files.files.v[i].path.ptr,
				    files.files.v[i].path.len);
		cmx_kprintf_program(c->s, in->program.id, files.files.v[i].data.ptr,
				    files.files.v[i].data.len);
	}
	e = cmx_incdir_write(c->s->id, in->program.id, in->dir, &files.files);
	cmx_codec_release(&cmx_desc_IncludeFiles_bulk, &files);
	free(blob);
	return e;
}

int cmx_h_GetProgramInfo(struct cmx_call *c, struct cmx_GetProgramInfo_in *in,
			 struct cmx_GetProgramInfo_out *out)
{
	cl_int e;

	if (in->param == CL_PROGRAM_BINARIES) {
		/* Pointers cannot travel: the binaries come back concatenated. */
		size_t sizes[CMX_MAX_DEVICES], total = 0, n = 0;
		unsigned char *ptrs[CMX_MAX_DEVICES];
		e = clGetProgramInfo(in->program.h, CL_PROGRAM_BINARY_SIZES, sizeof(sizes), sizes,
				     &n);
		if (e)
			return e;
		n /= sizeof(size_t);
		for (size_t i = 0; i < n && i < CMX_MAX_DEVICES; i++)
			if (__builtin_add_overflow(total, sizes[i], &total))
				return CL_OUT_OF_RESOURCES;
		/* Zeroed: the reply never carries what the scratch held before,
		 * whatever the driver leaves unwritten. */
		c->scratch = calloc(1, total ? total : 1);
		if (!c->scratch)
			return CL_OUT_OF_HOST_MEMORY;
		for (size_t i = 0, off = 0; i < n && i < CMX_MAX_DEVICES; off += sizes[i++])
			ptrs[i] = (unsigned char *)c->scratch + off;
		e = clGetProgramInfo(in->program.h, CL_PROGRAM_BINARIES, n * sizeof(*ptrs), ptrs,
				     NULL);
		if (e)
			return e;
		out->value.ptr = c->scratch;
		out->value.len = total;
		return CL_SUCCESS;
	}
	return CMX_INFO(c, &out->value, clGetProgramInfo, in->program.h, (cl_uint)in->param);
}

int cmx_h_GetProgramBuildInfo(struct cmx_call *c, struct cmx_GetProgramBuildInfo_in *in,
			      struct cmx_GetProgramBuildInfo_out *out)
{
	struct cmx_obj *o = cmx_session_obj(c->s, in->program.id, CMX_K_PROGRAM);

	/* A build the pre-flight stopped never reached the driver: its log
	 * and status are the daemon's. */
	if (o && o->ext && in->param == CL_PROGRAM_BUILD_LOG) {
		out->value.ptr = o->ext;
		out->value.len = strlen(o->ext) + 1;
		return CL_SUCCESS;
	}
	if (o && o->ext && in->param == CL_PROGRAM_BUILD_STATUS) {
		static const cl_build_status err = CL_BUILD_ERROR;
		out->value.ptr = (void *)&err;
		out->value.len = sizeof(err);
		return CL_SUCCESS;
	}
	return CMX_INFO(c, &out->value, clGetProgramBuildInfo, in->program.h, in->device.h,
			(cl_uint)in->param);
}
