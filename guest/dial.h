// SPDX-License-Identifier: MIT
// How the guest reaches clmuxd: the server address and token from the
// environment or /etc/clmux/client.conf, and connecting one channel.
#ifndef CMX_GUEST_DIAL_H
#define CMX_GUEST_DIAL_H

#include <stddef.h>

#include "addr.h"

#define CMX_CLIENT_CONF "/etc/clmux/client.conf"
#define CMX_DEFAULT_UNIX "/run/clmux/clmuxd.sock"

/* The value of `key = value` in client.conf into buf; 0 or -ENOENT. */
int cmx_conf_get(const char *key, char *buf, size_t len);
/* $CLMUX_SERVER, else client.conf's server, else the default: the local
 * daemon's socket when it exists, else vsock to the host when this is a VM
 * (/dev/vsock), else the socket's path anyway (for the message). */
const char *cmx_dial_server(char *buf, size_t len);
/* Connects one channel; when a token is set ($CLMUX_TOKEN, client.conf's
 * token) or the transport is tcp, sends Auth and waits for its answer.
 * A socket, or -errno: -ENOKEY (a token is needed and none is set),
 * -EKEYREJECTED (refused), -EAGAIN (refused after too many failures). */
int cmx_dial(const struct cmx_addr *a);

#endif
