// SPDX-License-Identifier: MIT
// What made each object of a session: the creation requests the daemon
// applied, kept per object so that a checkpoint can write them down.
#ifndef CMX_HOST_RECORD_H
#define CMX_HOST_RECORD_H

#include <stdint.h>

#include "wire.h"

struct cmx_call;
struct cmx_obj;
struct cmx_session;
struct cmx_state_writer;

/* One applied request: its header (bulk 0 where the payload is not kept),
 * its encoded arguments and kept payload, and the ids it names. */
struct cmx_rec {
	struct cmx_rec *prev, *next; /* the session's log, in applied order */
	struct cmx_rec *onext;	     /* the same object's records */
	uint64_t owner;		     /* the object it made or changed */
	uint64_t index;		     /* SetKernelArg: the argument's index */
	uint32_t nrefs;		     /* ids it names, after the data */
	uint8_t dead;		     /* owner released by the guest */
	uint8_t needed;		     /* scratch of cmx_record_mark() */
	uint8_t kind;		     /* the owner's kind */
	struct cmx_hdr hdr;
	uint8_t data[]; /* args (hdr.size), payload (hdr.bulk), nrefs u64 ids */
};

struct cmx_reclog {
	struct cmx_rec *head, *tail;
	uint64_t live, dead, bytes;
	uint64_t lost;	   /* records not kept (no memory): no checkpoint */
	uint32_t next_seq; /* the sequence number after the last call applied */
};

/* A call applied with success: its request is kept when it made or
 * changes a lasting object (context, queue, buffer, program, kernel,
 * sampler, image, sub-device; builds, include files, kernel arguments). */
void cmx_record_call(struct cmx_call *c);
/* The guest released id: its records are kept only while a live
 * object's records name it. */
void cmx_record_forget(struct cmx_session *s, struct cmx_obj *o);
/* The session ends: every record goes. */
void cmx_record_free(struct cmx_session *s);
/* Marks what a checkpoint writes (needed): every live record and, for
 * what those name, the records of released objects; returns how many. */
uint64_t cmx_record_mark(struct cmx_session *s);
/* Writes the marked records, then a release for each released object
 * that was written. */
void cmx_record_write(struct cmx_session *s, struct cmx_state_writer *w);

static inline uint8_t *cmx_rec_args(struct cmx_rec *r)
{
	return r->data;
}

#endif
