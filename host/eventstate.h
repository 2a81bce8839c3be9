// SPDX-License-Identifier: MIT
// Events in a state file: what a checkpoint writes of the events a guest
// holds, and how a restore makes them again under the same ids.
#ifndef CMX_HOST_EVENTSTATE_H
#define CMX_HOST_EVENTSTATE_H

#include <stdint.h>

struct cmx_session;
struct cmx_state_rec;
struct cmx_state_writer;

/* A user event the guest has not set, that a command waits for: draining
 * the device would wait for the guest, and the command is not kept. Its
 * id, or 0. Before the queues are finished. */
uint64_t cmx_eventstate_blocked(struct cmx_session *s);
/* Every event object of s as one CMX_STATE_EVENT record, after its queues
 * were finished; the callbacks whose status is reached are answered
 * first, by this daemon. */
void cmx_eventstate_write(struct cmx_session *s, struct cmx_state_writer *w);
/* A CMX_STATE_EVENT record made again in s: 0, or -errno with *why. */
int cmx_eventstate_restore(struct cmx_session *s, const struct cmx_state_rec *rec,
			   const char **why);

#endif
