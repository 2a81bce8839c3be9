// SPDX-License-Identifier: MIT
// The ICD's CLMUX_* numbers, read and checked once when it loads.
#ifndef CMX_GUEST_ENV_H
#define CMX_GUEST_ENV_H

#include <stdint.h>

/* A value the ICD decides (by core count, or its built-in default). */
#define CMX_ENV_AUTO (-1)

struct cmx_env {
	int disable;		 /* CLMUX_DISABLE set: the ICD offers no platform */
	int64_t lanes;		 /* CLMUX_LANES, 0..CMX_LANES_MAX; auto: min(4, CPUs) */
	int64_t area_mb;	 /* CLMUX_AREA_MB, 0..1024; auto: 256 */
	int64_t heap_mb;	 /* CLMUX_HEAP_MB, 0..1024; auto: what the area leaves */
	int64_t ivshmem_poll_us; /* CLMUX_IVSHMEM_POLL_US, 1..1000000; auto: 1000 */
	int64_t copy_threads;	 /* CLMUX_COPY_THREADS, 0..7; auto: 3 with 8 CPUs, else 0 */
};

/* The values, read from the environment on the first call (the ICD's
 * load): a value out of range is logged once and the default taken.
 * The ICD's other variables are strings, read where a session is dialled
 * (guest/dial.c) beside the client.conf keys they override, and checked
 * there: CLMUX_SERVER by cmx_addr_parse() (its error ends the dial),
 * CLMUX_COMPRESS against lz4|none (a warning), CLMUX_TOKEN and
 * CLMUX_TLS_CA by the daemon and the TLS handshake. */
const struct cmx_env *cmx_env(void);

#endif
