// SPDX-License-Identifier: MIT
// Byte writer and bounds-checked reader for nested blobs.
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

void cmx_buf_put_u64(struct cmx_buf *b, uint64_t v)
{
	uint8_t *p = reserve(b, 8);

	if (p)
		memcpy(p, &v, 8);
}

void cmx_buf_put(struct cmx_buf *b, const void *src, size_t len)
{
	uint8_t *p = reserve(b, len);

	if (p && len)
		memcpy(p, src, len);
}

void cmx_buf_put_bytes(struct cmx_buf *b, const void *src, size_t len)
{
	size_t padded = (len + 7) & ~(size_t)7;
	uint8_t *p;

	cmx_buf_put_u64(b, len);
	p = reserve(b, padded);
	if (!p)
		return;
	if (len)
		memcpy(p, src, len);
	memset(p + len, 0, padded - len);
}

void cmx_reader_init(struct cmx_reader *r, const void *p, size_t len)
{
	r->p = p;
	r->left = len;
	r->bad = 0;
}

uint64_t cmx_reader_u64(struct cmx_reader *r)
{
	uint64_t v;

	if (r->bad || r->left < 8) {
		r->bad = 1;
		return 0;
	}
	memcpy(&v, r->p, 8);
	r->p += 8;
	r->left -= 8;
	return v;
}

const void *cmx_reader_bytes(struct cmx_reader *r, size_t max, uint64_t *len)
{
	uint64_t n = cmx_reader_u64(r);
	size_t padded;
	const void *p;

	if (r->bad || n > max || n > r->left) {
		r->bad = 1;
		*len = 0;
		return NULL;
	}
	padded = ((size_t)n + 7) & ~(size_t)7;
	if (padded > r->left) {
		r->bad = 1;
		*len = 0;
		return NULL;
	}
	p = r->p;
	r->p += padded;
	r->left -= padded;
	*len = n;
	return p;
}
