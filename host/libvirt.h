// SPDX-License-Identifier: MIT
// clmuxd beside libvirt: a domain whose metadata holds <clmux:gpu .../> is a
// tenant, with its quotas from that element and a VM device of its own, for
// as long as it runs.
#ifndef CMX_HOST_LIBVIRT_H
#define CMX_HOST_LIBVIRT_H

#include "server.h"
#include "text.h"

/*
 * The front end follows the libvirtd at uri (qemu:///system): the domains
 * it runs at start, then their lifecycle and metadata events, from a thread
 * of its own that reconnects with a growing pause when libvirtd goes away
 * (the domains it ran keep their service meanwhile). group: the group QEMU
 * runs as, given the domains' device files; NULL or "" none (mode 0600).
 * 0, or -errno (logged): -ENOTSUP when clmuxd was built without libvirt.
 */
int cmx_libvirt_start(struct cmx_server *srv, const char *uri, const char *group);

/*
 * Admin requests (clmuxctl): "domain-xml NAME" prints the device lines the
 * domain's XML needs; "domain-prepare NAME UUID KEY=VALUE..." (libvirt's
 * hook at prepare, from the domain's XML) makes its device before QEMU
 * opens it, and answers once it exists. 1 when w[0] was one of them (the
 * answer is in out), else 0.
 */
int cmx_libvirt_admin(struct cmx_server *srv, char **w, unsigned n, struct cmx_text *out);

#endif
