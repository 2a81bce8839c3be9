// SPDX-License-Identifier: MIT
// Staging buffers for payloads, reused so large transfers do not pay for
// fresh pages (page faults) on every call.
#ifndef CMX_HOST_STAGING_H
#define CMX_HOST_STAGING_H

#include <stdint.h>

/* At least size bytes, or NULL. Thread-safe. */
void *cmx_staging_get(uint64_t size);
/* Returns a buffer from cmx_staging_get(), or a block of a session's shared
 * area (host/area.h) to its guest; NULL is ignored. Thread-safe:
 * driver callbacks return staging when a native transfer completes. */
void cmx_staging_put(void *p);

#endif
