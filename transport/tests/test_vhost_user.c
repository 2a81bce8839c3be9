// SPDX-License-Identifier: MIT
// Unit tests of the vhost-user back end over a socketpair, with a memfd as
// guest memory: the handshake QEMU makes, vring set-up, address checks,
// the dirty log of a live migration, and malformed messages breaking the
// connection.
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vhost_user.h"
#include "vhu_frontend.h"
#include "vq_driver.h"

#define MEM_SIZE (1u << 20)
#define GPA_BASE 0x100000ull
#define UVA_BASE 0x7f0000000000ull

static int sv[2], memfd;
static struct cmx_vhu_dev D;
static int running[CMX_VHU_MAX_QUEUES], nstate, nstopped;

static void queue_state(struct cmx_vhu_dev *d, unsigned idx, int run)
{
	running[idx] = run;
	nstate++;
}

static void stopped(struct cmx_vhu_dev *d)
{
	nstopped++;
}

static const struct cmx_vhu_ops ops = { .queue_state = queue_state, .stopped = stopped };

static void setup(void)
{
	uint64_t cid = 42;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	memfd = memfd_create("guest", MFD_CLOEXEC);
	ck_assert_int_eq(ftruncate(memfd, MEM_SIZE), 0);
	cmx_vhu_dev_init(&D, sv[1], 0, &cid, sizeof(cid), &ops, NULL);
	memset(running, 0, sizeof(running));
	nstate = nstopped = 0;
}

static void teardown(void)
{
	cmx_vhu_dev_fini(&D);
	close(sv[0]);
	close(memfd);
}

/* Sends one front-end message (with fds) and lets the device handle it. */
static int msg(uint32_t req, const void *payload, uint32_t size, const int *fds, unsigned nfds)
{
	vhu_send(sv[0], req, payload, size, fds, nfds);
	return cmx_vhu_dev_handle(&D);
}

/* Reads a reply: its payload size, payload into out. */
static uint32_t reply(uint32_t req, void *out)
{
	uint32_t hdr[3];

	ck_assert_int_eq(recv(sv[0], hdr, 12, MSG_WAITALL), 12);
	ck_assert_uint_eq(hdr[0], req);
	ck_assert_uint_eq(hdr[1], 0x5);
	if (hdr[2])
		ck_assert_int_eq(recv(sv[0], out, hdr[2], MSG_WAITALL), hdr[2]);
	return hdr[2];
}

static void set_mem(void)
{
	uint32_t m[2 + 8] = { 1, 0 };
	uint64_t *r = (uint64_t *)&m[2];

	r[0] = GPA_BASE;
	r[1] = MEM_SIZE - 4096;
	r[2] = UVA_BASE;
	r[3] = 4096; /* mmap_offset */
	ck_assert_int_eq(msg(5, m, sizeof(m), &memfd, 1), 0);
}

START_TEST(handshake)
{
	uint64_t v;
	uint32_t cfg[3 + 2] = { 0, 8, 0 };

	ck_assert_int_eq(msg(1, NULL, 0, NULL, 0), 0);
	ck_assert_uint_eq(reply(1, &v), 8);
	ck_assert(v & (1ull << 32));
	ck_assert(v & (1ull << 30));
	ck_assert_int_eq(msg(15, NULL, 0, NULL, 0), 0);
	ck_assert_uint_eq(reply(15, &v), 8);
	ck_assert(v & (1ull << 9));
	ck_assert_int_eq(msg(16, &v, 8, NULL, 0), 0);
	ck_assert_int_eq(msg(3, NULL, 0, NULL, 0), 0);
	ck_assert_int_eq(msg(24, cfg, sizeof(cfg), NULL, 0), 0);
	ck_assert_uint_eq(reply(24, cfg), 20);
	uint64_t cid;
	memcpy(&cid, &cfg[3], 8);
	ck_assert_uint_eq(cid, 42);
	v = (1ull << 32) | (1ull << 30);
	ck_assert_int_eq(msg(2, &v, 8, NULL, 0), 0);
	/* A feature we did not offer. */
	v = 1ull << 28;
	ck_assert_int_eq(msg(2, &v, 8, NULL, 0), -EINVAL);
	ck_assert(D.broken);
}
END_TEST

START_TEST(memory_bounds)
{
	set_mem();
	ck_assert_ptr_nonnull(cmx_vhu_gpa(&D, GPA_BASE, 16));
	ck_assert_ptr_nonnull(cmx_vhu_gpa(&D, GPA_BASE + MEM_SIZE - 4096 - 16, 16));
	ck_assert_ptr_null(cmx_vhu_gpa(&D, GPA_BASE + MEM_SIZE - 4096 - 15, 16));
	ck_assert_ptr_null(cmx_vhu_gpa(&D, GPA_BASE - 1, 2));
	ck_assert_ptr_null(cmx_vhu_gpa(&D, GPA_BASE + 8, UINT64_MAX));
	ck_assert_ptr_null(cmx_vhu_gpa(&D, UINT64_MAX, 1));
	/* The mapping honours mmap_offset: gpa base is the fd's byte 4096. */
	ck_assert_int_eq(pwrite(memfd, "zz", 2, 4096), 2);
	ck_assert(!memcmp(cmx_vhu_gpa(&D, GPA_BASE, 2), "zz", 2));
}
END_TEST

START_TEST(vring_lifecycle)
{
	uint32_t st[2];
	uint64_t addr[5] = { 0 };
	uint32_t *ai = (uint32_t *)addr;
	uint64_t v = (1ull << 32) | (1ull << 30);
	int kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), call = eventfd(0, EFD_CLOEXEC);

	ck_assert_int_eq(msg(2, &v, 8, NULL, 0), 0);
	set_mem();
	st[0] = 1, st[1] = 256;
	ck_assert_int_eq(msg(8, st, 8, NULL, 0), 0);
	st[1] = 5;
	ck_assert_int_eq(msg(10, st, 8, NULL, 0), 0);
	ai[0] = 1;
	addr[1] = UVA_BASE;	     /* desc */
	addr[2] = UVA_BASE + 0x2000; /* used */
	addr[3] = UVA_BASE + 0x1000; /* avail */
	ck_assert_int_eq(msg(9, addr, 40, NULL, 0), 0);
	v = 1;
	ck_assert_int_eq(msg(13, &v, 8, &call, 1), 0);
	ck_assert_int_eq(msg(12, &v, 8, &kick, 1), 0);
	ck_assert_int_eq(running[1], 0); /* not enabled yet */
	st[1] = 1;
	ck_assert_int_eq(msg(18, st, 8, NULL, 0), 0);
	ck_assert_int_eq(running[1], 1);
	ck_assert_uint_eq(D.vring[1].q.num, 256);
	ck_assert_uint_eq(D.vring[1].q.last_avail, 5);
	ck_assert_ptr_eq(D.vring[1].q.desc, cmx_vhu_gpa(&D, GPA_BASE, 1));
	/* A ring's size may not change while it runs. */
	ck_assert_int_eq(msg(11, st, 8, NULL, 0), 0);
	ck_assert_uint_eq(reply(11, st), 8);
	ck_assert_uint_eq(st[1], 5);
	ck_assert_int_eq(running[1], 0);
	/* Stopped: nothing reads the ring any more. */
	ck_assert_int_eq(cmx_virtq_pop(&D.vring[1].q, &(struct cmx_virtq_elem){ 0 }), 0);
	ck_assert(!cmx_virtq_has_avail(&D.vring[1].q));
	ck_assert(!cmx_virtq_should_notify(&D.vring[1].q));
	/* No ring runs any more: the device as a whole stopped. */
	ck_assert_int_eq(nstopped, 1);
	close(kick);
	close(call);
}
END_TEST

/* Queue 0 with its descriptor table at desc: the kick that would start it
 * is refused, and the ring never runs. */
static void ring_refused(uint64_t desc)
{
	uint32_t st[2] = { 0, 256 };
	uint64_t addr[5] = { 0, desc, UVA_BASE + 0x2000, UVA_BASE + 0x1000, 0 };
	uint64_t v = 1ull << 32; /* no protocol features: enabled at once */
	int kick = eventfd(0, EFD_CLOEXEC);

	ck_assert_int_eq(msg(2, &v, 8, NULL, 0), 0);
	set_mem();
	ck_assert_int_eq(msg(8, st, 8, NULL, 0), 0);
	ck_assert_int_eq(msg(9, addr, 40, NULL, 0), 0);
	v = 0;
	ck_assert_int_eq(msg(12, &v, 8, &kick, 1), -EINVAL);
	ck_assert_int_eq(running[0], 0);
	close(kick);
}

START_TEST(ring_outside_memory_refused)
{
	ring_refused(UVA_BASE + MEM_SIZE - 4096 - 16); /* the table runs past the end */
}
END_TEST

START_TEST(misaligned_ring_refused)
{
	ring_refused(UVA_BASE + 8);
}
END_TEST

START_TEST(bad_messages_break)
{
	uint32_t st[2] = { 7, 256 };

	ck_assert_int_eq(msg(8, st, 8, NULL, 0), -EINVAL); /* no queue 7 */
	ck_assert_int_eq(msg(1, NULL, 0, NULL, 0), -EIO);  /* sticky */
}
END_TEST

START_TEST(bad_ring_size)
{
	uint32_t st[2] = { 0, 100 };

	ck_assert_int_eq(msg(8, st, 8, NULL, 0), -EINVAL);
}
END_TEST

START_TEST(mem_table_fd_count)
{
	uint32_t m[2 + 16] = { 2, 0 };

	ck_assert_int_eq(msg(5, m, sizeof(m), &memfd, 1), -EINVAL);
}
END_TEST

START_TEST(oversized_payload)
{
	uint32_t hdr[3] = { 1, 1, 1u << 20 };

	ck_assert_int_eq(send(sv[0], hdr, 12, 0), 12);
	ck_assert_int_eq(cmx_vhu_dev_handle(&D), -EPROTO);
}
END_TEST

/* Dirty logging (VHOST_F_LOG_ALL, LOG_SHMFD): a ring whose address
 * message asks for it logs the used area's page on each push, a writable
 * buffer's pages are logged as written, and nothing is logged once the
 * front end acks the features without LOG_ALL again (a migration's end). */
START_TEST(dirty_log)
{
	uint32_t st[2];
	uint64_t addr[5] = { 0 }, lb[2] = { 4096, 0 }, v;
	uint32_t *ai = (uint32_t *)addr;
	int kick = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), call = eventfd(0, EFD_CLOEXEC);
	int logfd = memfd_create("log", MFD_CLOEXEC);
	uint64_t used_page = (GPA_BASE + 0x2000) / 4096;
	uint8_t *log;

	ck_assert_int_eq(ftruncate(logfd, 4096), 0);
	log = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, logfd, 0);
	ck_assert_ptr_ne(log, MAP_FAILED);
	ck_assert_int_eq(msg(1, NULL, 0, NULL, 0), 0);
	ck_assert_uint_eq(reply(1, &v), 8);
	ck_assert(v & (1ull << 26));
	ck_assert_int_eq(msg(15, NULL, 0, NULL, 0), 0);
	ck_assert_uint_eq(reply(15, &v), 8);
	ck_assert(v & (1ull << 1));
	ck_assert_int_eq(msg(16, &v, 8, NULL, 0), 0);
	v = (1ull << 32) | (1ull << 30) | (1ull << 26);
	ck_assert_int_eq(msg(2, &v, 8, NULL, 0), 0);
	set_mem();
	/* SET_LOG_BASE is answered with an empty reply. */
	ck_assert_int_eq(msg(6, lb, sizeof(lb), &logfd, 1), 0);
	ck_assert_uint_eq(reply(6, NULL), 0);
	st[0] = 1, st[1] = 256;
	ck_assert_int_eq(msg(8, st, 8, NULL, 0), 0);
	ai[0] = 1;
	ai[1] = 1; /* VHOST_VRING_F_LOG */
	addr[1] = UVA_BASE;
	addr[2] = UVA_BASE + 0x2000;
	addr[3] = UVA_BASE + 0x1000;
	addr[4] = GPA_BASE + 0x2000;
	ck_assert_int_eq(msg(9, addr, 40, NULL, 0), 0);
	v = 1;
	ck_assert_int_eq(msg(13, &v, 8, &call, 1), 0);
	ck_assert_int_eq(msg(12, &v, 8, &kick, 1), 0);
	st[1] = 1;
	ck_assert_int_eq(msg(18, st, 8, NULL, 0), 0);
	ck_assert_int_eq(running[1], 1);
	cmx_virtq_push(&D.vring[1].q, 0, 0);
	ck_assert(log[used_page / 8] & (1u << (used_page % 8)));
	/* Two bytes across a page boundary: both pages. */
	cmx_vhu_log(&D, GPA_BASE + 0x5000 - 1, 2);
	ck_assert(log[(GPA_BASE + 0x4000) / 4096 / 8] & (1u << ((GPA_BASE + 0x4000) / 4096 % 8)));
	ck_assert(log[(GPA_BASE + 0x5000) / 4096 / 8] & (1u << ((GPA_BASE + 0x5000) / 4096 % 8)));
	/* The addresses again with logging off, on the running ring; then
	 * the features without LOG_ALL: nothing more is logged. */
	ai[1] = 0;
	ck_assert_int_eq(msg(9, addr, 40, NULL, 0), 0);
	ck_assert_int_eq(running[1], 1);
	v = (1ull << 32) | (1ull << 30);
	ck_assert_int_eq(msg(2, &v, 8, NULL, 0), 0);
	memset(log, 0, 4096);
	cmx_virtq_push(&D.vring[1].q, 0, 0);
	cmx_vhu_log(&D, GPA_BASE, 4096);
	for (unsigned i = 0; i < 4096; i++)
		ck_assert_uint_eq(log[i], 0);
	/* Moving a running ring is refused. */
	addr[1] = UVA_BASE + 0x4000;
	ck_assert_int_eq(msg(9, addr, 40, NULL, 0), -EINVAL);
	munmap(log, 4096);
	close(logfd);
	close(kick);
	close(call);
}
END_TEST

START_TEST(unknown_request)
{
	ck_assert_int_eq(msg(99, NULL, 0, NULL, 0), -EOPNOTSUPP);
}
END_TEST

START_TEST(peer_gone)
{
	close(sv[0]);
	sv[0] = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(cmx_vhu_dev_handle(&D), -ECONNRESET);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("vhost_user");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, handshake);
	tcase_add_test(tc, memory_bounds);
	tcase_add_test(tc, vring_lifecycle);
	tcase_add_test(tc, ring_outside_memory_refused);
	tcase_add_test(tc, misaligned_ring_refused);
	tcase_add_test(tc, bad_messages_break);
	tcase_add_test(tc, bad_ring_size);
	tcase_add_test(tc, mem_table_fd_count);
	tcase_add_test(tc, oversized_payload);
	tcase_add_test(tc, dirty_log);
	tcase_add_test(tc, unknown_request);
	tcase_add_test(tc, peer_gone);
	return vq_run("vhost_user", tc);
}
