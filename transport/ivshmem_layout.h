// SPDX-License-Identifier: MIT
// Layout of an ivshmem region: the file clmuxd shares with a VM as the BAR2
// of an ivshmem-plain device, cut into slots, one guest session each.
#ifndef CMX_IVSHMEM_LAYOUT_H
#define CMX_IVSHMEM_LAYOUT_H

#include <stdint.h>

/*
 * offset 0              struct cmx_ivs_hdr (the host writes it once)
 * slot_off + i*slot_size  slot i: a control page (struct cmx_ivs_slot),
 *                       then CMX_IVS_AREA_AT bytes in, an area exactly as
 *                       the shm transport's memfd (area_layout.h: header,
 *                       three rings, data region), rewritten by the host
 *                       for every new session of the slot.
 *
 * ivshmem-plain has no interrupts: nobody rings a doorbell, both sides
 * poll. A guest takes a slot by locking its first byte (an OFD lock on the
 * BAR file, which only other processes of the same VM see), then asks for
 * a session by writing a new generation; the host closes whatever that
 * slot served, rewrites the area and answers with the same generation and
 * READY. Hello then goes through the command ring.
 */
struct cmx_ivs_hdr {
	uint32_t magic;	  /* CMX_IVS_MAGIC */
	uint32_t version; /* CMX_IVS_VERSION */
	uint64_t size;	  /* bytes of the region */
	uint32_t nslots;
	uint32_t reserved;
	uint64_t slot_off;  /* slot 0, a multiple of 4096 */
	uint64_t slot_size; /* bytes of each slot, a multiple of 4096 */
};

/* A slot's control page. Each word is written by one side only, on its own
 * line; neither side trusts what the other wrote beyond comparing it. */
struct cmx_ivs_slot {
	/* Guest: a fresh session is wanted under this generation (non-zero,
	 * different from the one the host last served). */
	_Alignas(64) uint32_t guest_gen;
	/* Host: CMX_IVS_WORD(state, generation) of the session it serves,
	 * stored in one piece so that a guest never sees one without the
	 * other. */
	_Alignas(64) uint64_t host;
	/* Each side counts up while it polls: the other takes a counter that
	 * stood still for CMX_IVS_DEAD_MS as a peer that is gone (a VM
	 * killed, a daemon killed). */
	_Alignas(64) uint64_t guest_beat;
	_Alignas(64) uint64_t host_beat;
	_Alignas(64) uint8_t end[];
};

#define CMX_IVS_MAGIC	0x49584d43u /* "CMXI" */
#define CMX_IVS_VERSION 1u
#define CMX_IVS_PAGE	4096u
#define CMX_IVS_AREA_AT CMX_IVS_PAGE /* the slot's area, after its control page */
#define CMX_IVS_MAX_SLOTS 64u
#define CMX_IVS_DEAD_MS 10000u

/* States of the generation in `host`. */
enum { CMX_IVS_NONE, CMX_IVS_READY, CMX_IVS_CLOSED };

#define CMX_IVS_WORD(state, gen) ((uint64_t)(state) << 32 | (uint32_t)(gen))
#define CMX_IVS_STATE(word)	 ((uint32_t)((word) >> 32))
#define CMX_IVS_GEN(word)	 ((uint32_t)(word))

/* PCI ids of QEMU's ivshmem device (guest auto-discovery). */
#define CMX_IVS_PCI_VENDOR 0x1af4u
#define CMX_IVS_PCI_DEVICE 0x1110u

#endif
