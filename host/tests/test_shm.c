// SPDX-License-Identifier: MIT
// The shared area and the shm rings against a live clmuxd, from a raw
// client: a round trip through both; buffers living in the area; area
// offsets, area buffers and ring indices that lie, an oversized message in
// the ring, a client killed mid-ring. Each bad one
// ends only its own session, and the daemon gives back every object, byte,
// mapping and file descriptor it held for it.
#define _GNU_SOURCE
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../guest/tests/e2e.h"
#include "area_layout.h"
#include "proto.gen.h"
#include "rawclient.h"
#include "ring.h"

/* A session's shared memory, as the guest maps it. */
struct shared {
	uint8_t *base;
	struct cmx_area_hdr h;
	int bell;
	struct cmx_ring cmd, rep;
};

/* OpenArea on an open session; maps what comes back. */
static void open_area(struct client *c, unsigned flags, struct shared *sh)
{
	struct cmx_OpenArea_in in = {.size = 4 << 20, .flags = flags};
	struct cmx_OpenArea_out out;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(2 * sizeof(int))];
	} cm;
	struct cmx_hdr h;
	struct iovec iov = {&h, CMX_HDR_SIZE};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
	uint8_t args[64];
	int fds[2] = {-1, -1};

	send_msg(c, &cmx_desc_OpenArea_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recvmsg(c->fd, &mh, MSG_WAITALL), CMX_HDR_SIZE);
	ck_assert_ptr_nonnull(CMSG_FIRSTHDR(&mh));
	memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&mh)), CMSG_FIRSTHDR(&mh)->cmsg_len - CMSG_LEN(0));
	ck_assert_uint_le(h.size, sizeof(args));
	ck_assert_int_eq(recv(c->fd, args, h.size, MSG_WAITALL), (ssize_t)h.size);
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_OpenArea_out, args + 8, h.size - 8, &out), 0);
	ck_assert_int_ge(fds[0], 0);
	sh->base = mmap(NULL, out.size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	ck_assert(sh->base != MAP_FAILED);
	close(fds[0]);
	/* Sealed: the guest cannot shrink it under the daemon. */
	ck_assert_int_ne(ftruncate(fds[0], 0), 0);
	memcpy(&sh->h, sh->base, sizeof(sh->h));
	ck_assert_uint_eq(sh->h.magic, CMX_AREA_MAGIC);
	sh->bell = fds[1];
	if (flags & CMX_AREA_RINGS) {
		ck_assert_int_ge(sh->bell, 0);
		ck_assert_int_eq(cmx_ring_init(&sh->cmd, sh->base + sh->h.ring_off[CMX_RING_CMD],
					       sh->h.ring_len[CMX_RING_CMD], 0),
				 0);
		ck_assert_int_eq(cmx_ring_init(&sh->rep, sh->base + sh->h.ring_off[CMX_RING_REPLY],
					       sh->h.ring_len[CMX_RING_REPLY], 0),
				 0);
	}
}

static void ring_bell(struct shared *sh)
{
	uint64_t one = 1;

	ck_assert_int_eq(write(sh->bell, &one, sizeof(one)), sizeof(one));
}

/* Puts bytes in the command ring and rings the doorbell. */
static void ring_put(struct shared *sh, const void *p, size_t n)
{
	ck_assert_int_eq(cmx_ring_write(&sh->cmd, p, n), (long)n);
	cmx_ring_publish(&sh->cmd);
	ring_bell(sh);
}

static void ring_msg(struct shared *sh, const struct cmx_msgdesc *d, const void *in, int sync,
		     uint32_t seq)
{
	size_t size = cmx_codec_size(d, in);
	uint8_t buf[512];
	struct cmx_hdr h = {
	    .size = (uint32_t)size, .op = d->op, .flags = sync ? CMX_HDR_SYNC : 0, .seq = seq};

	ck_assert_uint_le(CMX_HDR_SIZE + size, sizeof(buf));
	memcpy(buf, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, in, buf + CMX_HDR_SIZE);
	ring_put(sh, buf, CMX_HDR_SIZE + size);
}

/* Reads one reply from the reply ring (polling: the daemon only rings a
 * guest that said it sleeps); its status. */
static int ring_reply(struct shared *sh, uint32_t seq)
{
	struct cmx_hdr h;
	uint8_t args[256];
	int64_t status;

	for (int i = 0; i < 100000 && cmx_ring_readable(&sh->rep) < CMX_HDR_SIZE; i++)
		usleep(100);
	ck_assert_int_ge(cmx_ring_readable(&sh->rep), CMX_HDR_SIZE);
	cmx_ring_read(&sh->rep, &h, CMX_HDR_SIZE);
	ck_assert_uint_eq(h.op, CMX_OP_REPLY);
	ck_assert_uint_eq(h.seq, seq);
	ck_assert_uint_le(h.size, sizeof(args));
	while (cmx_ring_readable(&sh->rep) < h.size)
		usleep(100);
	cmx_ring_read(&sh->rep, args, h.size);
	cmx_ring_consume(&sh->rep);
	memcpy(&status, args, 8);
	return (int)status;
}

/* An fd a session owns: its sockets, its area's memfd, its doorbell. Not
 * the driver's own, which come and go (NVIDIA opens and closes files and
 * pipes of its own while it works). */
static int session_file(const char *dir, const char *name)
{
	char path[320], target[256];
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	n = readlink(path, target, sizeof(target) - 1);
	if (n <= 0)
		return 0;
	target[n] = '\0';
	return !strncmp(target, "socket:", 7) || !strncmp(target, "/memfd:clmux-area", 17) ||
	       !strcmp(target, "anon_inode:[eventfd]");
}

/* The daemon's pid (from the socket), then how many of its mappings are
 * session areas and how many of its open files are of the kinds sessions
 * hold. */
static void daemon_holds(int fd, int *areas, int *files)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);
	char path[64], line[512];
	FILE *f;
	DIR *d;

	ck_assert_int_eq(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len), 0);
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)cr.pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	*areas = 0;
	while (fgets(line, sizeof(line), f))
		*areas += strstr(line, "clmux-area") != NULL;
	fclose(f);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)cr.pid);
	d = opendir(path);
	ck_assert_ptr_nonnull(d);
	*files = 0;
	for (struct dirent *e; (e = readdir(d));)
		*files += session_file(path, e->d_name);
	closedir(d);
}

/* Objects, bytes, area mappings and files come back to base. */
static void all_returned(uint64_t o0, uint64_t b0, int a0, int f0)
{
	struct client c;
	int a = -1, f = -1;

	counts_return(o0, b0);
	for (int i = 0; i < 200; i++) {
		hello(&c);
		daemon_holds(c.fd, &a, &f);
		close(c.fd);
		/* Fewer is fine: the baseline may have counted what an earlier
		 * test's session was still giving back (an shm session's
		 * doorbell closes on the loop's next turn). */
		if (a <= a0 && f <= f0)
			return;
		usleep(20000);
	}
	ck_abort_msg("daemon kept %d area mappings (was %d), %d files (was %d)", a, a0, f, f0);
}

static void baseline(uint64_t *o0, uint64_t *b0, int *a0, int *f0)
{
	struct client c;

	daemon_counts(o0, b0);
	hello(&c);
	daemon_holds(c.fd, a0, f0);
	close(c.fd);
}

/* A context, an in-order queue and a 1 MiB buffer at ids 0x10010..12. */
static void make_buffer(struct client *c)
{
	uint64_t devs[1] = {1}, qprops[1] = {0};
	struct cmx_CreateContext_in ctx = {.context = {0x10010}, .devices = {devs, 1}};
	struct cmx_CreateQueue_in qu = {
	    .queue = {0x10011}, .context = {0x10010}, .device = {1}, .props = {qprops, 1}};
	struct cmx_CreateBuffer_in buf = {.mem = {0x10012}, .context = {0x10010}, .size = 1 << 20};

	send_msg(c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateBuffer_in, &buf, 0, NULL, 0);
}

/* A call naming an area block: header with CMX_HDR_AREA. */
static void send_area(struct client *c, const struct cmx_msgdesc *d, const void *in, int sync,
		      uint32_t off, uint64_t len)
{
	size_t size = cmx_codec_size(d, in);
	uint8_t buf[512];
	struct cmx_hdr h = {.size = (uint32_t)size,
			    .op = d->op,
			    .flags = (sync ? CMX_HDR_SYNC : 0) | CMX_HDR_AREA,
			    .seq = ++c->seq,
			    .area_off = off,
			    .bulk = len};

	memcpy(buf, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, in, buf + CMX_HDR_SIZE);
	send_raw(c->fd, buf, CMX_HDR_SIZE + size);
}

START_TEST(area_roundtrip)
{
	struct client c;
	struct shared sh;
	struct cmx_WriteBuffer_in wr = {
	    .queue = {0x10011}, .mem = {0x10012}, .offset = 4096, .size = 8192};
	struct cmx_ReadBuffer_in rd = {
	    .queue = {0x10011}, .mem = {0x10012}, .offset = 4096, .size = 8192};
	struct cmx_hdr h;
	uint64_t args[2], *done;
	uint32_t woff, roff;

	hello(&c);
	open_area(&c, 0, &sh);
	make_buffer(&c);
	woff = (uint32_t)sh.h.data_off + CMX_AREA_BLK;
	roff = woff + 8192 + CMX_AREA_BLK;
	for (int i = 0; i < 8192; i++)
		sh.base[woff + i] = (uint8_t)(i * 13);
	send_area(&c, &cmx_desc_WriteBuffer_in, &wr, 1, woff, 8192);
	ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), 0);
	send_area(&c, &cmx_desc_ReadBuffer_in, &rd, 1, roff, 8192);
	/* The reply says where the data is; none of it is in the stream. */
	ck_assert_int_eq(recv(c.fd, &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
	ck_assert_uint_eq(h.flags & CMX_HDR_AREA, CMX_HDR_AREA);
	ck_assert_uint_eq(h.area_off, roff);
	ck_assert_uint_eq(h.bulk, 8192);
	ck_assert_int_eq(recv(c.fd, args, h.size, MSG_WAITALL), (ssize_t)h.size);
	ck_assert_int_eq((int64_t)args[0], 0);
	ck_assert_mem_eq(sh.base + woff, sh.base + roff, 8192);
	/* Both blocks handed back through their done words. */
	done = (uint64_t *)(sh.base + woff - CMX_AREA_DONE_AT);
	for (int i = 0; i < 1000 && !__atomic_load_n(done, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	ck_assert_uint_eq(*done, 1);
	ck_assert_uint_eq(*(uint64_t *)(sh.base + roff - CMX_AREA_DONE_AT), 1);
	ping_ok(&c);
	close(c.fd);
}
END_TEST

START_TEST(area_lying_offsets)
{
	struct client other;
	struct cmx_WriteBuffer_in wr = {.queue = {0x10011}, .mem = {0x10012}, .size = 4096};
	struct cmx_Ping_in pin = {0};
	uint64_t o0, b0;
	int a0, f0;

	baseline(&o0, &b0, &a0, &f0);
	hello(&other);
	for (int i = 0; i < 7; i++) {
		struct client c;
		struct shared sh;
		uint32_t ok;
		hello(&c);
		if (i == 6) {
			/* No area at all. */
			send_area(&c, &cmx_desc_WriteBuffer_in, &wr, 0, 1 << 20, 4096);
			ck_assert_msg(closed_by_daemon(c.fd), "area call without an area");
			close(c.fd);
			continue;
		}
		open_area(&c, 0, &sh);
		make_buffer(&c);
		ok = (uint32_t)sh.h.data_off + CMX_AREA_BLK;
		switch (i) {
		case 0: /* the header page */
			send_area(&c, &cmx_desc_WriteBuffer_in, &wr, 0, 0, 4096);
			break;
		case 1: /* no room for the block header before it */
			send_area(&c, &cmx_desc_WriteBuffer_in, &wr, 0, ok - 8, 4096);
			break;
		case 2: /* unaligned */
			send_area(&c, &cmx_desc_WriteBuffer_in, &wr, 0, ok + 1, 4096);
			break;
		case 3: /* past the end */
			send_area(&c, &cmx_desc_WriteBuffer_in, &wr, 0, (uint32_t)sh.h.size, 4096);
			break;
		case 4: /* running over the end */
			send_area(&c, &cmx_desc_WriteBuffer_in, &wr, 0, ok, sh.h.data_len + 4096);
			break;
		case 5: /* an area flag on a call that moves no data */
			send_area(&c, &cmx_desc_Ping_in, &pin, 1, ok, 64);
			break;
		}
		ck_assert_msg(closed_by_daemon(c.fd), "lying area case %d not refused", i);
		close(c.fd);
		ping_ok(&other);
	}
	close(other.fd);
	all_returned(o0, b0, a0, f0);
}
END_TEST

/* CreateBufferArea of the block at off (len bytes) as id 0x10013. */
static void area_buffer(struct client *c, uint32_t off, uint64_t len)
{
	struct cmx_CreateBufferArea_in in = {.mem = {0x10013}, .context = {0x10010}, .size = len};

	send_area(c, &cmx_desc_CreateBufferArea_in, &in, 0, off, len);
}

static void wait_done(struct shared *sh, uint32_t off)
{
	uint64_t *done = (uint64_t *)(sh->base + off - CMX_AREA_DONE_AT);

	for (int i = 0; i < 2000 && !__atomic_load_n(done, __ATOMIC_ACQUIRE); i++)
		usleep(1000);
	ck_assert_uint_eq(*done, 1);
}

static int device_is_cpu(struct client *c)
{
	struct cmx_GetDeviceInfo_in dq = {.device = {1}, .param = CL_DEVICE_TYPE};
	struct cmx_GetDeviceInfo_out dout;
	cl_device_type type = 0;
	uint8_t *keep = NULL;

	send_msg(c, &cmx_desc_GetDeviceInfo_in, &dq, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_GetDeviceInfo_out, &dout, &keep), CL_SUCCESS);
	ck_assert_uint_eq(dout.value.len, sizeof(type));
	memcpy(&type, dout.value.ptr, sizeof(type));
	free(keep);
	return (type & CL_DEVICE_TYPE_CPU) != 0;
}

/* The fill of 8 KiB at 4 KiB into the buffer at off, and nothing around it. */
static void fill_shows(const struct shared *sh, uint32_t off, uint32_t pat)
{
	ck_assert_uint_eq(sh->base[off + 4095], 0x11);
	ck_assert_mem_eq(sh->base + off + 4096, &pat, sizeof(pat));
	ck_assert_mem_eq(sh->base + off + 4096 + 8188, &pat, sizeof(pat));
	ck_assert_uint_eq(sh->base[off + 4096 + 8192], 0x11);
}

/* The buffer is the block: a native fill shows in the guest's mapping with
 * no transfer, a native map points at it, and the block comes back when
 * the buffer is released. */
START_TEST(area_buffer_zero_copy)
{
	struct client c;
	struct shared sh;
	uint32_t pat = 0x5a5aa5a5, off;
	struct cmx_FillBuffer_in fill = {.queue = {0x10011},
					 .mem = {0x10013},
					 .pattern = {&pat, sizeof(pat)},
					 .offset = 4096,
					 .size = 8192};
	struct cmx_Finish_in fin = {.queue = {0x10011}};
	struct cmx_MapBuffer_in map = {
	    .queue = {0x10011}, .mem = {0x10013}, .flags = CL_MAP_READ, .offset = 4096, .size = 64};
	struct cmx_UnmapBuffer_in unmap = {.queue = {0x10011}, .mem = {0x10013}, .offset = 4096};
	struct cmx_ReleaseMem_in rel = {.mem = {0x10013}};
	struct cmx_MapBuffer_out mo;

	hello(&c);
	open_area(&c, CMX_AREA_HEAP, &sh);
	make_buffer(&c);
	off = (uint32_t)sh.h.data_off + 4096;
	memset(sh.base + off, 0x11, 65536);
	area_buffer(&c, off, 65536);
	send_msg(&c, &cmx_desc_FillBuffer_in, &fill, 0, NULL, 0);
	send_msg(&c, &cmx_desc_Finish_in, &fin, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), 0);
	/* A CPU device works in the pages themselves; a GPU keeps its own
	 * copy of a host-pointer buffer and writes it back at the map. */
	if (device_is_cpu(&c))
		fill_shows(&sh, off, pat);
	send_msg(&c, &cmx_desc_MapBuffer_in, &map, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_MapBuffer_out, &mo, NULL), 0);
	map.size = 8192 + 4096;
	map.offset = 0;
	send_msg(&c, &cmx_desc_MapBuffer_in, &map, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_MapBuffer_out, &mo, NULL), 0);
	fill_shows(&sh, off, pat);
	unmap.offset = 0;
	send_msg(&c, &cmx_desc_UnmapBuffer_in, &unmap, 0, NULL, 0);
	unmap.offset = 4096;
	send_msg(&c, &cmx_desc_UnmapBuffer_in, &unmap, 0, NULL, 0);
	ck_assert_uint_eq(*(uint64_t *)(sh.base + off - CMX_AREA_DONE_AT), 0);
	send_msg(&c, &cmx_desc_ReleaseMem_in, &rel, 0, NULL, 0);
	ping_ok(&c);
	wait_done(&sh, off);
	close(c.fd);
}
END_TEST

/* A forged guest's area buffers: out of the area, in the stream, the wrong
 * size, maps of buffers that are not in the area, unmaps past the end or
 * of what is not mapped, a buffer released while mapped, and a client gone
 * with its area buffer mapped. The lies that name bytes outside the area
 * end the session; the rest fail the call; the daemon gives everything
 * back. */
START_TEST(area_buffer_lies)
{
	struct client other;
	uint64_t o0, b0;
	int a0, f0;

	baseline(&o0, &b0, &a0, &f0);
	hello(&other);
	for (int i = 0; i < 9; i++) {
		struct client c;
		struct shared sh;
		struct cmx_CreateBufferArea_in in = {
		    .mem = {0x10013}, .context = {0x10010}, .size = 4096};
		struct cmx_MapBuffer_in map = {
		    .queue = {0x10011}, .mem = {0x10012}, .flags = CL_MAP_READ, .size = 64};
		struct cmx_UnmapBuffer_in unmap = {
		    .queue = {0x10011}, .mem = {0x10013}, .offset = 1 << 20, .event = {0x10020}};
		struct cmx_GetMemInfo_in info = {.mem = {0x10013}, .param = CL_MEM_SIZE};
		struct cmx_GetEventInfo_in ev = {.event = {0x10020},
						 .param = CL_EVENT_COMMAND_EXECUTION_STATUS};
		struct cmx_ReleaseMem_in rel = {.mem = {0x10013}};
		struct cmx_GetEventInfo_out eo;
		uint8_t junk[4096] = {0}, *keep;
		cl_int want = CL_INVALID_MEM_OBJECT;
		uint32_t ok;
		int closes = i <= 1;

		hello(&c);
		open_area(&c, CMX_AREA_HEAP, &sh);
		make_buffer(&c);
		ok = (uint32_t)sh.h.data_off + 4096;
		switch (i) {
		case 0: /* past the end of the area */
			area_buffer(&c, (uint32_t)sh.h.size, 4096);
			break;
		case 1: /* running over the end */
			area_buffer(&c, ok, sh.h.data_len);
			break;
		case 2: /* the storage in the stream: staging, not the area */
			send_msg(&c, &cmx_desc_CreateBufferArea_in, &in, 0, junk, sizeof(junk));
			send_msg(&c, &cmx_desc_GetMemInfo_in, &info, 1, NULL, 0);
			ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), CL_INVALID_MEM_OBJECT);
			break;
		case 3: /* a block shorter than the buffer: refused, block back */
			in.size = 8192;
			send_area(&c, &cmx_desc_CreateBufferArea_in, &in, 0, ok, 4096);
			send_msg(&c, &cmx_desc_GetMemInfo_in, &info, 1, NULL, 0);
			ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), CL_INVALID_MEM_OBJECT);
			wait_done(&sh, ok);
			break;
		case 4: /* a native map of a buffer that is not in the area */
			send_msg(&c, &cmx_desc_MapBuffer_in, &map, 1, NULL, 0);
			ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), CL_INVALID_MEM_OBJECT);
			break;
		case 5: /* an unmap past the buffer's end */
		case 6: /* an unmap of what is not mapped */
			area_buffer(&c, ok, 4096);
			if (i == 6) {
				unmap.offset = 0;
				want = CL_INVALID_VALUE;
			}
			send_msg(&c, &cmx_desc_UnmapBuffer_in, &unmap, 0, NULL, 0);
			send_msg(&c, &cmx_desc_GetEventInfo_in, &ev, 1, NULL, 0);
			ck_assert_int_eq(recv_reply(&c, &cmx_desc_GetEventInfo_out, &eo, &keep), 0);
			ck_assert_uint_eq(eo.value.len, sizeof(cl_int));
			ck_assert_int_eq(*(const cl_int *)eo.value.ptr, want);
			free(keep);
			break;
		case 7: /* released while mapped: the block still comes back */
		case 8: /* gone with the area buffer mapped */
			area_buffer(&c, ok, 4096);
			map.mem.id = 0x10013;
			send_msg(&c, &cmx_desc_MapBuffer_in, &map, 1, NULL, 0);
			ck_assert_int_eq(recv_reply(&c, NULL, NULL, NULL), 0);
			if (i == 7) {
				send_msg(&c, &cmx_desc_ReleaseMem_in, &rel, 0, NULL, 0);
				wait_done(&sh, ok);
			}
			break;
		}
		if (closes)
			ck_assert_msg(closed_by_daemon(c.fd), "lying area buffer %d not refused",
				      i);
		else
			ping_ok(&c);
		close(c.fd);
		munmap(sh.base, sh.h.size);
		ping_ok(&other);
	}
	close(other.fd);
	all_returned(o0, b0, a0, f0);
}
END_TEST

START_TEST(ring_roundtrip_and_lies)
{
	struct client other;
	struct cmx_Ping_in pin = {0};
	uint64_t o0, b0;
	int a0, f0;

	baseline(&o0, &b0, &a0, &f0);
	hello(&other);
	for (int i = 0; i < 4; i++) {
		struct client c;
		struct shared sh;
		struct cmx_hdr big = {
		    .size = CMX_MAX_ARGS + 8, .op = CMX_OP_Ping, .flags = CMX_HDR_SYNC, .seq = 3};
		hello(&c);
		open_area(&c, CMX_AREA_RINGS, &sh);
		/* Calls now go through the ring. */
		ring_msg(&sh, &cmx_desc_Ping_in, &pin, 1, 2);
		ck_assert_int_eq(ring_reply(&sh, 2), 0);
		switch (i) {
		case 0: /* a head more than the ring ahead */
			__atomic_store_n(&sh.cmd.ctl->head, sh.cmd.pos + sh.cmd.size + 64,
					 __ATOMIC_RELEASE);
			ring_bell(&sh);
			break;
		case 1: /* a head behind the daemon's tail */
			__atomic_store_n(&sh.cmd.ctl->head, sh.cmd.pos - 8, __ATOMIC_RELEASE);
			ring_bell(&sh);
			break;
		case 2: /* an oversized message */
			ring_put(&sh, &big, CMX_HDR_SIZE);
			break;
		case 3: /* a reply-ring tail ahead of the daemon's head */
			__atomic_store_n(&sh.rep.ctl->tail, sh.rep.pos + 4096, __ATOMIC_RELEASE);
			ring_msg(&sh, &cmx_desc_Ping_in, &pin, 1, 3);
			break;
		}
		ck_assert_msg(closed_by_daemon(c.fd), "lying ring case %d not refused", i);
		close(c.fd);
		close(sh.bell);
		ping_ok(&other);
	}
	close(other.fd);
	all_returned(o0, b0, a0, f0);
}
END_TEST

/* IncludeFiles with its records in an area block, while a second thread
 * rewrites the file's name there between a good one and one that climbs
 * out of the include tree: the daemon reads the block once, so every file
 * it writes lies at the depth of the good name (a ".." in place of a
 * component makes the path two levels shorter). */
#define RACE_GOOD  "aa/bb/cc/dd/escape.h"
#define RACE_BAD   "../../../../escape.h"
#define RACE_DEPTH 9 /* clmuxd.X/sN/pN/0/aa/bb/cc/dd/escape.h below TMPDIR */
#define RACE_CALLS 4000
#define RACE_BATCH 200

struct flipper {
	volatile char *name;
	int stop;
};

static void *flip_main(void *arg)
{
	struct flipper *f = arg;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED))
		for (int i = 0; i < 64; i++) {
			const char *src = i & 1 ? RACE_GOOD : RACE_BAD;
			for (size_t k = 0; k < sizeof(RACE_GOOD) - 1; k++)
				f->name[k] = src[k];
		}
	return NULL;
}

static int race_escapes, race_inside;
static size_t race_base_len;

static int race_look(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int depth = 0;

	if (flag != FTW_F || strcmp(path + ftw->base, "escape.h"))
		return 0;
	for (const char *p = path + race_base_len; *p; p++)
		depth += *p == '/';
	if (depth != RACE_DEPTH) {
		fprintf(stderr, "escaped the include tree: %s\n", path);
		race_escapes++;
	} else {
		race_inside++;
	}
	return 0;
}

START_TEST(area_include_race)
{
	static const char src[] = "kernel void k(global int *a) { a[0] = 1; }";
	uint64_t devs[1] = {1};
	struct cmx_CreateContext_in ctx = {.context = {0x10010}, .devices = {devs, 1}};
	struct cmx_CreateProgramWithSource_in ps = {
	    .program = {0x10014}, .context = {0x10010}, .source = {src, sizeof(src) - 1}};
	struct cmx_IncludeFiles_in inc = {.program = {0x10014}, .dir = 0};
	const char *tmp = e2e_daemon_tmpdir();
	struct flipper f = {0};
	struct client c;
	struct shared sh;
	struct cmx_IncludeFile file = {.path = {RACE_GOOD, sizeof(RACE_GOOD) - 1},
				       .data = {"#define X 1\n", 12}};
	struct cmx_IncludeFiles_bulk files = {.files = {&file, 1}};
	size_t len = cmx_codec_size(&cmx_desc_IncludeFiles_bulk, &files);
	pthread_t th;
	uint32_t off;

	ck_assert_ptr_nonnull(tmp);
	race_base_len = strlen(tmp);
	hello(&c);
	open_area(&c, 0, &sh);
	send_msg(&c, &cmx_desc_CreateContext_in, &ctx, 0, NULL, 0);
	send_msg(&c, &cmx_desc_CreateProgramWithSource_in, &ps, 0, NULL, 0);
	/* One record: the count, the name (u64 length, bytes, padded), then
	 * the file. */
	off = (uint32_t)sh.h.data_off + CMX_AREA_BLK;
	cmx_codec_encode(&cmx_desc_IncludeFiles_bulk, &files, (uint8_t *)sh.base + off);
	f.name = (volatile char *)(sh.base + off + 16);
	ck_assert_int_eq(pthread_create(&th, NULL, flip_main, &f), 0);
	for (int n = 0; n < RACE_CALLS && !race_escapes; n += RACE_BATCH) {
		for (int i = 0; i < RACE_BATCH; i++)
			send_area(&c, &cmx_desc_IncludeFiles_in, &inc, 0, off, len);
		ping_ok(&c); /* every call of the batch has been handled */
		ck_assert_int_eq(nftw(tmp, race_look, 16, FTW_PHYS), 0);
	}
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	ck_assert_int_eq(race_escapes, 0);
	/* Names that passed were written: the race was run. */
	ck_assert_int_gt(race_inside, 0);
	ping_ok(&c);
	close(c.fd);
}
END_TEST

/* Killed with objects, area data and half a message in the ring. */
START_TEST(killed_mid_ring)
{
	uint64_t o0, b0;
	int a0, f0, status;
	pid_t pid;

	baseline(&o0, &b0, &a0, &f0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct client c;
		struct shared sh;
		struct cmx_Ping_in pin = {0};
		struct cmx_hdr h = {.size = 48, .op = CMX_OP_WriteBuffer};

		hello(&c);
		open_area(&c, CMX_AREA_RINGS, &sh);
		ring_msg(&sh, &cmx_desc_Ping_in, &pin, 1, 2);
		if (ring_reply(&sh, 2))
			_exit(3);
		memset(sh.base + sh.h.data_off, 0xab, 1 << 20);
		ring_put(&sh, &h, CMX_HDR_SIZE); /* the arguments never come */
		_exit(0);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	all_returned(o0, b0, a0, f0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("shm");
	TCase *tc = tcase_create("shm");

	tcase_add_test(tc, area_roundtrip);
	tcase_add_test(tc, area_lying_offsets);
	tcase_add_test(tc, area_buffer_zero_copy);
	tcase_add_test(tc, area_buffer_lies);
	tcase_add_test(tc, area_include_race);
	tcase_add_test(tc, ring_roundtrip_and_lies);
	tcase_add_test(tc, killed_mid_ring);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return e2e_daemon_run(s);
}
