// SPDX-License-Identifier: MIT
// Unit tests of the split virtqueue: chains taken apart, and every way a
// guest can lie refused with the queue stopped.
#include <check.h>
#include <errno.h>

#include "vq_driver.h"

static struct arena A;
static struct drv D;
static struct cmx_virtq Q;
static struct cmx_virtq_elem E;

static void setup(void)
{
	arena_init(&A);
	drv_init(&D, &A, &Q, 0);
}

static void teardown(void)
{
	free(A.mem);
}

START_TEST(pop_chain)
{
	uint64_t g[3] = { arena_alloc(&A, 44), arena_alloc(&A, 100), arena_alloc(&A, 4096) };
	uint32_t l[3] = { 44, 100, 4096 };
	uint16_t id;
	uint32_t len;

	ck_assert_int_eq(cmx_virtq_pop(&Q, &E), 0);
	memcpy(arena_xlate(&A, g[1], 5), "hello", 5);
	uint16_t head = drv_add(&D, g, l, 2, 1);
	ck_assert(cmx_virtq_has_avail(&Q));
	ck_assert_int_eq(cmx_virtq_pop(&Q, &E), 1);
	ck_assert_uint_eq(E.head, head);
	ck_assert_uint_eq(E.nout, 2);
	ck_assert_uint_eq(E.nin, 1);
	ck_assert_uint_eq(E.out_len, 144);
	ck_assert_uint_eq(E.in_len, 4096);
	char buf[5];
	ck_assert_uint_eq(cmx_iov_read(E.out, E.nout, 44, buf, 5), 5);
	ck_assert(!memcmp(buf, "hello", 5));
	ck_assert_uint_eq(cmx_iov_write(E.in, E.nin, 4090, "abcdefgh", 8), 6);
	cmx_virtq_push(&Q, E.head, 7);
	ck_assert(drv_used(&D, &id, &len));
	ck_assert_uint_eq(id, head);
	ck_assert_uint_eq(len, 7);
	ck_assert_int_eq(cmx_virtq_pop(&Q, &E), 0);
	ck_assert(cmx_virtq_should_notify(&Q));
	D.avail->flags = VRING_AVAIL_F_NO_INTERRUPT;
	ck_assert(!cmx_virtq_should_notify(&Q));
}
END_TEST

static void expect_broken(void)
{
	ck_assert_int_eq(cmx_virtq_pop(&Q, &E), -EINVAL);
	ck_assert(Q.broken);
	ck_assert_int_eq(cmx_virtq_pop(&Q, &E), -EINVAL); /* sticky */
}

START_TEST(refuse_loop)
{
	uint64_t g[2] = { arena_alloc(&A, 8), arena_alloc(&A, 8) };
	uint32_t l[2] = { 8, 8 };

	drv_add(&D, g, l, 2, 0);
	D.desc[1].flags |= VRING_DESC_F_NEXT;
	D.desc[1].next = 0;
	expect_broken();
}
END_TEST

START_TEST(refuse_outside_memory)
{
	uint64_t g[1] = { A.base + ARENA_SIZE - 4 };
	uint32_t l[1] = { 8 };

	drv_add(&D, g, l, 1, 0);
	expect_broken();
}
END_TEST

START_TEST(refuse_wrapping_address)
{
	uint64_t g[1] = { UINT64_MAX - 2 };
	uint32_t l[1] = { 8 };

	drv_add(&D, g, l, 1, 0);
	expect_broken();
}
END_TEST

START_TEST(refuse_next_out_of_range)
{
	uint64_t g[2] = { arena_alloc(&A, 8), arena_alloc(&A, 8) };
	uint32_t l[2] = { 8, 8 };

	drv_add(&D, g, l, 2, 0);
	D.desc[0].next = QNUM;
	expect_broken();
}
END_TEST

START_TEST(refuse_head_out_of_range)
{
	uint64_t g[1] = { arena_alloc(&A, 8) };
	uint32_t l[1] = { 8 };

	drv_add(&D, g, l, 1, 0);
	D.avail->ring[0] = 999;
	expect_broken();
}
END_TEST

START_TEST(refuse_avail_ahead)
{
	D.avail->idx = QNUM + 1;
	expect_broken();
}
END_TEST

START_TEST(refuse_readable_after_writable)
{
	uint64_t g[2] = { arena_alloc(&A, 8), arena_alloc(&A, 8) };
	uint32_t l[2] = { 8, 8 };

	drv_add(&D, g, l, 1, 1);
	D.desc[0].flags |= VRING_DESC_F_WRITE;
	D.desc[1].flags &= (uint16_t)~VRING_DESC_F_WRITE;
	expect_broken();
}
END_TEST

START_TEST(refuse_indirect)
{
	uint64_t g[1] = { arena_alloc(&A, 16) };
	uint32_t l[1] = { 16 };

	drv_add(&D, g, l, 1, 0);
	D.desc[0].flags |= VRING_DESC_F_INDIRECT;
	expect_broken();
}
END_TEST

START_TEST(init_checks_size)
{
	struct cmx_virtq q;

	ck_assert_int_eq(cmx_virtq_init(&q, 12, D.desc, D.avail, D.used, 0, arena_xlate, &A),
			 -EINVAL);
	ck_assert_int_eq(cmx_virtq_init(&q, 65536, D.desc, D.avail, D.used, 0, arena_xlate, &A),
			 -EINVAL);
	ck_assert_int_eq(cmx_virtq_init(&q, 0, D.desc, D.avail, D.used, 0, arena_xlate, &A),
			 -EINVAL);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("virtq");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, pop_chain);
	tcase_add_test(tc, refuse_loop);
	tcase_add_test(tc, refuse_outside_memory);
	tcase_add_test(tc, refuse_wrapping_address);
	tcase_add_test(tc, refuse_next_out_of_range);
	tcase_add_test(tc, refuse_head_out_of_range);
	tcase_add_test(tc, refuse_avail_ahead);
	tcase_add_test(tc, refuse_readable_after_writable);
	tcase_add_test(tc, refuse_indirect);
	tcase_add_test(tc, init_checks_size);
	return vq_run("virtq", tc);
}
