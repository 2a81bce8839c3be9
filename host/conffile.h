// SPDX-License-Identifier: MIT
// clmuxd.conf: tenants, quotas, identity mapping (docs/admin.md).
#ifndef CMX_HOST_CONFFILE_H
#define CMX_HOST_CONFFILE_H

#include <stddef.h>

#include "tenant.h"

/* SYSCONFDIR/clmux/clmuxd.conf: /etc/clmux/clmuxd.conf with the packages. */
#ifndef CMX_SYSCONFDIR
#define CMX_SYSCONFDIR "/etc"
#endif
#define CMX_CONFIG_DEFAULT CMX_SYSCONFDIR "/clmux/clmuxd.conf"

/* Parses text into ts (tenants added, defaults and the default tenant
 * set). 0, or -EINVAL with "line N: reason" in why. */
int cmx_config_parse(const char *text, struct cmx_tenants *ts, char *why, size_t whylen);
/* Reads and parses path; -errno when it cannot be read. */
int cmx_config_load(const char *path, struct cmx_tenants *ts, char *why, size_t whylen);

/* text with [tenant NAME]'s six quota lines set to q, everything else
 * (comments, order, other keys) kept; the section is appended when
 * missing. A new string, or NULL. */
char *cmx_config_edit(const char *text, const char *tenant, const struct cmx_quota *q);
/* cmx_config_edit() on the file, written back atomically (a temporary file
 * beside it, fsync, rename). 0 or -errno. */
int cmx_config_save(const char *path, const char *tenant, const struct cmx_quota *q);

#endif
