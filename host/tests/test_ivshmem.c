// SPDX-License-Identifier: MIT
// An ivshmem region against a live clmuxd, from a raw "guest" that maps the
// region file as a VM maps the BAR: Hello and calls through a slot's rings;
// garbage, lying indices and offsets, a guest that reconnects and one that
// stops polling (a VM killed). Each ends only its own slot's session, which
// returns everything it held; another slot's session keeps working.
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../guest/tests/e2e.h"
#include "area_layout.h"
#include "ivshmem_layout.h"
#include "proto.gen.h"
#include "rawclient.h"
#include "ring.h"

#define NSLOTS 4
#define WAIT_MS 30000 /* bound on waiting for the daemon (never a timing check) */

static char region[128];

/* A slot as a guest holds it. */
struct slot {
	struct cmx_ivs_slot *ctl;
	uint8_t *area;
	struct cmx_area_hdr ah;
	struct cmx_ring cmd, rep;
	uint32_t gen, seq;
	uint64_t session;
};

static uint8_t *map;
static uint64_t map_size;

static void sleep_us(long us)
{
	struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };

	nanosleep(&ts, NULL);
}

static void region_map(void)
{
	struct stat st;
	int fd;

	for (int i = 0; i < WAIT_MS / 10 && !e2e_file_has_magic(region, CMX_IVS_MAGIC); i++)
		sleep_us(10000);
	fd = open(region, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	map_size = (uint64_t)st.st_size;
	map = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert(map != MAP_FAILED);
	close(fd);
	ck_assert_uint_eq(((struct cmx_ivs_hdr *)map)->nslots, NSLOTS);
}

/* Asks for a fresh session on slot i (bumping the generation, as a new
 * process or a rebooted VM would) and binds its rings. */
static void slot_connect(struct slot *s, unsigned i)
{
	const struct cmx_ivs_hdr *h = (const struct cmx_ivs_hdr *)map;
	uint64_t want;

	s->ctl = (struct cmx_ivs_slot *)(map + h->slot_off + i * h->slot_size);
	s->area = (uint8_t *)s->ctl + CMX_IVS_AREA_AT;
	s->gen = CMX_IVS_GEN(__atomic_load_n(&s->ctl->host, __ATOMIC_ACQUIRE)) + 1;
	if (s->ctl->guest_gen >= s->gen)
		s->gen = s->ctl->guest_gen + 1;
	__atomic_store_n(&s->ctl->guest_gen, s->gen, __ATOMIC_RELEASE);
	want = CMX_IVS_WORD(CMX_IVS_READY, s->gen);
	for (int k = 0; k < WAIT_MS && __atomic_load_n(&s->ctl->host, __ATOMIC_ACQUIRE) != want;
	     k++)
		sleep_us(1000);
	ck_assert_uint_eq(__atomic_load_n(&s->ctl->host, __ATOMIC_ACQUIRE), want);
	memcpy(&s->ah, s->area, sizeof(s->ah));
	ck_assert_uint_eq(s->ah.magic, CMX_AREA_MAGIC);
	ck_assert_int_eq(cmx_ring_init(&s->cmd, s->area + s->ah.ring_off[CMX_RING_CMD],
				       s->ah.ring_len[CMX_RING_CMD], 0),
			 0);
	ck_assert_int_eq(cmx_ring_init(&s->rep, s->area + s->ah.ring_off[CMX_RING_REPLY],
				       s->ah.ring_len[CMX_RING_REPLY], 0),
			 0);
	s->seq = 0;
}

static void ring_put(struct slot *s, const void *p, size_t n)
{
	ck_assert_int_eq(cmx_ring_write(&s->cmd, p, n), (long)n);
	cmx_ring_publish(&s->cmd); /* nobody to ring: the daemon polls */
}

static void ring_msg(struct slot *s, const struct cmx_msgdesc *d, const void *in, int sync,
		     uint16_t flags, uint32_t off, uint64_t bulk)
{
	size_t size = cmx_codec_size(d, in);
	uint8_t buf[512];
	struct cmx_hdr h = { .size = (uint32_t)size,
			     .op = d->op,
			     .flags = (uint16_t)((sync ? CMX_HDR_SYNC : 0) | flags),
			     .seq = sync ? s->seq++ : 0,
			     .area_off = off,
			     .bulk = bulk };

	ck_assert_uint_le(CMX_HDR_SIZE + size, sizeof(buf));
	memcpy(buf, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, in, buf + CMX_HDR_SIZE);
	ring_put(s, buf, CMX_HDR_SIZE + size);
}

/* Reads one reply from the reply ring; its status, outputs into out. */
static int ring_reply(struct slot *s, const struct cmx_msgdesc *d, void *out)
{
	static uint8_t args[4096] __attribute__((aligned(8)));
	struct cmx_hdr h;
	int64_t status;

	for (int i = 0; i < WAIT_MS * 10 && cmx_ring_readable(&s->rep) < CMX_HDR_SIZE; i++)
		sleep_us(100);
	ck_assert_int_ge(cmx_ring_readable(&s->rep), CMX_HDR_SIZE);
	cmx_ring_read(&s->rep, &h, CMX_HDR_SIZE);
	ck_assert_uint_eq(h.op, CMX_OP_REPLY);
	ck_assert_uint_eq(h.seq, s->seq - 1);
	ck_assert_uint_le(h.size, sizeof(args));
	while (cmx_ring_readable(&s->rep) < h.size)
		sleep_us(100);
	cmx_ring_read(&s->rep, args, h.size);
	cmx_ring_consume(&s->rep);
	memcpy(&status, args, 8);
	if (d)
		ck_assert_int_eq(cmx_codec_decode(d, args + 8, h.size - 8, out), 0);
	return (int)status;
}

static void slot_hello(struct slot *s)
{
	struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION,
				   .role = CMX_ROLE_CALL };
	struct cmx_Hello_out out;

	ring_msg(s, &cmx_desc_Hello_in, &in, 1, 0, 0, 0);
	ck_assert_int_eq(ring_reply(s, &cmx_desc_Hello_out, &out), 0);
	ck_assert_uint_ne(out.session, 0);
	s->session = out.session;
}

static void slot_ping(struct slot *s)
{
	struct cmx_Ping_in in = { 0 };

	ring_msg(s, &cmx_desc_Ping_in, &in, 1, 0, 0, 0);
	ck_assert_int_eq(ring_reply(s, NULL, NULL), 0);
}

/* Keeps the guest's beat going while it waits, as the ICD does. */
static void beat(struct slot *s)
{
	__atomic_fetch_add(&s->ctl->guest_beat, 1, __ATOMIC_RELAXED);
}

/* 1 once the daemon has ended the slot's session (CLOSED for its
 * generation). beating: the guest still polls meanwhile. */
static int slot_closed(struct slot *s, int beating)
{
	uint64_t closed = CMX_IVS_WORD(CMX_IVS_CLOSED, s->gen);

	for (int i = 0; i < WAIT_MS; i++) {
		if (__atomic_load_n(&s->ctl->host, __ATOMIC_ACQUIRE) == closed)
			return 1;
		if (beating)
			beat(s);
		sleep_us(1000);
	}
	return 0;
}

/* A context, a queue and a 1 MiB buffer at ids 0x10010..12: objects and
 * bytes the session must give back. */
static void slot_make_buffer(struct slot *s)
{
	uint64_t devs[1] = { 1 }, qprops[1] = { 0 };
	struct cmx_CreateContext_in ctx = { .context = { 0x10010 }, .devices = { devs, 1 } };
	struct cmx_CreateQueue_in qu = {
		.queue = { 0x10011 }, .context = { 0x10010 }, .device = { 1 }, .props = { qprops, 1 }
	};
	struct cmx_CreateBuffer_in buf = { .mem = { 0x10012 }, .context = { 0x10010 },
					   .size = 1 << 20 };

	ring_msg(s, &cmx_desc_CreateContext_in, &ctx, 0, 0, 0, 0);
	ring_msg(s, &cmx_desc_CreateQueue_in, &qu, 0, 0, 0, 0);
	ring_msg(s, &cmx_desc_CreateBuffer_in, &buf, 0, 0, 0, 0);
	slot_ping(s); /* all of it taken in */
}

START_TEST(roundtrip_and_lies)
{
	struct cmx_Ping_in pin = { 0 };
	struct cmx_hdr big = { .size = CMX_MAX_ARGS + 8, .op = CMX_OP_Ping, .flags = CMX_HDR_SYNC };
	struct slot other, s;
	struct client uc;
	uint64_t o0, b0;

	region_map();
	daemon_counts(&o0, &b0);
	hello(&uc);
	slot_connect(&other, NSLOTS - 1);
	slot_hello(&other);
	for (int i = 0; i < 7; i++) {
		slot_connect(&s, 0);
		if (i != 0) {
			slot_hello(&s);
			slot_make_buffer(&s);
		}
		switch (i) {
		case 0: /* garbage before Hello */
			ring_put(&s, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
				     "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
				 CMX_HDR_SIZE);
			break;
		case 1: /* a head more than the ring ahead */
			__atomic_store_n(&s.cmd.ctl->head, s.cmd.pos + s.cmd.size + 64,
					 __ATOMIC_RELEASE);
			break;
		case 2: /* a head behind the daemon's tail */
			__atomic_store_n(&s.cmd.ctl->head, s.cmd.pos - 8, __ATOMIC_RELEASE);
			break;
		case 3: /* an oversized message */
			ring_put(&s, &big, CMX_HDR_SIZE);
			break;
		case 4: /* a reply-ring tail ahead of the daemon's head */
			__atomic_store_n(&s.rep.ctl->tail, s.rep.pos + 4096, __ATOMIC_RELEASE);
			ring_msg(&s, &cmx_desc_Ping_in, &pin, 1, 0, 0, 0);
			break;
		case 5: { /* a payload named outside the slot's area */
			struct cmx_WriteBuffer_in wr = { .queue = { 0x10011 }, .mem = { 0x10012 },
							 .size = 64 };
			ring_msg(&s, &cmx_desc_WriteBuffer_in, &wr, 0, CMX_HDR_AREA,
				 (uint32_t)s.ah.size + 4096, 64);
			break;
		}
		case 6: { /* a second Hello */
			struct cmx_Hello_in in = { .magic = CMX_PROTO_MAGIC,
						   .version = CMX_PROTO_VERSION,
						   .role = CMX_ROLE_CALL };
			ring_msg(&s, &cmx_desc_Hello_in, &in, 1, 0, 0, 0);
			break;
		}
		}
		ck_assert_msg(slot_closed(&s, 1), "slot case %d not ended", i);
		/* Every other session is untouched. */
		slot_ping(&other);
		ping_ok(&uc);
	}
	__atomic_store_n(&other.ctl->guest_gen, 0, __ATOMIC_RELEASE);
	ck_assert(slot_closed(&other, 1));
	close(uc.fd);
	counts_return(o0, b0);
	munmap(map, map_size);
}
END_TEST

/* A guest that asks again (a new process, a rebooted VM) while its session
 * holds objects gets a fresh session; the old one returns everything. So
 * does one that writes generation after generation. */
START_TEST(reconnect)
{
	struct slot s;
	uint64_t o0, b0, first;

	region_map();
	daemon_counts(&o0, &b0);
	slot_connect(&s, 1);
	slot_hello(&s);
	slot_make_buffer(&s);
	first = s.session;
	slot_connect(&s, 1);
	slot_hello(&s);
	ck_assert_uint_ne(s.session, first);
	slot_ping(&s);
	/* A guest that churns generations while it holds objects: the daemon
	 * ends up serving the last one asked for. */
	slot_make_buffer(&s);
	for (uint32_t g = 1; g <= 1000; g++) {
		__atomic_store_n(&s.ctl->guest_gen, s.gen + g, __ATOMIC_RELEASE);
		if (!(g % 100))
			sleep_us(1000);
	}
	slot_connect(&s, 1);
	slot_hello(&s);
	slot_ping(&s);
	__atomic_store_n(&s.ctl->guest_gen, 0, __ATOMIC_RELEASE);
	ck_assert(slot_closed(&s, 1));
	counts_return(o0, b0);
	munmap(map, map_size);
}
END_TEST

/* A guest that stops polling (its VM killed): after CMX_IVS_DEAD_MS the
 * daemon ends the session and returns what it held. */
START_TEST(guest_gone)
{
	struct slot s;
	uint64_t o0, b0;

	region_map();
	daemon_counts(&o0, &b0);
	slot_connect(&s, 2);
	slot_hello(&s);
	slot_make_buffer(&s);
	ck_assert(slot_closed(&s, 0));
	counts_return(o0, b0);
	munmap(map, map_size);
}
END_TEST

int main(void)
{
	Suite *su = suite_create("ivshmem");
	TCase *tc = tcase_create("ivshmem");
	char args[256];
	int rc;

	snprintf(region, sizeof(region), "/dev/shm/clmux-test-ivshmem-%d", (int)getpid());
	/* The size as the configuration writes sizes too (cmx_size_parse()). */
	snprintf(args, sizeof(args), "--listen ivshmem:%s,size=16MiB,slots=%d", region, NSLOTS);
	setenv("CMX_E2E_DAEMON_ARGS", args, 1);
	tcase_add_test(tc, roundtrip_and_lies);
	tcase_add_test(tc, reconnect);
	tcase_add_test(tc, guest_gone);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(su, tc);
	rc = e2e_daemon_run(su);
	unlink(region);
	return rc;
}
