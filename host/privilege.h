// SPDX-License-Identifier: MIT
// Dropping root after start-up (clmuxd --user NAME).
#ifndef CMX_HOST_PRIVILEGE_H
#define CMX_HOST_PRIVILEGE_H

#include <stddef.h>

/* Becomes user NAME for good: NAME's supplementary groups, its group and
 * uid (real, effective and saved), then no_new_privs. 0, or -errno with a
 * reason in err; the caller exits on failure, never runs on as root. */
int cmx_privilege_drop(const char *user, char *err, size_t errlen);

#endif
