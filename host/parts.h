// SPDX-License-Identifier: MIT
// A program's source or IL staged part by part (ProgramPart) for the
// session, and what it is charged; below the handlers and the session.
#ifndef CMX_HOST_PARTS_H
#define CMX_HOST_PARTS_H

#include <stdint.h>

struct cmx_session;

/*
 * A source or IL larger than one message carries, staged part by part
 * (ProgramPart) for the program whose id it will be. All of it is charged
 * to the tenant's mem quota at the first part, so a program past the quota
 * is refused before the guest has sent the rest; a part that fails leaves
 * only its error, which CreateProgramWithParts answers.
 */
struct cmx_parts {
	uint64_t program, total, len;
	uint64_t charged; /* bytes charged to the session (total, or 0) */
	int err;	  /* a part failed: the creation's answer */
	char *data;
};

/* Host memory the daemon holds for the tenant, as a kept record's is. */
void cmx_parts_charge(struct cmx_session *s, int64_t n);
/* Frees s's staged bytes and their charge; the staging stays, with err,
 * when err != 0. Returns err. */
int cmx_parts_fail(struct cmx_session *s, int err);
/* A program's parts staged and not taken go, and their charge with them
 * (a new upload, its creation, the session's end). */
void cmx_parts_drop(struct cmx_session *s);

#endif
