// SPDX-License-Identifier: MIT
// vhost-user back end (QEMU docs/interop/vhost-user.rst): the front end's
// messages, its guest memory mapped from the fds it sends, and the
// vrings it sets up. The caller owns the loop: it polls the socket and the
// kick fds, and calls in here.
#ifndef CMX_VHOST_USER_H
#define CMX_VHOST_USER_H

#include <stddef.h>
#include <stdint.h>

#include "virtq.h"

#define CMX_VHU_MAX_REGIONS 8
#define CMX_VHU_MAX_QUEUES 2
#define CMX_VHU_MAX_CONFIG 256

struct cmx_vhu_region {
	uint64_t gpa, size, uva; /* guest-physical and front-end addresses */
	void *map;		 /* our mapping of the whole fd range */
	size_t map_len;
	uint8_t *host; /* gpa's bytes in our mapping */
};

struct cmx_vhu_vring {
	unsigned num;
	uint16_t base;
	uint64_t desc_uva, avail_uva, used_uva;
	uint32_t addr_flags; /* SET_VRING_ADDR's: VHOST_VRING_F_LOG */
	uint64_t log_gpa;    /* the used area's guest-physical address, for the log */
	int kick_fd, call_fd, err_fd;
	int enabled, started;
	struct cmx_virtq q;
};

struct cmx_vhu_dev;

struct cmx_vhu_ops {
	/* A queue starts (kick fd known, enabled) or stops; the caller polls
	 * or stops polling its kick fd. */
	void (*queue_state)(struct cmx_vhu_dev *d, unsigned idx, int running);
	/* The memory table is about to change: rings were just stopped. */
	void (*mem_changed)(struct cmx_vhu_dev *d);
	/* The front end stopped the device (every ring fetched back, as on a
	 * guest reset or shutdown): what the guest had open is gone. */
	void (*stopped)(struct cmx_vhu_dev *d);
};

struct cmx_vhu_dev {
	int fd; /* the front end's connection */
	uint64_t features;	 /* offered device features (besides our own) */
	uint64_t acked_features, acked_protocol;
	uint8_t config[CMX_VHU_MAX_CONFIG];
	unsigned config_len;
	unsigned nregions;
	struct cmx_vhu_region regions[CMX_VHU_MAX_REGIONS];
	struct cmx_vhu_vring vring[CMX_VHU_MAX_QUEUES];
	/* The dirty log (VHOST_F_LOG_ALL with LOG_SHMFD): a bit per page of
	 * guest memory, set for each page the device writes. */
	uint8_t *log;
	uint64_t log_len;
	void *log_map;
	size_t log_map_len;
	const struct cmx_vhu_ops *ops;
	void *user;
	int broken; /* sticky: the connection is unusable */
};

void cmx_vhu_dev_init(struct cmx_vhu_dev *d, int fd, uint64_t device_features, const void *config,
		      unsigned config_len, const struct cmx_vhu_ops *ops, void *user);
/* Unmaps memory and closes every fd, the connection's too. */
void cmx_vhu_dev_fini(struct cmx_vhu_dev *d);
/* Reads and handles one message (call when the socket is readable). 0, or
 * -errno when the connection is over (peer closed, or it broke the
 * protocol). */
int cmx_vhu_dev_handle(struct cmx_vhu_dev *d);
/* Guest-physical range as a host pointer, NULL unless wholly inside one
 * mapped region (a cmx_virtq_xlate_fn; ctx is the device). */
void *cmx_vhu_gpa(void *ctx, uint64_t gpa, uint64_t len);
/* Marks guest-physical [gpa, gpa+len) dirty in the front end's log while
 * it asks for logging (a cmx_virtq_log_fn; ctx is the device). */
void cmx_vhu_log(void *ctx, uint64_t gpa, uint64_t len);
/* Signals the front end that queue idx has used buffers. */
void cmx_vhu_call(struct cmx_vhu_dev *d, unsigned idx);

#endif
