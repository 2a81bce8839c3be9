// SPDX-License-Identifier: MIT
// clmuxd as the vhost-user-vsock device of QEMU VMs.
#ifndef CMX_HOST_VHOST_H
#define CMX_HOST_VHOST_H

#include "server.h"

/* 1 when spec is a vhost-user-vsock address. */
int cmx_vhost_is_spec(const char *spec);
/* Parses "vhost-user-vsock:PATH,cid=N[,port=P][,tenant=NAME]" and listens
 * on PATH for the VMM; with ",fd=N", on that listening socket, whose file
 * is the front end's. 0, or -errno with a reason in err. */
int cmx_vhost_listen(struct cmx_server *srv, const char *spec, char *err, size_t errlen);
/* Stops listening and ends every VM's device (their sessions close). */
void cmx_vhost_drain(struct cmx_server *srv);
/* Frees the listeners (srv->vhost), once the loop is gone. */
void cmx_vhost_destroy(struct cmx_server *srv);

#endif
