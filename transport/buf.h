// SPDX-License-Identifier: MIT
// A growable byte writer and a bounds-checked reader for nested blobs
// (device info lists, kernel info), in the codec's 8-byte-aligned style.
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
void cmx_buf_put_u64(struct cmx_buf *b, uint64_t v);
/* Raw bytes, no length, no padding (text). */
void cmx_buf_put(struct cmx_buf *b, const void *p, size_t len);
/* u64 length, bytes, zero padding to 8. */
void cmx_buf_put_bytes(struct cmx_buf *b, const void *p, size_t len);

struct cmx_reader {
	const uint8_t *p;
	size_t left;
	int bad; /* sticky: a read past the end or over a limit */
};

void cmx_reader_init(struct cmx_reader *r, const void *p, size_t len);
uint64_t cmx_reader_u64(struct cmx_reader *r);
/* Points *out at len bytes in the blob (not copied); at most max bytes. */
const void *cmx_reader_bytes(struct cmx_reader *r, size_t max, uint64_t *len);

#endif
