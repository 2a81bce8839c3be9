// SPDX-License-Identifier: MIT
// A growable byte writer for text.
#include "buf.h"

#include <stdlib.h>
#include <string.h>

void cmx_buf_init(struct cmx_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void cmx_buf_fini(struct cmx_buf *b)
{
	free(b->data);
	cmx_buf_init(b);
}

static uint8_t *reserve(struct cmx_buf *b, size_t n)
{
	if (b->oom)
		return NULL;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + n)
			cap *= 2;
		uint8_t *d = realloc(b->data, cap);
		if (!d) {
			b->oom = 1;
			return NULL;
		}
		b->data = d;
		b->cap = cap;
	}
	b->len += n;
	return b->data + b->len - n;
}

void cmx_buf_put(struct cmx_buf *b, const void *src, size_t len)
{
	uint8_t *p = reserve(b, len);

	if (p && len)
		memcpy(p, src, len);
}
