// SPDX-License-Identifier: MIT
// Sockets the service manager opened for clmuxd (socket activation).
#ifndef CMX_HOST_ACTIVATION_H
#define CMX_HOST_ACTIVATION_H

struct cmx_addr;

/* Takes the listening sockets passed by the service manager (sd_listen_fds(3):
 * $LISTEN_PID names this process, $LISTEN_FDS of them from fd 3 on) and
 * takes the variables out of the environment: the workers this process
 * starts must not take them. The sockets are close-on-exec from here. */
void cmx_activation_init(void);
/* The passed socket that listens on a's Unix path, handed over once; -1
 * where none does (the caller binds its own). */
int cmx_activation_take(const struct cmx_addr *a);
/* Closes (and logs) the passed sockets that no listener took. */
void cmx_activation_done(void);

#endif
