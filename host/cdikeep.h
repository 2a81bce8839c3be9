// SPDX-License-Identifier: MIT
// The CDI spec clmuxd keeps current where clmuxd.conf asks (cdi = PATH).
#ifndef CMX_HOST_CDIKEEP_H
#define CMX_HOST_CDIKEEP_H

struct cmx_server;

/* Writes [clmuxd] cdi's spec of the daemon's tenant listeners (nothing
 * where the key is not set): at start, once every listener is open, and
 * after each reload. `when` names the occasion in the log. A failure is
 * logged; the spec on disk then stays as it was. */
void cmx_cdikeep_write(struct cmx_server *srv, const char *when);

#endif
