// SPDX-License-Identifier: MIT
// Checks a call's header against the schema before anything is allocated.
#ifndef CMX_FRAME_H
#define CMX_FRAME_H

#include "wire.h"

/* 0 when h is a well-formed guest-to-host call header, else -errno:
 * unknown opcode or a notification, arguments over the limit or unaligned,
 * a payload the call does not take or over the limit, a sync flag that does
 * not match the schema. */
int cmx_frame_check_call(const struct cmx_hdr *h);

#endif
