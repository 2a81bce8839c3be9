// SPDX-License-Identifier: MIT
// Bulk lanes: how a large transfer is cut into one piece per lane, the same
// on both sides (docs/protocol.md, Bulk lanes).
#ifndef CMX_TRANSPORT_PIECE_H
#define CMX_TRANSPORT_PIECE_H

#include <stdint.h>

/* Most lanes one session may open. */
#define CMX_LANES_MAX 8u
/* Pieces start on this boundary (but the last ends where the data does). */
#define CMX_LANE_ALIGN 4096u

/* Piece i of n of a transfer of size bytes: [*off, *off + *len); *len may
 * be 0 (nothing travels on that lane). n is 1..CMX_LANES_MAX. */
static inline void cmx_lane_piece(uint64_t size, unsigned n, unsigned i, uint64_t *off,
				  uint64_t *len)
{
	uint64_t step = (size + n - 1) / n;

	step = (step + CMX_LANE_ALIGN - 1) & ~(uint64_t)(CMX_LANE_ALIGN - 1);
	*off = (uint64_t)i * step < size ? (uint64_t)i * step : size;
	*len = size - *off < step ? size - *off : step;
}

#endif
