// SPDX-License-Identifier: MIT
// libFuzzer harness for the daemon's decoder: a byte stream is cut into
// framed messages exactly as a connection does, each header checked, each
// call's arguments decoded with its schema descriptor, and the nested blobs
// (kernel and device info) read with the bounds-checked reader.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "frame.h"
#include "compress.h"
#include "proto.gen.h"

static void read_blob(const void *p, size_t n)
{
	struct cmx_reader r;
	uint64_t len;

	cmx_reader_init(&r, p, n);
	while (r.left && !r.bad) {
		cmx_reader_u64(&r);
		cmx_reader_bytes(&r, 65536, &len);
	}
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
			/* Touch every decoded array so ASan sees any overrun. */
			for (unsigned i = 0; i < oi->in->nfields; i++) {
				const struct cmx_field *f = &oi->in->fields[i];
				const char *p = (const char *)args + f->offset;
				volatile uint8_t sink = 0;
				if (f->type == CMX_T_BYTES || f->type == CMX_T_STR) {
					const struct cmx_blob *b = (const void *)p;
					for (uint64_t k = 0; k < b->len; k++)
						sink ^= ((const uint8_t *)b->ptr)[k];
					read_blob(b->ptr, b->len);
				} else if (f->type == CMX_T_U64S || f->type == CMX_T_IDS) {
					const struct cmx_u64s *a = (const void *)p;
					for (uint64_t k = 0; k < a->n; k++)
						sink ^= (uint8_t)a->v[k];
				}
				(void)sink;
			}
		}
		free(copy);
		pos += h.size;
		if (h.flags & CMX_HDR_AREA)
			continue; /* the payload is in the shared area, not the stream */
		if (h.bulk > size - pos)
			return 0;
		if (h.flags & CMX_HDR_LZ4)
			inflate(data + pos, h.bulk);
		pos += h.bulk;
	}
	return 0;
}
