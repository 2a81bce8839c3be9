// SPDX-License-Identifier: MIT
// Host timers: the guest's clock, calibrated against the device's timer on
// the host (guest/timer.c).
#ifndef CMX_GUEST_TIMER_H
#define CMX_GUEST_TIMER_H

#include <CL/cl.h>
#include <stdint.h>

struct cmx_session;

/* The guest's clock (CLOCK_MONOTONIC), ns: the platform's host timer. */
uint64_t cmx_timer_now(void);

/* Device id's timer as of now (in *dev, unless NULL) and the host timer
 * (*host, unless NULL); the daemon's error where the device has no timer
 * (CL_INVALID_OPERATION). */
cl_int cmx_timer_read(struct cmx_session *s, uint64_t id, cl_ulong *dev, cl_ulong *host);

#endif
