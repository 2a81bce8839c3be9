// SPDX-License-Identifier: MIT
// Unit tests of the shared-memory ring: order, wrap-around, full and empty,
// the doorbell flags, indices a lying peer wrote, and two threads at once.
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "ring.h"

#define MEM (CMX_RING_CTL + 1024) /* a 1024-byte data area */

static _Alignas(64) uint8_t mem[MEM];

/* A producer and a consumer view of the same memory. */
static void pair(struct cmx_ring *p, struct cmx_ring *c)
{
	ck_assert_int_eq(cmx_ring_init(p, mem, sizeof(mem), 1), 0);
	ck_assert_int_eq(cmx_ring_init(c, mem, sizeof(mem), 0), 0);
	ck_assert_uint_eq(p->size, 1024);
}

START_TEST(init_refuses_small_or_unaligned)
{
	struct cmx_ring r;

	ck_assert_int_eq(cmx_ring_init(&r, mem, CMX_RING_CTL + 8, 1), -EINVAL);
	ck_assert_int_eq(cmx_ring_init(&r, mem + 8, sizeof(mem) - 8, 1), -EINVAL);
	ck_assert_int_eq(cmx_ring_init(&r, NULL, sizeof(mem), 1), -EINVAL);
	/* The data area is the largest power of two that fits. */
	ck_assert_int_eq(cmx_ring_init(&r, mem, CMX_RING_CTL + 1000, 1), 0);
	ck_assert_uint_eq(r.size, 512);
}
END_TEST

START_TEST(roundtrip_in_order)
{
	struct cmx_ring p, c;
	char out[16] = {0};

	pair(&p, &c);
	ck_assert_int_eq(cmx_ring_readable(&c), 0);
	ck_assert_int_eq(cmx_ring_write(&p, "hello", 5), 5);
	/* Nothing is visible before publishing. */
	ck_assert_int_eq(cmx_ring_readable(&c), 0);
	ck_assert_int_eq(cmx_ring_publish(&p), 0);
	ck_assert_int_eq(cmx_ring_readable(&c), 5);
	ck_assert_uint_eq(cmx_ring_read(&c, out, 3), 3);
	ck_assert_uint_eq(cmx_ring_read(&c, out + 3, 16), 2);
	ck_assert_str_eq(out, "hello");
	ck_assert_int_eq(cmx_ring_consume(&c), 0);
	ck_assert_int_eq(cmx_ring_readable(&c), 0);
}
END_TEST

START_TEST(wraps_around)
{
	struct cmx_ring p, c;
	uint8_t in[700], out[700];

	pair(&p, &c);
	for (int round = 0; round < 20; round++) {
		for (size_t i = 0; i < sizeof(in); i++)
			in[i] = (uint8_t)(i * 7 + round);
		ck_assert_int_eq(cmx_ring_write(&p, in, sizeof(in)), sizeof(in));
		cmx_ring_publish(&p);
		ck_assert_int_eq(cmx_ring_readable(&c), sizeof(in));
		ck_assert_uint_eq(cmx_ring_read(&c, out, sizeof(out)), sizeof(out));
		cmx_ring_consume(&c);
		ck_assert_mem_eq(in, out, sizeof(in));
	}
	/* 14000 bytes went through a 1024-byte ring: every copy after the
	 * first wrapped at some point. */
	ck_assert_uint_eq(p.pos, 20 * 700);
}
END_TEST

START_TEST(positions_wrap_at_2_32)
{
	struct cmx_ring p, c;
	char out[8];

	pair(&p, &c);
	/* Both sides near the top of the u32 range, as after 4 GiB. */
	p.pos = c.pos = UINT32_MAX - 2;
	__atomic_store_n(&p.ctl->tail, UINT32_MAX - 2, __ATOMIC_RELAXED);
	__atomic_store_n(&p.ctl->head, UINT32_MAX - 2, __ATOMIC_RELAXED);
	ck_assert_int_eq(cmx_ring_write(&p, "abcdefg", 7), 7);
	cmx_ring_publish(&p);
	ck_assert_int_eq(cmx_ring_readable(&c), 7);
	ck_assert_uint_eq(cmx_ring_read(&c, out, 7), 7);
	ck_assert_mem_eq(out, "abcdefg", 7);
	ck_assert_uint_eq(c.pos, 4);
}
END_TEST

START_TEST(full_then_room)
{
	struct cmx_ring p, c;
	uint8_t buf[2048] = {0};

	pair(&p, &c);
	ck_assert_int_eq(cmx_ring_write(&p, buf, sizeof(buf)), 1024);
	ck_assert_int_eq(cmx_ring_write(&p, buf, 1), 0);
	ck_assert_int_eq(cmx_ring_room(&p, 1), 0);
	cmx_ring_publish(&p);
	ck_assert_int_eq(cmx_ring_readable(&c), 1024);
	cmx_ring_read(&c, NULL, 100);
	/* Not consumed yet: still full for the producer. */
	ck_assert_int_eq(cmx_ring_room(&p, 1), 0);
	cmx_ring_consume(&c);
	ck_assert_int_eq(cmx_ring_room(&p, 100), 1);
	ck_assert_int_eq(cmx_ring_room(&p, 101), 0);
}
END_TEST

START_TEST(doorbell_flags)
{
	static uint8_t fill[1024];
	struct cmx_ring p, c;

	pair(&p, &c);
	/* An empty ring lets the consumer sleep, and then the producer must
	 * ring. */
	ck_assert_int_eq(cmx_ring_sleep_consumer(&c), 1);
	cmx_ring_write(&p, "x", 1);
	ck_assert_int_eq(cmx_ring_publish(&p), 1);
	cmx_ring_wake_consumer(&c);
	/* Data published before the consumer looks: it must not sleep. */
	cmx_ring_write(&p, "y", 1);
	ck_assert_int_eq(cmx_ring_publish(&p), 0);
	ck_assert_int_eq(cmx_ring_sleep_consumer(&c), 0);
	ck_assert_int_eq(c.ctl->idle, 0);
	/* A full ring lets the producer wait; consuming asks for the bell. */
	cmx_ring_read(&c, NULL, 2);
	cmx_ring_consume(&c);
	ck_assert_int_eq(cmx_ring_write(&p, fill, 1024), 1024);
	cmx_ring_publish(&p);
	ck_assert_int_eq(cmx_ring_sleep_producer(&p, 1), 1);
	ck_assert_int_eq(cmx_ring_readable(&c), 1024);
	cmx_ring_read(&c, NULL, 1024);
	ck_assert_int_eq(cmx_ring_consume(&c), 1);
	cmx_ring_wake_producer(&p);
	ck_assert_int_eq(cmx_ring_sleep_producer(&p, 1), 0);
}
END_TEST

START_TEST(lying_head_is_refused)
{
	struct cmx_ring p, c;

	pair(&p, &c);
	/* More than the ring ahead of the tail. */
	__atomic_store_n(&p.ctl->head, 1025, __ATOMIC_RELAXED);
	ck_assert_int_eq(cmx_ring_readable(&c), -EPROTO);
	/* Behind the tail (a huge unsigned distance). */
	c.pos = 100;
	__atomic_store_n(&p.ctl->head, 50, __ATOMIC_RELAXED);
	ck_assert_int_eq(cmx_ring_readable(&c), -EPROTO);
	ck_assert_int_eq(cmx_ring_sleep_consumer(&c), 0);
	/* Exactly full is fine. */
	__atomic_store_n(&p.ctl->head, 100 + 1024, __ATOMIC_RELAXED);
	ck_assert_int_eq(cmx_ring_readable(&c), 1024);
}
END_TEST

START_TEST(lying_tail_is_refused)
{
	struct cmx_ring p, c;

	pair(&p, &c);
	cmx_ring_write(&p, "abc", 3);
	cmx_ring_publish(&p);
	/* Ahead of the head: would claim room that holds unread data. */
	__atomic_store_n(&c.ctl->tail, 10, __ATOMIC_RELAXED);
	ck_assert_int_eq(cmx_ring_write(&p, "d", 1), -EPROTO);
	ck_assert_int_eq(cmx_ring_room(&p, 1), -EPROTO);
	/* Our own index was never read back: it is still 3. */
	ck_assert_uint_eq(p.pos, 3);
	/* The consumer overwriting head changes nothing for the producer. */
	__atomic_store_n(&c.ctl->tail, 3, __ATOMIC_RELAXED);
	__atomic_store_n(&p.ctl->head, 999, __ATOMIC_RELAXED);
	ck_assert_int_eq(cmx_ring_write(&p, "d", 1), 1);
	ck_assert_uint_eq(p.pos, 4);
}
END_TEST

/* Two threads: a producer pushing a counting sequence in odd-sized pieces,
 * a consumer checking it, both spinning on the indices. */
#define STREAM (4u << 20)

static void *produce(void *arg)
{
	struct cmx_ring *p = arg;
	uint8_t piece[333];
	uint32_t sent = 0;

	while (sent < STREAM) {
		size_t n = sizeof(piece) - sent % 37, done = 0;
		if (n > STREAM - sent)
			n = STREAM - sent;
		for (size_t i = 0; i < n; i++)
			piece[i] = (uint8_t)((sent + i) * 131 >> 3);
		while (done < n) {
			long w = cmx_ring_write(p, piece + done, n - done);
			if (w < 0)
				return (void *)1;
			done += (size_t)w;
			cmx_ring_publish(p);
			if (!w)
				sched_yield(); /* full: on a busy 2-core machine the
						* consumer may share this core */
		}
		sent += (uint32_t)n;
	}
	return NULL;
}

START_TEST(two_threads)
{
	static _Alignas(64) uint8_t big[CMX_RING_CTL + 4096];
	struct cmx_ring p, c;
	pthread_t t;
	uint32_t got = 0;
	uint8_t buf[500];
	void *rc;

	ck_assert_int_eq(cmx_ring_init(&p, big, sizeof(big), 1), 0);
	ck_assert_int_eq(cmx_ring_init(&c, big, sizeof(big), 0), 0);
	pthread_create(&t, NULL, produce, &p);
	while (got < STREAM) {
		long n = cmx_ring_readable(&c);
		ck_assert_int_ge(n, 0);
		n = (long)cmx_ring_read(&c, buf, sizeof(buf));
		if (!n)
			sched_yield(); /* empty: let the producer run */
		for (long i = 0; i < n; i++)
			ck_assert_uint_eq(buf[i], (uint8_t)((got + (uint32_t)i) * 131 >> 3));
		got += (uint32_t)n;
		cmx_ring_consume(&c);
	}
	pthread_join(t, &rc);
	ck_assert_ptr_null(rc);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ring");
	TCase *tc = tcase_create("ring");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, init_refuses_small_or_unaligned);
	tcase_add_test(tc, roundtrip_in_order);
	tcase_add_test(tc, wraps_around);
	tcase_add_test(tc, positions_wrap_at_2_32);
	tcase_add_test(tc, full_then_room);
	tcase_add_test(tc, doorbell_flags);
	tcase_add_test(tc, lying_head_is_refused);
	tcase_add_test(tc, lying_tail_is_refused);
	tcase_add_test(tc, two_threads);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
