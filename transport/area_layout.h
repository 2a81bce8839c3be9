// SPDX-License-Identifier: MIT
// Layout of the shared memory a session maps: header, rings, data region.
#ifndef CMX_AREA_LAYOUT_H
#define CMX_AREA_LAYOUT_H

#include <stdint.h>

/*
 * The host creates the memory (a sealed memfd) and writes this header at
 * offset 0 before handing the fd to the guest; neither side changes it
 * afterwards. Regions are 4096-aligned and do not overlap.
 */
struct cmx_area_hdr {
	uint32_t magic;			   /* CMX_AREA_MAGIC */
	uint32_t version;		   /* 1 */
	uint64_t size;			   /* bytes of the whole mapping */
	uint64_t data_off, data_len;	   /* the data region (bulk payloads) */
	/* The shm transport's rings (transport/ring.h), 0 when there are none:
	 * CMX_RING_CMD calls, CMX_RING_REPLY replies, CMX_RING_NOTIFY
	 * notifications. */
	uint64_t ring_off[3], ring_len[3];
	/* Completion fences (0 and 0: none): fence_n 64-bit words at byte
	 * fence_at of the header's page. The host stores a guest event's id
	 * in word id % fence_n (release ordering) once the command has
	 * completed without error; a guest whose event's word holds its id
	 * knows so without a round trip. A word another event took since
	 * just means asking the daemon. While the host watches a command
	 * for its completion, the word holds its id with
	 * CMX_AREA_FENCE_WATCHED set (an older guest sees no fence). */
	uint32_t fence_at, fence_n;
	/* How long, in us, the host keeps looking for the completion of a
	 * session's running commands after its last launch: a guest waiting
	 * for a fence may look as long before it asks (0: 50). */
	uint32_t fence_spin_us;
};

#define CMX_AREA_MAGIC	 0x41584d43u /* "CMXA" */
#define CMX_AREA_VERSION 1u

enum { CMX_RING_CMD, CMX_RING_REPLY, CMX_RING_NOTIFY, CMX_RING_COUNT };

/* OpenArea flags. */
#define CMX_AREA_RINGS 0x1u /* also make the rings (the shm transport) */
/* Buffers may live in the data region (CreateBufferArea, MapBuffer). */
#define CMX_AREA_HEAP 0x2u

/* Every payload in the data region follows a 64-byte block header; the host
 * writes only its last 8 bytes, the `done` word (CMX_AREA_DONE_AT bytes
 * before the payload), and only to say it is finished with the block. */
#define CMX_AREA_BLK	 64u
#define CMX_AREA_DONE_AT 8u

/* A fence word's mark: the host watches this event's command (guest ids
 * never have this bit). */
#define CMX_AREA_FENCE_WATCHED (1ull << 63)

/* Where the fences lie: the rest of the header's page. */
#define CMX_AREA_FENCE_AT 512u
#define CMX_AREA_FENCE_N  ((4096u - CMX_AREA_FENCE_AT) / 8u)
_Static_assert(sizeof(struct cmx_area_hdr) <= CMX_AREA_FENCE_AT, "header before the fences");

/* Limits the host grants. */
#define CMX_AREA_MIN (1ull << 20)
#define CMX_AREA_MAX (1ull << 30)

#endif
