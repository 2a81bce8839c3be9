// SPDX-License-Identifier: MIT
// Split virtqueue (virtio 1.x, section 2.7), device side: every index,
// length and address the guest wrote is checked before it is used.
#include "virtq.h"

#include <errno.h>
#include <linux/virtio_ring.h>
#include <string.h>

#include "log.h"

/* Ring fields are little-endian (VERSION_1); this device runs on x86 hosts
 * only, so they are read as they lie. */
static inline uint16_t rd16(const void *p)
{
	return __atomic_load_n((const uint16_t *)p, __ATOMIC_RELAXED);
}

size_t cmx_virtq_desc_size(unsigned num)
{
	return 16u * num;
}

size_t cmx_virtq_avail_size(unsigned num)
{
	return 6u + 2u * num;
}

size_t cmx_virtq_used_size(unsigned num)
{
	return 6u + 8u * num;
}

int cmx_virtq_init(struct cmx_virtq *q, unsigned num, void *desc, void *avail, void *used,
		   uint16_t base, cmx_virtq_xlate_fn xlate, void *ctx)
{
	memset(q, 0, sizeof(*q));
	if (!num || num > CMX_VIRTQ_MAX_SIZE || (num & (num - 1)) || !desc || !avail || !used)
		return -EINVAL;
	q->num = (uint16_t)num;
	q->desc = desc;
	q->avail = avail;
	q->used = used;
	q->last_avail = base;
	q->used_idx = base;
	q->xlate = xlate;
	q->ctx = ctx;
	return 0;
}

/* A descriptor, each field loaded once (the guest may rewrite the table
 * while we look): every check and use below works on this copy, and the
 * compiler may not read a field from the table again in place of it. */
static void desc_read(const struct vring_desc *src, struct vring_desc *d)
{
	d->addr = __atomic_load_n(&src->addr, __ATOMIC_RELAXED);
	d->len = __atomic_load_n(&src->len, __ATOMIC_RELAXED);
	d->flags = __atomic_load_n(&src->flags, __ATOMIC_RELAXED);
	d->next = __atomic_load_n(&src->next, __ATOMIC_RELAXED);
}

static uint16_t avail_idx(const struct cmx_virtq *q)
{
	/* Pairs with the driver's store-release of avail->idx after it wrote
	 * the ring entry and the descriptors. */
	return __atomic_load_n(&((struct vring_avail *)q->avail)->idx, __ATOMIC_ACQUIRE);
}

int cmx_virtq_has_avail(const struct cmx_virtq *q)
{
	return q->num && !q->broken && avail_idx(q) != q->last_avail;
}

static int broken(struct cmx_virtq *q, const char *why)
{
	if (!q->broken)
		cmx_warn("virtqueue: %s; the queue stops", why);
	q->broken = 1;
	return -EINVAL;
}

int cmx_virtq_pop(struct cmx_virtq *q, struct cmx_virtq_elem *e)
{
	const struct vring_desc *table = q->desc;
	uint16_t idx, head, i;
	unsigned steps = 0;

	if (!q->num || q->broken)
		return q->broken ? -EINVAL : 0;
	idx = avail_idx(q);
	if (idx == q->last_avail)
		return 0;
	/* More entries than the ring holds is a driver bug, not a wrap. */
	if ((uint16_t)(idx - q->last_avail) > q->num)
		return broken(q, "avail index ran ahead of the ring");
	head = rd16(&((struct vring_avail *)q->avail)->ring[q->last_avail % q->num]);
	if (head >= q->num)
		return broken(q, "avail entry out of range");
	e->head = head;
	e->nout = e->nin = 0;
	e->out_len = e->in_len = 0;
	i = head;
	for (;;) {
		struct vring_desc d;
		void *p;

		desc_read(&table[i], &d);
		/* A chain longer than the table must revisit an entry: a loop. */
		if (++steps > q->num)
			return broken(q, "descriptor chain loops");
		if (d.flags & VRING_DESC_F_INDIRECT)
			return broken(q, "indirect descriptor (not negotiated)");
		if (d.len) {
			p = q->xlate(q->ctx, d.addr, d.len);
			if (!p)
				return broken(q, "descriptor outside guest memory");
			if (d.flags & VRING_DESC_F_WRITE) {
				if (e->nin == CMX_VIRTQ_MAX_SEGS)
					return broken(q, "chain has too many buffers");
				e->in_gpa[e->nin] = d.addr;
				e->in[e->nin].iov_base = p;
				e->in[e->nin++].iov_len = d.len;
				e->in_len += d.len;
			} else {
				if (e->nin)
					return broken(q, "readable buffer after a writable one");
				if (e->nout == CMX_VIRTQ_MAX_SEGS)
					return broken(q, "chain has too many buffers");
				e->out[e->nout].iov_base = p;
				e->out[e->nout++].iov_len = d.len;
				e->out_len += d.len;
			}
		}
		if (!(d.flags & VRING_DESC_F_NEXT))
			break;
		if (d.next >= q->num)
			return broken(q, "next descriptor out of range");
		i = d.next;
	}
	q->last_avail++;
	return 1;
}

void cmx_virtq_push(struct cmx_virtq *q, uint16_t head, uint32_t len)
{
	struct vring_used *u = q->used;
	struct vring_used_elem *el = &u->ring[q->used_idx % q->num];

	el->id = head;
	el->len = len;
	q->used_idx++;
	/* Pairs with the driver's load-acquire of used->idx: the element is
	 * visible before the index that publishes it. */
	__atomic_store_n(&u->idx, q->used_idx, __ATOMIC_RELEASE);
	if (q->log) {
		q->log(q->ctx, q->used_gpa + (uint64_t)((uint8_t *)el - (uint8_t *)u), sizeof(*el));
		q->log(q->ctx, q->used_gpa + offsetof(struct vring_used, idx), sizeof(u->idx));
	}
}

void cmx_virtq_log_in(const struct cmx_virtq *q, const struct cmx_virtq_elem *e, uint64_t len)
{
	for (unsigned i = 0; q->log && i < e->nin && len; i++) {
		uint64_t k = e->in[i].iov_len < len ? e->in[i].iov_len : len;
		q->log(q->ctx, e->in_gpa[i], k);
		len -= k;
	}
}

int cmx_virtq_should_notify(const struct cmx_virtq *q)
{
	if (!q->num)
		return 0;
	/* Orders the used->idx store before reading the driver's flag (the
	 * driver clears the flag, then re-checks used->idx). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return !(rd16(&((struct vring_avail *)q->avail)->flags) & VRING_AVAIL_F_NO_INTERRUPT);
}

/* Copies between an iovec (from off on) and a flat buffer, either way. */
static size_t iov_copy(const struct iovec *iov, unsigned n, size_t off, void *buf, size_t len,
		       int to_iov)
{
	size_t done = 0;

	for (unsigned i = 0; i < n && done < len; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - off;
		if (k > len - done)
			k = len - done;
		if (to_iov)
			memcpy((char *)iov[i].iov_base + off, (char *)buf + done, k);
		else
			memcpy((char *)buf + done, (char *)iov[i].iov_base + off, k);
		done += k;
		off = 0;
	}
	return done;
}

size_t cmx_iov_read(const struct iovec *iov, unsigned n, size_t off, void *dst, size_t len)
{
	size_t k = iov_copy(iov, n, off, dst, len, 0);

	/* The source is guest memory: after this point the compiler may not
	 * replace a load from dst with a second load from the source (even
	 * inlined, with link-time optimisation), so what the caller checks is
	 * what it uses. */
	__asm__ volatile("" ::: "memory");
	return k;
}

size_t cmx_iov_write(const struct iovec *iov, unsigned n, size_t off, const void *src, size_t len)
{
	return iov_copy(iov, n, off, (void *)src, len, 1);
}
