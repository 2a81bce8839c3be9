// SPDX-License-Identifier: MIT
// Single-producer/single-consumer byte ring in memory shared with a peer.
#ifndef CMX_RING_H
#define CMX_RING_H

#include <stddef.h>
#include <stdint.h>

/*
 * The shared part. Each word the two sides write sits on its own 64-byte
 * line, so the producer's stores never invalidate the consumer's line and
 * back. Positions are free-running byte counts modulo 2^32; the data area
 * is a power of two that follows the control lines.
 */
struct cmx_ring_ctl {
	_Alignas(64) uint32_t head; /* producer: bytes published */
	_Alignas(64) uint32_t tail; /* consumer: bytes consumed */
	_Alignas(64) uint32_t idle; /* consumer: 1 = asleep, ring the doorbell */
	_Alignas(64) uint32_t wait; /* producer: 1 = waiting for room, ring back */
	_Alignas(64) uint8_t data[];
};

#define CMX_RING_CTL 256u
_Static_assert(sizeof(struct cmx_ring_ctl) == CMX_RING_CTL, "ring control lines");

/* One side's view. `pos` is this side's own index (head for a producer,
 * tail for a consumer): kept here and only ever written to the shared
 * page, never read back from it, so a peer cannot move it. */
struct cmx_ring {
	struct cmx_ring_ctl *ctl;
	uint32_t size, mask;
	uint32_t pos;
	uint32_t peer; /* the peer's index, as last read and checked */
};

/* Binds a view to `len` bytes of shared memory at mem (64-aligned). With
 * `reset`, the creator zeroes the control lines. 0 or -EINVAL (too small). */
int cmx_ring_init(struct cmx_ring *r, void *mem, size_t len, int reset);

/* Producer. Copies up to n bytes in; returns how many fitted (0: full),
 * or -EPROTO when the consumer's tail is impossible (behind the published
 * head by more than the ring, or ahead of it). Nothing is visible before
 * cmx_ring_publish(). */
long cmx_ring_write(struct cmx_ring *r, const void *p, size_t n);
/* Makes everything written visible. Returns 1 when the consumer sleeps and
 * needs its doorbell rung. */
int cmx_ring_publish(struct cmx_ring *r);
/* Room for n more bytes right now (also checks the tail as above):
 * 1, 0, or -EPROTO. */
int cmx_ring_room(struct cmx_ring *r, size_t n);

/* Consumer. Bytes readable: 0 when empty, or -EPROTO when the producer's
 * head is impossible (more than the ring ahead, or behind the tail). */
long cmx_ring_readable(struct cmx_ring *r);
/* Copies up to n readable bytes out (dst NULL: skips them); returns the
 * count. Call cmx_ring_readable() first. */
size_t cmx_ring_read(struct cmx_ring *r, void *dst, size_t n);
/* Frees what was read for the producer. Returns 1 when the producer waits
 * for room and needs its doorbell rung. */
int cmx_ring_consume(struct cmx_ring *r);

/* Going to sleep (consumer: idle, producer: wait). Returns 1 when it may:
 * the flag is set and the ring still has nothing for it after a full
 * fence; else 0 with the flag cleared. */
int cmx_ring_sleep_consumer(struct cmx_ring *r);
int cmx_ring_sleep_producer(struct cmx_ring *r, size_t room);
/* Clears the flag on waking. */
void cmx_ring_wake_consumer(struct cmx_ring *r);
void cmx_ring_wake_producer(struct cmx_ring *r);

/* Sleeping on a ring word in shared memory (a futex shared between
 * processes): waits while *word == val, at most timeout_ms. Returns 0 on a
 * wake-up or a changed word, -ETIMEDOUT, or -EINTR. */
int cmx_ring_futex_wait(uint32_t *word, uint32_t val, int timeout_ms);
/* Wakes every sleeper on word. */
void cmx_ring_futex_wake(uint32_t *word);

#endif
