// SPDX-License-Identifier: MIT
// Completion fences: the guest learns from its shared area which of its
// commands have completed, so that waiting for one that is done already
// costs no round trip (transport/area_layout.h).
#ifndef CMX_HOST_FENCE_H
#define CMX_HOST_FENCE_H

#include <stdint.h>

struct cmx_server;
struct cmx_session;

/* The kernel launch whose guest event is `id` went to the driver (a held
 * one's placeholder stands for it until then): its fence is stored once it
 * has completed, as the loop finds at the end of a turn or before a reply.
 * Nothing without a shared area. Loop thread. */
/* How long, in us, the loop keeps looking for the completions of a
 * session's launches (its area header's fence_spin_us): the server's
 * fence_linger_ns, but FENCE_LINGER_MIN_NS for a session on rings (shm:),
 * whose own loop and guest spin already (8 tenants' short kernels over
 * shm: on the H200 ran at 31.7k-33.0k kernels/s with 5 ms, 42.0k-42.7k
 * with 50 us, where over unix: 5 ms took a lone tenant from 40.2k to 49.0k
 * and 64 from 30.3k to 35.9k). */
uint32_t cmx_fence_spin_us(const struct cmx_server *srv, int rings);
void cmx_fence_track(struct cmx_session *s, uint64_t id);
/* Stores the fences of s's tracked commands that have completed (the
 * oldest first, up to the first still running). Loop thread. */
void cmx_fence_poll(struct cmx_session *s);
/* s is closing: it is tracked no more. */
void cmx_fence_forget(struct cmx_session *s);
/* A launch that arrived at arrived (ns) went to the driver: its times. */
void cmx_fence_launch(struct cmx_server *srv, uint64_t arrived);
/* Logs (info) the fences stored and the refill times, at exit. */
void cmx_fence_report(struct cmx_server *srv);

#endif
