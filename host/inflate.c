// SPDX-License-Identifier: MIT
// Compressed payloads in the daemon: the Compress call, and decoding what
// arrives compressed into a staging buffer (transport/compress.c).
#include "inflate.h"

#include <errno.h>

#include "compress.h"
#include "conn.h"
#include "exec.h"
#include "staging.h"

int cmx_h_Compress(struct cmx_call *c, struct cmx_Compress_in *in, struct cmx_Compress_out *out)
{
	/* The guest asks, the daemon agrees to what it can decode. */
	out->algo = in->algos & CMX_COMPRESS_LZ4;
	if (c->s->conn)
		c->s->conn->lz4 = out->algo != 0;
	return CL_SUCCESS;
}

int cmx_inflate(struct cmx_conn *c, struct cmx_hdr *h, void **bulk)
{
	/* LZ4 shrinks by 255 at most: a claim beyond that is a lie, refused
	 * before anything that large is mapped. */
	uint64_t raw, max = h->bulk < CMX_MAX_BULK / 256 ? h->bulk * 256 : CMX_MAX_BULK;
	void *buf;
	int e = c->lz4 ? cmx_compress_raw_len(*bulk, h->bulk, max, &raw) : -EBADMSG;

	if (!e && !(buf = cmx_staging_get(raw)))
		e = -ENOMEM;
	if (!e) {
		e = cmx_compress_decode(*bulk, h->bulk, buf, raw);
		if (e)
			cmx_staging_put(buf);
	}
	cmx_staging_put(*bulk);
	*bulk = e ? NULL : buf;
	if (!e) {
		h->bulk = raw;
		h->flags &= (uint16_t)~CMX_HDR_LZ4;
	}
	return e;
}
