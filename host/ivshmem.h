// SPDX-License-Identifier: MIT
// clmuxd serving VMs through an ivshmem region: a shared file that QEMU
// maps into the guest as an ivshmem-plain device's BAR2.
#ifndef CMX_HOST_IVSHMEM_H
#define CMX_HOST_IVSHMEM_H

#include <stddef.h>

#include "server.h"

/* 1 when spec is an ivshmem address. */
int cmx_ivshmem_is_spec(const char *spec);
/* The region file of spec, made (or checked, as cmx_ivshmem_listen() does)
 * and left for a worker to serve: the front end makes it before QEMU maps
 * it (host/libvirt.c). 0, or -errno with the reason in err. */
int cmx_ivshmem_create(struct cmx_server *srv, const char *spec, char *err, size_t errlen);
/* Parses "ivshmem:PATH,size=SIZE[,slots=N][,poll=US][,tenant=NAME]",
 * creates or opens PATH, lays the region out and starts polling it on the
 * loop. 0, or -errno with a reason in err. */
int cmx_ivshmem_listen(struct cmx_server *srv, const char *spec, char *err, size_t errlen);
/* Stops polling; every slot's session ends and the guests see CLOSED. */
void cmx_ivshmem_drain(struct cmx_server *srv);

#endif
