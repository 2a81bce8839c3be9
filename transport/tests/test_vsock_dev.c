// SPDX-License-Identifier: MIT
// Unit tests of the virtio-vsock device: connection set-up and refusal,
// data both ways under credit, closing, and malformed packets.
#include <check.h>
#include <errno.h>
#include <linux/virtio_vsock.h>

#include "vq_driver.h"
#include "vsock_dev.h"

#define GUEST_CID 7
#define PORT 7272

static struct arena A;
static struct drv RX, TX;
static struct cmx_virtq RQ, TQ;
static struct cmx_vsock_dev V;

/* What the device told its user. */
static struct cmx_vsock_stream *accepted;
static uint8_t got[1 << 16];
static size_t ngot;
static int nclosed, nwritable;
static size_t take_max = SIZE_MAX; /* what t_data takes of each packet */

static int t_accept(void *ctx, struct cmx_vsock_stream *st)
{
	if (st->host_port != PORT)
		return -ECONNREFUSED;
	accepted = st;
	return 0;
}

static size_t t_data(void *ctx, struct cmx_vsock_stream *st, const struct iovec *iov, unsigned n,
		     size_t off, size_t len)
{
	size_t k = len < take_max ? len : take_max;

	ngot += cmx_iov_read(iov, n, off, got + ngot, k);
	return k;
}

static void t_closed(void *ctx, struct cmx_vsock_stream *st)
{
	nclosed++;
	accepted = NULL;
}

static void t_writable(void *ctx, struct cmx_vsock_stream *st)
{
	nwritable++;
}

static const struct cmx_vsock_ops ops = { t_accept, t_data, t_closed, t_writable };

static void setup(void)
{
	arena_init(&A);
	drv_init(&RX, &A, &RQ, 0);
	drv_init(&TX, &A, &TQ, 0x400);
	cmx_vsock_dev_init(&V, GUEST_CID, &RQ, &TQ, &ops, NULL);
	accepted = NULL;
	ngot = 0;
	nclosed = nwritable = 0;
}

static void teardown(void)
{
	cmx_vsock_dev_fini(&V);
	free(A.mem);
}

/* The guest posts n rx buffers of header + size bytes (one descriptor). */
static void post_rx(unsigned n, uint32_t size)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t g[1] = { arena_alloc(&A, CMX_VSOCK_HDR_SIZE + size) };
		uint32_t l[1] = { CMX_VSOCK_HDR_SIZE + size };
		drv_add(&RX, g, l, 0, 1);
	}
}

/* The guest sends a packet on the tx queue (header and payload apart). */
static int send_pkt(uint16_t op, uint32_t src_port, uint32_t dst_port, const void *data,
		    uint32_t len, uint32_t buf_alloc, uint32_t fwd_cnt)
{
	struct virtio_vsock_hdr h = {
		.src_cid = GUEST_CID, .dst_cid = 2, .src_port = src_port, .dst_port = dst_port,
		.len = len, .type = VIRTIO_VSOCK_TYPE_STREAM, .op = op, .buf_alloc = buf_alloc,
		.fwd_cnt = fwd_cnt,
	};
	uint64_t g[2] = { arena_alloc(&A, sizeof(h)), arena_alloc(&A, len ? len : 1) };
	uint32_t l[2] = { sizeof(h), len };

	memcpy(arena_xlate(&A, g[0], sizeof(h)), &h, sizeof(h));
	if (len)
		memcpy(arena_xlate(&A, g[1], len), data, len);
	drv_add(&TX, g, l, len ? 2 : 1, 0);
	return cmx_vsock_dev_tx(&V);
}

/* The next packet the device wrote into an rx buffer; payload to data. */
static int recv_pkt(struct virtio_vsock_hdr *h, void *data)
{
	uint16_t id;
	uint32_t len;

	if (!drv_used(&RX, &id, &len))
		return 0;
	ck_assert_uint_ge(len, sizeof(*h));
	memcpy(h, arena_xlate(&A, RX.desc[id].addr, sizeof(*h)), sizeof(*h));
	ck_assert_uint_eq(len, sizeof(*h) + h->len);
	if (data)
		memcpy(data, (uint8_t *)arena_xlate(&A, RX.desc[id].addr, len) + sizeof(*h), h->len);
	return 1;
}

static void connect_stream(void)
{
	struct virtio_vsock_hdr h;

	post_rx(8, 4096);
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_REQUEST, 1000, PORT, NULL, 0, 8192, 0), 0);
	ck_assert_ptr_nonnull(accepted);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RESPONSE);
	ck_assert_uint_eq(h.src_cid, 2);
	ck_assert_uint_eq(h.dst_cid, GUEST_CID);
	ck_assert_uint_eq(h.src_port, PORT);
	ck_assert_uint_eq(h.dst_port, 1000);
	ck_assert_uint_eq(h.buf_alloc, CMX_VSOCK_BUF_ALLOC);
}

START_TEST(connect_and_data_in)
{
	connect_stream();
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RW, 1000, PORT, "ping", 4, 8192, 0), 0);
	ck_assert_uint_eq(ngot, 4);
	ck_assert(!memcmp(got, "ping", 4));
	ck_assert_uint_eq(accepted->fwd_cnt, 4);
	ck_assert(!V.broken);
}
END_TEST

START_TEST(refuse_unserved_port)
{
	struct virtio_vsock_hdr h;

	post_rx(2, 4096);
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_REQUEST, 1000, 9999, NULL, 0, 8192, 0), 0);
	ck_assert_ptr_null(accepted);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(h.dst_port, 1000);
	/* Data for a stream that does not exist is reset too. */
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RW, 1001, PORT, "x", 1, 8192, 0), 0);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	ck_assert_uint_eq(ngot, 0);
}
END_TEST

START_TEST(data_out_respects_credit)
{
	static uint8_t big[20000], out[4096];
	struct iovec iov = { big, sizeof(big) };
	struct virtio_vsock_hdr h;
	size_t total = 0;

	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7);
	connect_stream(); /* the guest granted 8192 bytes */
	ck_assert_int_eq(cmx_vsock_stream_write(&V, accepted, &iov, 1, sizeof(big)), 8192);
	ck_assert(accepted->blocked);
	while (recv_pkt(&h, out)) {
		ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RW);
		ck_assert_uint_le(h.len, 4096);
		ck_assert(!memcmp(out, big + total, h.len));
		total += h.len;
	}
	ck_assert_uint_eq(total, 8192);
	/* The guest read it all: more credit, and the writer is woken. */
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 1000, PORT, NULL, 0, 8192, 8192),
			 0);
	ck_assert_int_eq(nwritable, 1);
	/* 5 rx buffers are left: 5 * 4096 > 8192, credit is the limit again. */
	iov.iov_base = big + total;
	ck_assert_int_eq(cmx_vsock_stream_write(&V, accepted, &iov, 1, sizeof(big) - total), 8192);
}
END_TEST

START_TEST(data_out_waits_for_buffers)
{
	static uint8_t big[10000];
	struct iovec iov = { big, sizeof(big) };
	struct virtio_vsock_hdr h;

	connect_stream();
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 1000, PORT, NULL, 0, 1 << 20, 0), 0);
	while (recv_pkt(&h, NULL))
		;
	/* 7 buffers of 4096 are left: 3 per write of 10000, then one. */
	ck_assert_int_eq(cmx_vsock_stream_write(&V, accepted, &iov, 1, sizeof(big)), 10000);
	ck_assert_int_eq(cmx_vsock_stream_write(&V, accepted, &iov, 1, sizeof(big)), 10000);
	ck_assert_int_eq(cmx_vsock_stream_write(&V, accepted, &iov, 1, sizeof(big)), 4096);
	ck_assert(accepted->blocked);
	ck_assert_int_eq(cmx_vsock_stream_write(&V, accepted, &iov, 1, sizeof(big)), 0);
	ck_assert(accepted->blocked);
	post_rx(1, 4096);
	ck_assert_int_eq(cmx_vsock_dev_rx(&V), 0);
	ck_assert_int_eq(nwritable, 1);
}
END_TEST

START_TEST(shutdown_resets_and_closes)
{
	struct virtio_vsock_hdr h;

	connect_stream();
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_SHUTDOWN, 1000, PORT, NULL, 0, 8192, 0), 0);
	ck_assert_int_eq(nclosed, 1);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
}
END_TEST

START_TEST(rst_closes_quietly)
{
	struct virtio_vsock_hdr h;

	connect_stream();
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RST, 1000, PORT, NULL, 0, 8192, 0), 0);
	ck_assert_int_eq(nclosed, 1);
	ck_assert(!recv_pkt(&h, NULL));
}
END_TEST

START_TEST(host_close_resets)
{
	struct virtio_vsock_hdr h;

	connect_stream();
	cmx_vsock_stream_close(&V, accepted);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
	ck_assert_ptr_null(V.streams);
	ck_assert_int_eq(nclosed, 0);
}
END_TEST

START_TEST(credit_request_answered)
{
	struct virtio_vsock_hdr h;

	connect_stream();
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RW, 1000, PORT, "abc", 3, 8192, 0), 0);
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_CREDIT_REQUEST, 1000, PORT, NULL, 0, 8192, 0), 0);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	ck_assert_uint_eq(h.fwd_cnt, 3);
}
END_TEST

/* Bytes the user keeps back are not credited until it takes them, and
 * count against the window. */
START_TEST(held_input_withholds_credit)
{
	static uint8_t big[CMX_VSOCK_BUF_ALLOC];
	struct virtio_vsock_hdr h;

	connect_stream();
	take_max = 1;
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RW, 1000, PORT, "ping", 4, 8192, 0), 0);
	ck_assert_uint_eq(ngot, 1);
	ck_assert_uint_eq(accepted->fwd_cnt, 1);
	ck_assert_uint_eq(accepted->held, 3);
	cmx_vsock_stream_credit(&V, accepted, 3);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	ck_assert_uint_eq(h.fwd_cnt, 4);
	/* Held again, the window is smaller: a full window's packet resets. */
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RW, 1000, PORT, "ping", 4, 8192, 0), 0);
	ck_assert_uint_eq(accepted->held, 3);
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RW, 1000, PORT, big, sizeof(big), 8192, 0), 0);
	ck_assert_int_eq(nclosed, 1);
	take_max = SIZE_MAX;
}
END_TEST

START_TEST(overrun_window_resets)
{
	static uint8_t big[CMX_VSOCK_BUF_ALLOC + 1];
	struct virtio_vsock_hdr h;

	connect_stream();
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_RW, 1000, PORT, big, sizeof(big), 8192, 0), 0);
	ck_assert_int_eq(nclosed, 1);
	ck_assert_uint_eq(ngot, 0);
	ck_assert(recv_pkt(&h, NULL));
	ck_assert_uint_eq(h.op, VIRTIO_VSOCK_OP_RST);
}
END_TEST

START_TEST(lying_length_breaks_device)
{
	struct virtio_vsock_hdr hd = { .src_cid = GUEST_CID, .dst_cid = 2, .dst_port = PORT,
				       .len = 100, .type = 1, .op = VIRTIO_VSOCK_OP_RW };
	uint64_t g[1] = { arena_alloc(&A, sizeof(hd)) };
	uint32_t l[1] = { sizeof(hd) };

	connect_stream();
	memcpy(arena_xlate(&A, g[0], sizeof(hd)), &hd, sizeof(hd));
	drv_add(&TX, g, l, 1, 0);
	ck_assert_int_eq(cmx_vsock_dev_tx(&V), -EINVAL);
	ck_assert(V.broken);
	ck_assert_uint_eq(ngot, 0);
}
END_TEST

START_TEST(short_header_breaks_device)
{
	uint64_t g[1] = { arena_alloc(&A, 8) };
	uint32_t l[1] = { 8 };

	drv_add(&TX, g, l, 1, 0);
	ck_assert_int_eq(cmx_vsock_dev_tx(&V), -EINVAL);
}
END_TEST

START_TEST(foreign_cid_dropped)
{
	struct virtio_vsock_hdr h;

	post_rx(2, 4096);
	V.guest_cid = GUEST_CID + 1; /* packets now claim a CID not the guest's */
	ck_assert_int_eq(send_pkt(VIRTIO_VSOCK_OP_REQUEST, 1000, PORT, NULL, 0, 8192, 0), 0);
	ck_assert_ptr_null(accepted);
	ck_assert(!recv_pkt(&h, NULL));
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("vsock_dev");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, connect_and_data_in);
	tcase_add_test(tc, refuse_unserved_port);
	tcase_add_test(tc, data_out_respects_credit);
	tcase_add_test(tc, data_out_waits_for_buffers);
	tcase_add_test(tc, shutdown_resets_and_closes);
	tcase_add_test(tc, rst_closes_quietly);
	tcase_add_test(tc, host_close_resets);
	tcase_add_test(tc, credit_request_answered);
	tcase_add_test(tc, held_input_withholds_credit);
	tcase_add_test(tc, overrun_window_resets);
	tcase_add_test(tc, lying_length_breaks_device);
	tcase_add_test(tc, short_header_breaks_device);
	tcase_add_test(tc, foreign_cid_dropped);
	return vq_run("vsock_dev", tc);
}
