// SPDX-License-Identifier: MIT
// The clmux wire format: message header, reserved opcodes, limits.
#ifndef CMX_WIRE_H
#define CMX_WIRE_H

#include <stdint.h>

/*
 * Every message, in both directions, is a 24-byte header, then `size` bytes of
 * encoded arguments (a multiple of 8), then `bulk` bytes of payload that the
 * arguments describe (buffer contents). All integers are little-endian.
 */
struct cmx_hdr {
	uint32_t size;	/* bytes of encoded arguments after the header */
	uint16_t op;	/* opcode: a call or notification of schema/, or CMX_OP_REPLY (1) */
	uint16_t flags; /* CMX_HDR_* */
	uint32_t seq;	/* caller's sequence number, echoed in the reply */
	uint32_t area_off; /* with CMX_HDR_AREA: the payload's offset in the shared area; else 0 */
	uint64_t bulk; /* payload bytes after the arguments */
};

#define CMX_HDR_SIZE 24u
_Static_assert(sizeof(struct cmx_hdr) == CMX_HDR_SIZE, "header layout");

/* The sender waits for a CMX_OP_REPLY with this seq; a call the schema
 * marks `both` is sync or async as this bit says. */
#define CMX_HDR_SYNC 0x1u
/* The payload is not in the stream: it is the `bulk` bytes at offset
 * `area_off` of the session's shared area (docs/protocol.md). */
#define CMX_HDR_AREA 0x2u
/* The payload is compressed (transport/compress.h): `bulk` counts the bytes
 * on the wire; only after Compress granted LZ4 (docs/protocol.md). */
#define CMX_HDR_LZ4 0x4u

/* Hello's magic; CMX_PROTO_VERSION is the schema's (proto.gen.h). */
#define CMX_PROTO_MAGIC 0x31584d43u /* "CMX1" */

/* Limits a receiver enforces before allocating anything. */
#define CMX_MAX_ARGS (16u << 20)       /* encoded arguments of one message */
#define CMX_MAX_BULK (16ull << 30)     /* payload of one message */
#define CMX_MAX_ARRAY (1u << 20)       /* elements of one array argument */
#define CMX_MAX_DEVINFO (1u << 20)     /* one value of GetDeviceInfoAll */

/* Ids below this are the host's (devices: 1..n, given at Hello); the guest
 * numbers the objects it creates from here up. */
#define CMX_FIRST_GUEST_ID 0x10000u

/* Handle kinds named by `id` arguments; the host checks type and owner. */
enum cmx_kind {
	CMX_K_NONE = 0,
	CMX_K_PLATFORM,
	CMX_K_DEVICE,
	CMX_K_CONTEXT,
	CMX_K_QUEUE,
	CMX_K_MEM,
	CMX_K_PROGRAM,
	CMX_K_KERNEL,
	CMX_K_EVENT,
	CMX_K_SAMPLER,
	CMX_K_CMDBUF, /* cl_khr_command_buffer */
	CMX_K_COUNT,
};

#endif
