// SPDX-License-Identifier: MIT
// The guest's side of an ivshmem region: the BAR mapped from user space, a
// slot taken, the session handshake, and polling with growing naps.
// Layer: transport, below dial.c and session.c (guest/icd.h has the layers).
#ifndef CMX_GUEST_IVSHMEM_H
#define CMX_GUEST_IVSHMEM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "ivshmem_layout.h"

struct cmx_givs {
	int fd; /* the BAR file; its OFD lock holds the slot */
	uint8_t *map;
	uint64_t size;
	struct cmx_ivs_slot *ctl;
	uint32_t gen;
	uint8_t *area; /* the slot's area (area_layout.h) */
	uint64_t area_len;
	uint64_t max_nap_ns;
	uint64_t spin_ns; /* a waiter spins this long before its first nap */
	/* The daemon's counter as last seen, and when it moved (any thread
	 * updates them: relaxed atomics). */
	uint64_t seen, seen_ns;
	/* Our beat, on a thread of its own (the daemon must not take a guest
	 * whose threads are all busy elsewhere for a dead one). */
	pthread_t beat;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int stop, beating;
};

/* "ivshmem:PATH" (a BAR's sysfs resource2, or the daemon's file itself on
 * the same host), or "ivshmem" to find the first ivshmem PCI device that
 * holds a clmux region. Maps it, takes a free slot and waits until the
 * daemon has a fresh session ready there. 0 or -errno (-EBUSY: every slot
 * is taken by another process; -ECONNREFUSED: no daemon polls the region). */
int cmx_givs_open(const char *spec, struct cmx_givs *v);
/* Sleeps a little, longer each time (*nap: 0 on the first call), after
 * checking that the session is still the daemon's. 0, or -ECONNRESET when
 * the daemon closed it or has not polled for CMX_IVS_DEAD_MS. */
int cmx_givs_nap(struct cmx_givs *v, uint64_t *nap);
/* Tells the daemon the session is over and lets the slot go. */
void cmx_givs_close(struct cmx_givs *v);
/* "ivshmem:PATH" of the first clmux ivshmem device into buf, or -ENOENT. */
int cmx_givs_discover(char *buf, size_t len);

#endif
