// SPDX-License-Identifier: MIT
// Bulk lanes against a live clmuxd (host/lane.c): a good write and read over
// two lanes, then lanes that lie (wrong session or token, a transfer never
// opened, bytes past the transfer, overlapping pieces, a lane or a client
// that dies mid-piece, a real client killed mid-transfer). Each ends only
// its session, which frees everything.
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../guest/tests/e2e.h"
#include "addr.h"
#include "piece.h"
#include "proto.gen.h"

#include "rawclient.h"

#define SIZE (16u << 20)

/* A lane of c's session (Hello role lane, with session and token): its socket,
 * or -1 when the daemon refused it (and closed it). */
static int lane_open(const struct client *c, uint64_t session, uint64_t token)
{
	struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
				   .role = CMX_ROLE_LANE, .session = session, .token = token };
	struct cmx_Hello_out out;
	struct client l = { .fd = dial() };

	send_msg(&l, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	if (recv_reply(&l, &cmx_desc_Hello_out, &out, NULL)) {
		close(l.fd);
		return -1;
	}
	ck_assert_uint_eq(out.session, c->session);
	return l.fd;
}

/* A LanePiece header; the payload follows when data is not NULL. A lie
 * may end the lane at its header: what follows then may not be taken. */
static void piece(int fd, uint64_t transfer, uint64_t off, uint64_t len, const void *data)
{
	struct client l = { .fd = fd };
	struct cmx_LanePiece_in in = { .transfer = transfer, .offset = off };

	send_msg(&l, &cmx_desc_LanePiece_in, &in, 0, NULL, len);
	if (data && send(fd, data, len, MSG_NOSIGNAL) < 0)
		ck_assert_int_eq(errno == EPIPE || errno == ECONNRESET, 1);
}

static int write_lanes(struct client *c, uint64_t transfer, uint64_t off, uint64_t size)
{
	struct cmx_WriteLanes_in in = { .queue = { 0x10011 }, .mem = { 0x10012 }, .offset = off,
					.size = size, .transfer = transfer, .lanes = 2 };
	struct cmx_WriteLanes_out out;

	send_msg(c, &cmx_desc_WriteLanes_in, &in, 1, NULL, 0);
	return recv_reply(c, &cmx_desc_WriteLanes_out, &out, NULL);
}

/* A session with a queue, a 16 MiB buffer and two lanes. */
static void session(struct client *c, int lane[2])
{
	hello(c);
	queue_and_buffer(c, 0x10010, SIZE);
	for (int i = 0; i < 2; i++) {
		lane[i] = lane_open(c, c->session, c->token);
		ck_assert_int_ge(lane[i], 0);
	}
}

START_TEST(write_and_read)
{
	struct cmx_WriteLanesEnd_in end = { .queue = { 0x10011 }, .transfer = 7 };
	struct cmx_WriteLanesEnd_out eout;
	struct cmx_ReadLanes_in rd = { .queue = { 0x10011 }, .mem = { 0x10012 }, .offset = 4096,
				       .size = SIZE - 8192, .transfer = 8, .lanes = 2 };
	struct cmx_ReadLanes_out rout;
	uint8_t *data = malloc(SIZE), *back = calloc(1, SIZE);
	uint64_t o0, b0;
	struct client c;
	int lane[2];

	daemon_counts(&o0, &b0);
	e2e_rand_bytes(data, SIZE, 41);
	session(&c, lane);
	/* Lanes for a session that is not theirs: refused, the session lives. */
	ck_assert_int_lt(lane_open(&c, c.session, c.token ^ 1), 0);
	ck_assert_int_lt(lane_open(&c, c.session + 1000, c.token), 0);
	ping_ok(&c);
	/* The pieces out of order, on either lane: any split is taken. */
	ck_assert_int_eq(write_lanes(&c, 7, 0, SIZE), CL_SUCCESS);
	ck_assert_int_eq(write_lanes(&c, 7, 0, SIZE), CL_INVALID_VALUE); /* in use */
	piece(lane[1], 7, SIZE / 2, SIZE / 2, data + SIZE / 2);
	piece(lane[0], 7, 0, SIZE / 2, data);
	send_msg(&c, &cmx_desc_WriteLanesEnd_in, &end, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_WriteLanesEnd_out, &eout, NULL), CL_SUCCESS);
	/* Refused: the lane count is not the session's; a range past the end. */
	rd.lanes = 3;
	send_msg(&c, &cmx_desc_ReadLanes_in, &rd, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_ReadLanes_out, &rout, NULL), CL_INVALID_OPERATION);
	ck_assert_int_eq(write_lanes(&c, 9, SIZE - 4096, 8192), CL_INVALID_VALUE);
	rd.lanes = 2;
	send_msg(&c, &cmx_desc_ReadLanes_in, &rd, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_ReadLanes_out, &rout, NULL), CL_SUCCESS);
	for (unsigned i = 0; i < 2; i++) {
		struct cmx_hdr h;
		uint64_t args[2], off, len;

		cmx_lane_piece(rd.size, 2, i, &off, &len);
		ck_assert_int_eq(recv(lane[i], &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
		ck_assert_uint_eq(h.op, CMX_OP_LanePiece);
		ck_assert_uint_eq(h.bulk, len);
		ck_assert_int_eq(recv(lane[i], args, sizeof(args), MSG_WAITALL), sizeof(args));
		ck_assert_uint_eq(args[0], 8);
		ck_assert_uint_eq(args[1], off);
		ck_assert_int_eq(recv(lane[i], back + off, len, MSG_WAITALL), (ssize_t)len);
	}
	ck_assert(!memcmp(back, data + 4096, rd.size));
	/* Transfers opened and never ended: 16 at most, all let go at close. */
	for (uint64_t t = 100; t < 116; t++)
		ck_assert_int_eq(write_lanes(&c, t, 0, 4096), CL_SUCCESS);
	ck_assert_int_eq(write_lanes(&c, 116, 0, 4096), CL_OUT_OF_RESOURCES);
	/* A lane closed between transfers ends the session. */
	close(lane[1]);
	expect_closed(c.fd);
	close(lane[0]);
	counts_return(o0, b0);
	free(data);
	free(back);
}
END_TEST

/* What a lying lane does: each ends its session and frees what it held. */
enum lie { FORGED, PAST_END, OVERLAP, NOT_A_PIECE, DIES_MID_PIECE };

static void lie(enum lie how)
{
	static uint8_t data[1 << 20];
	struct client c, other;
	uint64_t o0, b0;
	int lane[2];

	daemon_counts(&o0, &b0);
	hello(&other);
	session(&c, lane);
	ck_assert_int_eq(write_lanes(&c, 5, 0, SIZE), CL_SUCCESS);
	switch (how) {
	case FORGED:
		piece(lane[0], 6, 0, sizeof(data), data);
		break;
	case PAST_END:
		piece(lane[0], 5, SIZE - 4096, 8192, data);
		break;
	case OVERLAP:
		piece(lane[0], 5, 0, 8192, data);
		piece(lane[1], 5, 4096, 8192, data);
		break;
	case NOT_A_PIECE: /* a guest never sends on a lane what is not a piece */
		send_msg(&(struct client){ .fd = lane[0] }, &cmx_desc_Ping_in, &(struct cmx_Ping_in){ 0 },
			 1, NULL, 0);
		break;
	case DIES_MID_PIECE: /* half of a 2 MiB piece */
		piece(lane[0], 5, 0, sizeof(data) * 2, NULL);
		send_raw(lane[0], data, sizeof(data));
		close(lane[0]);
		lane[0] = -1;
		break;
	}
	expect_closed(c.fd);
	for (int i = 0; i < 2; i++)
		if (lane[i] >= 0)
			close(lane[i]);
	ping_ok(&other);
	close(other.fd);
	counts_return(o0, b0);
}

START_TEST(lying_lanes)
{
	lie(FORGED);
	lie(PAST_END);
	lie(OVERLAP);
	lie(NOT_A_PIECE);
	lie(DIES_MID_PIECE);
}
END_TEST

/* A client killed halfway through a 16 MiB write over its lanes, and one
 * killed while the daemon sends it a read on them: nothing is left. */
START_TEST(killed_mid_lanes)
{
	for (int reading = 0; reading < 2; reading++) {
		uint64_t o0, b0;
		int status;
		pid_t pid;

		daemon_counts(&o0, &b0);
		pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			static uint8_t half[SIZE / 4];
			struct cmx_ReadLanes_in rd = { .queue = { 0x10011 }, .mem = { 0x10012 },
						       .size = SIZE, .transfer = 3, .lanes = 2 };
			struct cmx_ReadLanes_out rout;
			struct client c;
			int lane[2];

			session(&c, lane);
			if (reading) {
				send_msg(&c, &cmx_desc_ReadLanes_in, &rd, 1, NULL, 0);
				if (recv_reply(&c, &cmx_desc_ReadLanes_out, &rout, NULL) ||
				    recv(lane[0], half, sizeof(half), MSG_WAITALL) != sizeof(half))
					_exit(3);
				_exit(0);
			}
			if (write_lanes(&c, 3, 0, SIZE))
				_exit(4);
			piece(lane[0], 3, 0, SIZE / 2, NULL);
			send_raw(lane[0], half, sizeof(half));
			_exit(0);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "client exit %d",
			      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		counts_return(o0, b0);
	}
}
END_TEST

/* Through the ICD: a client killed while its 64 MiB blocking writes and
 * reads are under way (on its lanes over tcp, elsewhere on the call
 * channel): everything it held is released. */
START_TEST(icd_killed_mid_transfer)
{
	uint64_t o0, b0;
	int fds[2], status;
	char byte;
	pid_t pid;

	daemon_counts(&o0, &b0);
	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		size_t size = 64u << 20;
		char *host = malloc(size);
		struct e2e_plat p;
		cl_int err;
		cl_mem m;

		close(fds[0]);
		if (!host || e2e_plat_init(&p, "virtual", e2e_virtual_match()))
			_exit(3);
		memset(host, 7, size);
		m = clCreateBuffer(p.context, CL_MEM_READ_WRITE, size, NULL, &err);
		if (!m)
			_exit(4);
		for (int it = 0;; it++) {
			if (clEnqueueWriteBuffer(p.queue, m, CL_TRUE, 0, size, host, 0, NULL, NULL) ||
			    clEnqueueReadBuffer(p.queue, m, CL_TRUE, 0, size, host, 0, NULL, NULL))
				_exit(5);
			/* Busy: the parent kills it from now on, mid-transfer
			 * most of the time (each takes milliseconds). */
			if (it == 1 && write(fds[1], "x", 1) != 1)
				_exit(6);
		}
	}
	close(fds[1]);
	ck_assert_int_eq(read(fds[0], &byte, 1), 1);
	close(fds[0]);
	e2e_sleep_ms(5);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "client status 0x%x",
		      status);
	counts_return(o0, b0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lanes");
	TCase *tc = tcase_create("lanes");

	tcase_add_test(tc, write_and_read);
	tcase_add_test(tc, lying_lanes);
	tcase_add_test(tc, killed_mid_lanes);
	tcase_add_test(tc, icd_killed_mid_transfer);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return e2e_daemon_run(s);
}
