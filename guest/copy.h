// SPDX-License-Identifier: MIT
// Large copies between the application's memory and the shared area, split over helper threads where the machine has cores to spare.
#ifndef CMX_GUEST_COPY_H
#define CMX_GUEST_COPY_H

#include <stddef.h>

/* memcpy(dst, src, n); from CMX_COPY_SPLIT bytes, on several threads. */
void cmx_copy(void *dst, const void *src, size_t n);

#endif
