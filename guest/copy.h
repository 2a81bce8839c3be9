// SPDX-License-Identifier: MIT
// Large copies between the application's memory and the shared area, split over helper threads where the machine has cores to spare.
// Layer: the lowest, used by the transport and buffer memory (guest/icd.h).
#ifndef CMX_GUEST_COPY_H
#define CMX_GUEST_COPY_H

#include <stddef.h>

/* memcpy(dst, src, n); from CMX_COPY_SPLIT bytes, on several threads. */
void cmx_copy(void *dst, const void *src, size_t n);

/* Copies w-byte rows between pitched memory and packed rows (pack: into
 * packed). */
void cmx_pitched_copy(char *pitched, char *packed, size_t w, size_t rows, size_t slices,
		      size_t row_pitch, size_t slice_pitch, int pack);

#endif
