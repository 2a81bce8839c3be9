// SPDX-License-Identifier: MIT
// libFuzzer harness for the daemon's decoder: a byte stream is cut into
// framed messages exactly as a connection does, each header checked, each
// call's arguments decoded with its schema descriptor, and the records
// (include files, and kernel and device info) with theirs.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "compress.h"
#include "proto.gen.h"

/* Touches every decoded byte and element, records within records, so
 * that ASan sees any overrun. */
static void touch(const struct cmx_msgdesc *d, const void *args)
{
	volatile uint8_t sink = 0;

	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		const char *p = (const char *)args + f->offset;

		if (f->type == CMX_T_BYTES || f->type == CMX_T_STR) {
			const struct cmx_blob *b = (const void *)p;
			for (uint64_t k = 0; k < b->len; k++)
				sink ^= ((const uint8_t *)b->ptr)[k];
		} else if (f->type == CMX_T_U64S || f->type == CMX_T_IDS) {
			const struct cmx_u64s *a = (const void *)p;
			for (uint64_t k = 0; k < a->n; k++)
				sink ^= (uint8_t)a->v[k];
		} else if (f->type == CMX_T_RECS) {
			const struct cmx_recs *a = (const void *)p;
			for (uint64_t k = 0; k < a->n; k++)
				touch(f->rec, (const char *)a->v + k * f->rec->size);
		}
	}
	(void)sink;
}

/* Bytes decoded as a message of d (records: the daemon's own decoder for
 * IncludeFiles, the guest's for the daemon's kernel and device info). */
static void decode_as(const struct cmx_msgdesc *d, const void *p, size_t n)
{
	uint64_t out[64];
	uint8_t *copy = malloc(n ? n : 8);

	if (!copy || d->size > sizeof(out)) {
		free(copy);
		return;
	}
	if (n)
		memcpy(copy, p, n);
	if (!cmx_codec_decode(d, copy, n, out)) {
		touch(d, out);
		cmx_codec_release(d, out);
	}
	free(copy);
}

/* A compressed payload, decoded as the daemon does (host/inflate.c). */
static void inflate(const uint8_t *p, uint64_t len)
{
	uint64_t raw;
	void *dst;

	if (cmx_compress_raw_len(p, len, len < (1ull << 20) ? len * 256 : 256ull << 20, &raw))
		return;
	dst = malloc(raw);
	if (dst)
		(void)cmx_compress_decode(p, len, dst, raw);
	free(dst);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t args[4096]; /* the largest decoded struct fits with room */
	size_t pos = 0;

	while (size - pos >= CMX_HDR_SIZE) {
		struct cmx_hdr h;
		const struct cmx_opinfo *oi;
		uint8_t *copy;

		memcpy(&h, data + pos, CMX_HDR_SIZE);
		pos += CMX_HDR_SIZE;
		if (cmx_frame_check_call(&h) || h.size > size - pos)
			return 0; /* the daemon ends the connection here */
		oi = cmx_op_info(h.op);
		/* The daemon decodes from an aligned copy; so does this. */
		copy = malloc(h.size ? h.size : 8);
		memcpy(copy, data + pos, h.size);
		if (oi->in->size <= sizeof(args) && !cmx_codec_decode(oi->in, copy, h.size, args)) {
			touch(oi->in, args);
			/* Each bytes argument as the records the guest decodes. */
			for (unsigned i = 0; i < oi->in->nfields; i++) {
				const struct cmx_field *f = &oi->in->fields[i];
				const struct cmx_blob *b = (const void *)((char *)args + f->offset);
				if (f->type != CMX_T_BYTES)
					continue;
				decode_as(&cmx_desc_BuildProgram_out, b->ptr, b->len);
				decode_as(&cmx_desc_GetDeviceInfoAll_out, b->ptr, b->len);
			}
			cmx_codec_release(oi->in, args);
		}
		free(copy);
		pos += h.size;
		if (h.flags & CMX_HDR_AREA)
			continue; /* the payload is in the shared area, not the stream */
		if (h.bulk > size - pos)
			return 0;
		if (h.flags & CMX_HDR_LZ4)
			inflate(data + pos, h.bulk);
		else if (h.op == CMX_OP_IncludeFiles)
			decode_as(&cmx_desc_IncludeFiles_bulk, data + pos, h.bulk);
		pos += h.bulk;
	}
	return 0;
}
