// SPDX-License-Identifier: MIT
// What made each object of a session: the creation requests the daemon
// applied, kept per object so that a checkpoint can write them down.
#ifndef CMX_HOST_RECORD_H
#define CMX_HOST_RECORD_H

#include <stdint.h>

#include "wire.h"

struct cmx_call;
struct cmx_obj;
struct cmx_server;
struct cmx_session;
struct cmx_state_writer;

/* One applied request: its header (bulk 0 where the payload is not kept),
 * its encoded arguments and kept payload, and the ids it names with the
 * creation records of those that have one. */
struct cmx_rec {
	struct cmx_rec *prev, *next; /* the session's log, in applied order */
	struct cmx_rec *onext;	     /* the same object's records, oldest first */
	uint64_t owner;		     /* the object it made or changed */
	uint64_t index;		     /* its slot's value (a kernel argument's index) */
	uint64_t charge;	     /* bytes charged to the tenant for it */
	uint32_t nrefs;		     /* ids it names, after the data */
	/* A creation record: how many records name its object. A released
	 * object's records go when this is 0. */
	uint32_t named;
	uint8_t dead;	/* owner released by the guest */
	uint8_t needed; /* scratch of cmx_record_mark() */
	uint8_t kind;	/* the owner's kind */
	uint8_t made;	/* it made its owner (else it changed it) */
	uint8_t slot;	/* it set the owner's slot index (CMX_F_SLOT) */
	struct cmx_hdr hdr;
	/* args (hdr.size), payload (hdr.bulk), padding to 8, nrefs u64 ids,
	 * nrefs creation records (NULL: an object that has none) */
	uint8_t data[];
};

struct cmx_reclog {
	struct cmx_rec *head, *tail;
	uint64_t live, dead, bytes;
	uint64_t pending; /* prepared records of calls not done yet */
};

/* With --state-dir: srv's requests are kept from now on
 * (cmx_checkpoint_open() says so, so that this file asks nothing of the
 * checkpoint's). */
void cmx_record_keep(struct cmx_server *srv);
/* Before a call's handler runs, with --state-dir only: when it makes or
 * changes a lasting object (context, queue, buffer, program, kernel,
 * sampler, image; the schema's `changes` calls: builds, include files,
 * kernel arguments),
 * its request is copied and charged to the tenant's mem quota. 0, or
 * CL_OUT_OF_HOST_MEMORY (past the quota, or no memory): the call fails
 * with it. */
int cmx_record_prepare(struct cmx_call *c);
/* A sync creation that a resuming guest sent again though the daemon
 * had applied it before the checkpoint (its reply lost with the
 * connection): its object, which the restore made, has it as its kept
 * creation record, with the same sequence number and arguments. Its
 * handler answers from that object (struct cmx_call's applied). */
int cmx_record_made_again(struct cmx_call *c);
/* The handler of a call whose creation needs bytes it did not carry (a
 * program made from parts) keeps them with its prepared record as the
 * call's payload, charged as the record is: 0 (also without a record), or
 * CL_OUT_OF_HOST_MEMORY. */
int cmx_record_payload(struct cmx_call *c, const void *data, uint64_t len);
/* The call is done: with success the prepared record is kept on its
 * object; else it goes, and its charge with it. */
void cmx_record_done(struct cmx_call *c, int status);
/* The guest released o: its records are kept only while records name
 * it, and their charge goes back with them. */
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
