// SPDX-License-Identifier: MIT
// Compressed payloads in the daemon: the Compress call, decoding what
// arrives compressed into a staging buffer, encoding what leaves.
#include "inflate.h"

#include <errno.h>
#include <stdlib.h>

#include "compress.h"
#include "conn.h"
#include "exec.h"
#include "session.h"
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

	if (!e && !(buf = cmx_staging_get(&c->srv->staging, raw)))
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

int cmx_deflate(struct cmx_conn *c, const struct cmx_hdr *h, struct cmx_hdr *packed, void **bulk,
		void (**free_fn)(void *))
{
	/* The notification channel follows its session's call channel. */
	int lz4 = c->lz4 || (c->sess && c->sess->conn && c->sess->conn->lz4);
	uint64_t n;
	void *buf;

	if (!lz4 || h->bulk < CMX_COMPRESS_MIN || (h->flags & CMX_HDR_AREA) || c->rx_ring ||
	    c->tx_ring || c->tx_ring_next || !(buf = malloc(cmx_compress_bound(h->bulk))))
		return 0;
	n = cmx_compress_encode(*bulk, h->bulk, buf);
	if (!n) {
		free(buf);
		return 0;
	}
	*packed = *h;
	packed->bulk = n;
	packed->flags |= CMX_HDR_LZ4;
	if (*free_fn)
		(*free_fn)(*bulk);
	*bulk = buf;
	*free_fn = free;
	return 1;
}
