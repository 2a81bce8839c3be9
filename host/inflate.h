// SPDX-License-Identifier: MIT
// Compressed payloads on the daemon's side: granting Compress, and turning
// a received compressed payload back into the raw one before its handler.
#ifndef CMX_HOST_INFLATE_H
#define CMX_HOST_INFLATE_H

#include "wire.h"

struct cmx_conn;

/* *h carries CMX_HDR_LZ4 and *bulk (a staging buffer, taken) its encoded
 * payload: on success *bulk is a staging buffer with the raw payload and
 * *h says so (bulk its length, the flag clear). 0, -EBADMSG (not granted,
 * or malformed), -ENOMEM. */
int cmx_inflate(struct cmx_conn *c, struct cmx_hdr *h, void **bulk);

/* Before *h and its payload *bulk (freed with *free_fn) go out on c: when
 * the session was granted LZ4 and the payload is large, travels in the
 * stream and shrinks, fills *packed (CMX_HDR_LZ4, the encoded length),
 * frees the raw payload and points *bulk and *free_fn at the encoded one:
 * 1; else 0, nothing changed. */
int cmx_deflate(struct cmx_conn *c, const struct cmx_hdr *h, struct cmx_hdr *packed, void **bulk,
		void (**free_fn)(void *));

#endif
