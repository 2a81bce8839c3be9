// SPDX-License-Identifier: MIT
// Readiness for systemd (Type=notify): the sd_notify datagram, no libsystemd.
#ifndef CMX_HOST_NOTIFY_H
#define CMX_HOST_NOTIFY_H

/* Takes $NOTIFY_SOCKET out of the environment (the workers this process
 * starts must not speak for it); call before any worker starts. */
void cmx_notify_init(void);
/* Sends state (e.g. "READY=1") to the service manager; 0 when none asked
 * for it, or -errno (the caller logs it: the service still runs). */
int cmx_notify(const char *state);

#endif
