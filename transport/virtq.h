// SPDX-License-Identifier: MIT
// Split virtqueue, device side, over guest memory the caller translates.
#ifndef CMX_VIRTQ_H
#define CMX_VIRTQ_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Guest-physical [gpa, gpa+len) as a host pointer, or NULL when any byte of
 * it lies outside the guest's memory. */
typedef void *(*cmx_virtq_xlate_fn)(void *ctx, uint64_t gpa, uint64_t len);
/* Marks guest-physical [gpa, gpa+len) as written by the device (a live
 * migration's dirty log). */
typedef void (*cmx_virtq_log_fn)(void *ctx, uint64_t gpa, uint64_t len);

#define CMX_VIRTQ_MAX_SIZE 32768u
/* Buffers of one chain a device accepts: a longer chain breaks the queue. */
#define CMX_VIRTQ_MAX_SEGS 64

struct cmx_virtq {
	uint16_t num; /* 0: not set up */
	void *desc, *avail, *used; /* host pointers to the three areas */
	uint16_t last_avail; /* next avail entry to take */
	uint16_t used_idx;   /* next used entry to fill */
	cmx_virtq_xlate_fn xlate;
	void *ctx;
	/* NULL, or where the device's writes are logged (ctx is its
	 * argument too); used_gpa is the used ring's guest-physical address. */
	cmx_virtq_log_fn log;
	uint64_t used_gpa;
	int broken; /* sticky: the guest broke the ring's rules */
};

/* One descriptor chain: readable (driver-written) buffers first, then the
 * writable ones. */
struct cmx_virtq_elem {
	uint16_t head;
	unsigned nout, nin;
	struct iovec out[CMX_VIRTQ_MAX_SEGS], in[CMX_VIRTQ_MAX_SEGS];
	uint64_t in_gpa[CMX_VIRTQ_MAX_SEGS]; /* the writable buffers' guest addresses */
	uint64_t out_len, in_len;
};

/* Bytes of guest memory the three areas of a queue of num entries take. */
size_t cmx_virtq_desc_size(unsigned num);
size_t cmx_virtq_avail_size(unsigned num);
size_t cmx_virtq_used_size(unsigned num);

/* 0, or -EINVAL when num is not a power of two within the maximum. */
int cmx_virtq_init(struct cmx_virtq *q, unsigned num, void *desc, void *avail, void *used,
		   uint16_t base, cmx_virtq_xlate_fn xlate, void *ctx);
/* Takes the next available chain: 1 and *e filled, 0 when none is
 * available, -EINVAL when the guest broke the rules (the queue is then
 * broken for good: loops, indices or addresses out of range, an indirect
 * table, a readable buffer after a writable one, too many segments). */
int cmx_virtq_pop(struct cmx_virtq *q, struct cmx_virtq_elem *e);
/* Gives a chain back with len bytes written into its writable buffers
 * (the used entry and index logged when q->log is set). */
void cmx_virtq_push(struct cmx_virtq *q, uint16_t head, uint32_t len);
/* Logs the first len bytes of e's writable buffers as written (q->log). */
void cmx_virtq_log_in(const struct cmx_virtq *q, const struct cmx_virtq_elem *e, uint64_t len);
/* 1 when the driver wants an interrupt for what was pushed. */
int cmx_virtq_should_notify(const struct cmx_virtq *q);
/* 1 when a pop would find a chain. */
int cmx_virtq_has_avail(const struct cmx_virtq *q);

/* Copies up to len bytes starting off bytes into iov into dst; the count. */
size_t cmx_iov_read(const struct iovec *iov, unsigned n, size_t off, void *dst, size_t len);
/* Copies len bytes of src into iov at off; the count written. */
size_t cmx_iov_write(const struct iovec *iov, unsigned n, size_t off, const void *src, size_t len);

#endif
