// SPDX-License-Identifier: MIT
// Runs the worked example of docs/protocol.md ("Adding a call"): its guest
// function and host handler, compiled against C generated from its schema
// block alone, with the call crossing the real codec both ways.
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "stubs.gen.h"

#include "doc_guest.c"
#include "doc_host.c"

/* The host's device 1, as Hello numbers them. */
static cl_device_id device;

/* What host/call.c does with a call, reduced to one device id: decode
 * the encoded arguments with the opcode's generated descriptor, resolve
 * its ids, run the generated handler table's entry, encode the reply. */
static int host_dispatch(uint16_t op, const uint8_t *args, size_t len, uint8_t *reply,
			 size_t *reply_len)
{
	const struct cmx_opinfo *oi = cmx_op_info(op);
	uint64_t in[32], out[32];
	int64_t status;

	if (!oi || oi->in->size > sizeof(in) || oi->out->size > sizeof(out) ||
	    cmx_codec_decode(oi->in, args, len, in))
		return -1;
	status = CL_SUCCESS;
	for (unsigned i = 0; i < oi->in->nfields; i++) {
		const struct cmx_field *f = &oi->in->fields[i];
		struct cmx_ref *r = (struct cmx_ref *)((char *)in + f->offset);

		if (f->type == CMX_T_ID && f->kind == CMX_K_DEVICE)
			r->h = r->id == 1 ? device : NULL;
		if (f->type == CMX_T_ID && !r->h)
			status = f->err ? f->err : CL_INVALID_DEVICE;
	}
	memset(out, 0, sizeof(out));
	if (status == CL_SUCCESS) {
		struct cmx_call c = {.oi = oi, .op = op, .sync = 1, .in = in, .out = out};
		status = cmx_handlers[op](&c, in, out);
	}
	if (status != CL_SUCCESS)
		memset(out, 0, sizeof(out));
	*reply_len = 8 + cmx_codec_size(oi->out, out);
	memcpy(reply, &status, 8);
	cmx_codec_encode(oi->out, out, reply + 8);
	cmx_codec_release(oi->in, in);
	return 0;
}

/* The guest's session, short-circuited to host_dispatch(). */
int cmx_session_call(struct cmx_session *s, const struct cmx_msgdesc *din, const void *in,
		     const void *bulk, uint64_t bulk_len, const struct cmx_msgdesc *dout, void *out,
		     struct cmx_reply *r, void *dst, uint64_t dst_len)
{
	uint64_t args[64], reply[64];
	size_t n = cmx_codec_size(din, in), rn;
	int64_t status;

	(void)s, (void)bulk, (void)bulk_len, (void)dst, (void)dst_len;
	memset(r, 0, sizeof(*r));
	if (n > sizeof(args))
		return -1;
	cmx_codec_encode(din, in, (uint8_t *)args);
	if (host_dispatch(din->op, (uint8_t *)args, n, (uint8_t *)reply, &rn))
		return -1;
	memcpy(&status, reply, 8);
	r->status = (int32_t)status;
	if (cmx_codec_decode(dout, (uint8_t *)reply + 8, rn - 8, out))
		return -1;
	if (dout->flags & CMX_D_OWNS) {
		r->dout = dout;
		r->out = out;
	}
	return 0;
}

int cmx_session_send(struct cmx_session *s, const struct cmx_msgdesc *d, const void *in,
		     const void *bulk, uint64_t bulk_len)
{
	(void)s, (void)d, (void)in, (void)bulk, (void)bulk_len;
	return -1;
}

void cmx_reply_fini(struct cmx_reply *r)
{
	if (r->dout)
		cmx_codec_release(r->dout, r->out);
	r->dout = NULL;
}

int main(void)
{
	cl_platform_id plat;
	cl_uint native = 0, got = 0, n = 0;

	if (clGetPlatformIDs(1, &plat, &n) != CL_SUCCESS || !n ||
	    clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &device, &n) != CL_SUCCESS || !n) {
		printf("SKIP: no OpenCL device\n");
		return 77;
	}
	clGetDeviceInfo(device, CL_DEVICE_VENDOR_ID, sizeof(native), &native, NULL);
	if (vendor_id(NULL, 1, &got) != CL_SUCCESS || got != native) {
		printf("FAIL: vendor id %#x, the driver says %#x\n", got, native);
		return 1;
	}
	/* An id the session does not hold fails with the field's error. */
	if (vendor_id(NULL, 7, &got) != CL_INVALID_DEVICE) {
		printf("FAIL: an unknown device was not refused\n");
		return 1;
	}
	printf("ok: vendor id %#x through the generated stub, codec and handler table\n", got);
	return 0;
}
