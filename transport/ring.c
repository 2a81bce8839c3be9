// SPDX-License-Identifier: MIT
// SPSC byte ring over shared memory: copies in and out with wrap-around,
// publishes indices with release/acquire, and decides when a doorbell is
// needed with the idle/wait flags (Dekker-style: flag, full fence, re-check).
#include "ring.h"

#include <errno.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int cmx_ring_init(struct cmx_ring *r, void *mem, size_t len, int reset)
{
	size_t size = 1;

	if (!mem || ((uintptr_t)mem & 63) || len < CMX_RING_CTL + 64)
		return -EINVAL;
	while (size * 2 <= len - CMX_RING_CTL && size < (1u << 30))
		size *= 2;
	r->ctl = mem;
	r->size = (uint32_t)size;
	r->mask = (uint32_t)size - 1;
	if (reset)
		memset(mem, 0, CMX_RING_CTL);
	/* Both sides start at 0: the creator zeroed the lines before the
	 * memory was handed over. */
	r->pos = 0;
	r->peer = 0;
	return 0;
}

/* The consumer's tail as the producer sees it: at most `size` behind our
 * head and never ahead of it. */
static int load_tail(struct cmx_ring *r)
{
	/* Acquire pairs with the release store of tail in cmx_ring_consume():
	 * the consumer has finished reading the bytes it gives back. */
	uint32_t t = __atomic_load_n(&r->ctl->tail, __ATOMIC_ACQUIRE);

	if ((uint32_t)(r->pos - t) > r->size)
		return -EPROTO;
	r->peer = t;
	return 0;
}

long cmx_ring_write(struct cmx_ring *r, const void *p, size_t n)
{
	uint32_t room, at, first;
	int e = load_tail(r);

	if (e)
		return e;
	room = r->size - (uint32_t)(r->pos - r->peer);
	if (n > room)
		n = room;
	at = r->pos & r->mask;
	first = r->size - at;
	if (first > n)
		first = (uint32_t)n;
	memcpy(r->ctl->data + at, p, first);
	memcpy(r->ctl->data, (const uint8_t *)p + first, n - first);
	r->pos += (uint32_t)n;
	return (long)n;
}

int cmx_ring_room(struct cmx_ring *r, size_t n)
{
	int e = load_tail(r);

	if (e)
		return e;
	return r->size - (uint32_t)(r->pos - r->peer) >= n;
}

int cmx_ring_publish(struct cmx_ring *r)
{
	/* Release pairs with the acquire load of head in cmx_ring_readable():
	 * the bytes copied in are visible before the head that covers them. */
	__atomic_store_n(&r->ctl->head, r->pos, __ATOMIC_RELEASE);
	/* Pairs with the fence in cmx_ring_sleep_consumer(): either we see its
	 * idle flag, or it sees our head and does not sleep. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&r->ctl->idle, __ATOMIC_RELAXED) != 0;
}

long cmx_ring_readable(struct cmx_ring *r)
{
	/* Acquire pairs with the release store in cmx_ring_publish(). */
	uint32_t h = __atomic_load_n(&r->ctl->head, __ATOMIC_ACQUIRE);
	uint32_t n = h - r->pos;

	if (n > r->size)
		return -EPROTO;
	r->peer = h;
	return (long)n;
}

size_t cmx_ring_read(struct cmx_ring *r, void *dst, size_t n)
{
	uint32_t avail = r->peer - r->pos, at, first;

	if (n > avail)
		n = avail;
	at = r->pos & r->mask;
	first = r->size - at;
	if (first > n)
		first = (uint32_t)n;
	if (dst) {
		memcpy(dst, r->ctl->data + at, first);
		memcpy((uint8_t *)dst + first, r->ctl->data, n - first);
	}
	r->pos += (uint32_t)n;
	return n;
}

int cmx_ring_consume(struct cmx_ring *r)
{
	/* Release pairs with the acquire in load_tail(): our reads of the
	 * bytes are done before the producer may overwrite them. */
	__atomic_store_n(&r->ctl->tail, r->pos, __ATOMIC_RELEASE);
	/* Pairs with the fence in cmx_ring_sleep_producer(). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&r->ctl->wait, __ATOMIC_RELAXED) != 0;
}

int cmx_ring_sleep_consumer(struct cmx_ring *r)
{
	long n;

	__atomic_store_n(&r->ctl->idle, 1, __ATOMIC_RELAXED);
	/* Pairs with the fence in cmx_ring_publish(). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	n = cmx_ring_readable(r);
	if (n == 0)
		return 1;
	cmx_ring_wake_consumer(r);
	return 0; /* data (or a bad head, found by the next read) */
}

int cmx_ring_sleep_producer(struct cmx_ring *r, size_t room)
{
	int ok;

	__atomic_store_n(&r->ctl->wait, 1, __ATOMIC_RELAXED);
	/* Pairs with the fence in cmx_ring_consume(). */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	ok = cmx_ring_room(r, room);
	if (ok == 0)
		return 1;
	cmx_ring_wake_producer(r);
	return 0;
}

void cmx_ring_wake_consumer(struct cmx_ring *r)
{
	/* Relaxed: the flag only decides whether a doorbell is rung; a stale
	 * 1 costs one spare doorbell, never a lost one. */
	__atomic_store_n(&r->ctl->idle, 0, __ATOMIC_RELAXED);
}

void cmx_ring_wake_producer(struct cmx_ring *r)
{
	/* As above: at worst one spare doorbell. */
	__atomic_store_n(&r->ctl->wait, 0, __ATOMIC_RELAXED);
}

int cmx_ring_futex_wait(uint32_t *word, uint32_t val, int timeout_ms)
{
	struct timespec ts = { timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L };

	/* Not FUTEX_PRIVATE: the peer wakes it through its own mapping. */
	if (syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0) == 0)
		return 0;
	return errno == EAGAIN ? 0 : -errno;
}

void cmx_ring_futex_wake(uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}
