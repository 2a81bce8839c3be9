// SPDX-License-Identifier: MIT
// Completion fences: the guest learns from its shared area which of its
// commands have completed, so that waiting for one that is done already
// costs no round trip (transport/area_layout.h).
#ifndef CMX_HOST_FENCE_H
#define CMX_HOST_FENCE_H

#include <stdint.h>

struct cmx_session;

/* The kernel launch whose guest event is `id` went to the driver (a held
 * one's placeholder stands for it until then): its fence is stored once it
 * has completed, as the loop finds at the end of a turn or before a reply.
 * Nothing without a shared area. Loop thread. */
void cmx_fence_track(struct cmx_session *s, uint64_t id);
/* Stores the fences of s's tracked commands that have completed (the
 * oldest first, up to the first still running). Loop thread. */
void cmx_fence_poll(struct cmx_session *s);
/* s is closing: it is tracked no more. */
void cmx_fence_forget(struct cmx_session *s);

#endif
