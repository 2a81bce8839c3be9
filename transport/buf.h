// SPDX-License-Identifier: MIT
// A growable byte writer for text (build options, captured printf output);
// records on the wire are the codec's (schema/, transport/codec.h).
#ifndef CMX_BUF_H
#define CMX_BUF_H

#include <stddef.h>
#include <stdint.h>

struct cmx_buf {
	uint8_t *data;
	size_t len, cap;
	int oom; /* sticky: a failed allocation */
};

void cmx_buf_init(struct cmx_buf *b);
void cmx_buf_fini(struct cmx_buf *b);
/* Raw bytes, no length, no padding (text). */
void cmx_buf_put(struct cmx_buf *b, const void *p, size_t len);

#endif
