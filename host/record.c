// SPDX-License-Identifier: MIT
// What made each object of a session: the creation requests the daemon
// applied, kept in applied order for a checkpoint (docs/architecture.md
// "Restarting the daemon").
#include "record.h"

#include <CL/cl.h>
#include <stdlib.h>
#include <string.h>

#include "area.h"
#include "call.h"
#include "codec.h"
#include "log.h"
#include "proto.gen.h"
#include "server.h"
#include "session.h"
#include "state.h"
#include "tenant.h"

/* Released objects' records that a cycle of names keeps (a program
 * compiled with another as its header, and that one with it) are dropped,
 * all at once, when there are this many more of them than of live ones. */
#define COMPACT_SLACK 256

void cmx_record_keep(struct cmx_server *srv)
{
	srv->keep_records = 1;
}

static int kept_kind(unsigned kind)
{
	return kind == CMX_K_CONTEXT || kind == CMX_K_QUEUE || kind == CMX_K_MEM ||
	       kind == CMX_K_PROGRAM || kind == CMX_K_KERNEL || kind == CMX_K_SAMPLER;
}

/* Bytes of the request kept in r->data: a payload in the area (a
 * buffer's storage) stays there. */
static uint64_t rec_len(const struct cmx_rec *r)
{
	return r->hdr.size + ((r->hdr.flags & CMX_HDR_AREA) ? 0 : r->hdr.bulk);
}

static uint64_t *rec_refs(struct cmx_rec *r)
{
	return (uint64_t *)(r->data + ((rec_len(r) + 7) & ~7ull));
}

static struct cmx_rec **rec_named(struct cmx_rec *r)
{
	return (struct cmx_rec **)(rec_refs(r) + r->nrefs);
}

static int named(uint64_t id, uint64_t owner)
{
	/* Root devices and the platform are the daemon's, in every session. */
	return id >= CMX_FIRST_GUEST_ID && id != owner;
}

/* The ids the call names besides its owner (into refs when non-NULL). */
static uint32_t refs_of(const struct cmx_call *c, uint64_t owner, uint64_t *refs)
{
	const struct cmx_msgdesc *d = c->oi->in;
	uint32_t n = 0;

	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		const void *p = (const char *)c->in + f->offset;
		if (f->type == CMX_T_ID && named(((const struct cmx_ref *)p)->id, owner)) {
			if (refs)
				refs[n] = ((const struct cmx_ref *)p)->id;
			n++;
		} else if (f->type == CMX_T_IDS) {
			const struct cmx_refs *r = p;
			for (uint64_t k = 0; k < r->n; k++)
				if (named(r->v[k], owner)) {
					if (refs)
						refs[n] = r->v[k];
					n++;
				}
		}
	}
	return n;
}

/* Memory the daemon holds for the tenant, as its buffers' is. */
static void charge(struct cmx_session *s, int64_t n)
{
	s->bytes += (uint64_t)n;
	s->srv->bytes += (uint64_t)n;
	s->tenant->bytes += (uint64_t)n;
}

static void free_rec(struct cmx_session *s, struct cmx_rec *r);

/* A record that named n's object is gone: a released object nothing
 * names any more goes with its records. */
static void unname(struct cmx_session *s, struct cmx_rec *n)
{
	if (!n || --n->named || !n->dead)
		return;
	for (struct cmx_rec *r = n, *next; r; r = next) {
		next = r->onext;
		free_rec(s, r);
	}
}

static void unlink_rec(struct cmx_reclog *log, struct cmx_rec *r)
{
	*(r->prev ? &r->prev->next : &log->head) = r->next;
	*(r->next ? &r->next->prev : &log->tail) = r->prev;
	log->bytes -= rec_len(r);
	if (r->dead)
		log->dead--;
	else
		log->live--;
}

/* A record no one keeps (unlinked from its object's list by the caller,
 * or going with the whole list): its charge back, its names dropped. */
static void free_rec(struct cmx_session *s, struct cmx_rec *r)
{
	if (r->prev || r->next || s->log.head == r)
		unlink_rec(&s->log, r);
	charge(s, -(int64_t)r->charge);
	for (uint32_t k = 0; k < r->nrefs; k++)
		unname(s, rec_named(r)[k]);
	free(r);
}

/* The object a call makes (its newid of a kept kind) or changes (its
 * `changes` input, schema/README.md), and its kind; 0 when neither. A
 * change keeps the call's payload (include files) and its `slot`. */
static uint64_t owner_of(const struct cmx_call *c, unsigned *kind, uint64_t *index, uint64_t *bulk,
			 int *made, int *slot)
{
	const struct cmx_msgdesc *d = c->oi->in;
	uint64_t owner = 0;

	*index = *bulk = 0;
	*made = *slot = 0;
	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		const void *p = (const char *)c->in + f->offset;
		if (f->type == CMX_T_NEWID && kept_kind(f->kind)) {
			*kind = f->kind;
			*made = 1;
			return ((const struct cmx_ref *)p)->id;
		}
		if (f->flags & CMX_F_CHANGES) {
			*kind = f->kind;
			owner = ((const struct cmx_ref *)p)->id;
		} else if (f->flags & CMX_F_SLOT) {
			*index = *(const uint64_t *)p;
			*slot = 1;
		}
	}
	/* The handler copies the tree and leaves the payload. */
	if (owner && c->bulk)
		*bulk = c->bulk_len;
	return owner;
}

/* A sync call that a resuming guest sent again, though its daemon had
 * applied it before the checkpoint (its reply lost with the connection):
 * the object's kept records hold it, with the same sequence number and
 * arguments. Not while the restore itself replays them. */
static int resent(const struct cmx_call *c, uint64_t owner, unsigned kind)
{
	struct cmx_obj *o;

	if (!c->s->from_state || c->s->restore || !c->sync || !c->seq)
		return 0;
	o = cmx_session_obj(c->s, owner, kind);
	for (struct cmx_rec *r = o ? o->recs : NULL; r; r = r->onext)
		if (r->hdr.op == c->op && r->hdr.seq == c->seq && r->hdr.size == c->args_len &&
		    !memcmp(r->data, c->args, c->args_len))
			return 1;
	return 0;
}

int cmx_record_made_again(struct cmx_call *c)
{
	uint64_t owner, index, bulk;
	unsigned kind = 0;
	int made, slot;

	/* Only in a restored session, after its restore: cheap for others. */
	if (!c->sync || !c->s->from_state || c->s->restore)
		return 0;
	owner = owner_of(c, &kind, &index, &bulk, &made, &slot);
	return owner && made && resent(c, owner, kind);
}

int cmx_record_prepare(struct cmx_call *c)
{
	struct cmx_session *s = c->s;
	uint64_t owner, index, bulk, size;
	unsigned kind = 0;
	uint32_t nrefs;
	struct cmx_rec *r;
	int made, slot;

	/* Kept for a checkpoint, which needs a state directory. */
	if (!s->srv->keep_records)
		return 0;
	owner = owner_of(c, &kind, &index, &bulk, &made, &slot);
	/* A creation sent again (cmx_record_made_again()) makes nothing. */
	if (!owner || c->applied)
		return 0;
	if (!made && resent(c, owner, kind)) {
		c->applied = 1;
		return 0;
	}
	nrefs = refs_of(c, owner, NULL);
	size = sizeof(*r) + ((c->args_len + bulk + 7) & ~7ull) + nrefs * 16ull;
	/* The daemon's host memory, not the device's: the error every call
	 * may return for it, as staged read data past the quota is. */
	if (cmx_tenant_may_alloc(s->tenant, size)) {
		cmx_dbg("session %llu: %s not kept: %llu bytes past the mem quota of tenant %s",
			(unsigned long long)s->id, c->oi->in->name, (unsigned long long)size,
			s->tenant->name);
		return CL_OUT_OF_HOST_MEMORY;
	}
	r = malloc(size);
	if (!r)
		return CL_OUT_OF_HOST_MEMORY;
	memset(r, 0, sizeof(*r));
	r->owner = owner;
	r->index = index;
	r->kind = (uint8_t)kind;
	r->made = (uint8_t)made;
	r->slot = (uint8_t)slot;
	r->nrefs = nrefs;
	r->charge = size;
	/* A buffer's initial contents are not kept: a checkpoint writes what
	 * it holds then, and its creation without them zeroes it. */
	r->hdr = (struct cmx_hdr){.size = c->args_len,
				  .op = c->op,
				  .flags = c->sync ? CMX_HDR_SYNC : 0,
				  .seq = c->seq,
				  .bulk = bulk};
	/* Storage in the shared area (a buffer living there): where it
	 * lies, for a restore to make it there again. Another creation's
	 * payload sent through the area is initial contents, not kept. */
	if (made && c->op == CMX_OP_CreateBufferArea && c->bulk &&
	    cmx_area_holds(s->area, c->bulk, c->bulk_len)) {
		cmx_area_mark(s->area, &r->hdr, c->bulk);
		r->hdr.bulk = c->bulk_len;
	}
	memcpy(r->data, c->args, c->args_len);
	if (bulk)
		memcpy(r->data + c->args_len, c->bulk, bulk);
	refs_of(c, owner, rec_refs(r));
	/* What it names stays while it does: resolved, so live now. */
	for (uint32_t k = 0; k < nrefs; k++) {
		struct cmx_obj *o = cmx_objtab_get(&s->objs, rec_refs(r)[k]);
		struct cmx_rec *n = o ? o->recs : NULL;
		rec_named(r)[k] = n;
		if (n)
			n->named++;
	}
	charge(s, (int64_t)size);
	s->log.pending++;
	c->rec = r;
	return 0;
}

int cmx_record_payload(struct cmx_call *c, const void *data, uint64_t len)
{
	struct cmx_rec *r = c->rec, *n;
	uint64_t was, size;

	if (!r || !len || rec_len(r) != r->hdr.size)
		return 0;
	was = sizeof(*r) + ((rec_len(r) + 7) & ~7ull) + r->nrefs * 16ull;
	size = sizeof(*r) + ((r->hdr.size + len + 7) & ~7ull) + r->nrefs * 16ull;
	if (cmx_tenant_may_alloc(c->s->tenant, size - was)) {
		cmx_dbg("session %llu: %s not kept: %llu bytes past the mem quota of tenant %s",
			(unsigned long long)c->s->id, c->oi->in->name, (unsigned long long)size,
			c->s->tenant->name);
		return CL_OUT_OF_HOST_MEMORY;
	}
	n = malloc(size);
	if (!n)
		return CL_OUT_OF_HOST_MEMORY;
	/* Pending: nothing points at r but the call (the records it names
	 * are counted, not linked back). */
	memcpy(n, r, sizeof(*r) + r->hdr.size);
	memcpy(n->data + r->hdr.size, data, len);
	n->hdr.bulk = len;
	memcpy(rec_refs(n), rec_refs(r), r->nrefs * 16ull);
	n->charge = r->charge + (size - was);
	charge(c->s, (int64_t)(size - was));
	free(r);
	c->rec = n;
	return 0;
}

void cmx_record_done(struct cmx_call *c, int status)
{
	struct cmx_session *s = c->s;
	struct cmx_reclog *log = &s->log;
	struct cmx_rec *r = c->rec, **pp;
	struct cmx_obj *o;

	c->rec = NULL;
	if (!r)
		return;
	log->pending--;
	if (s->closed) {
		/* What it named went with the session's records. */
		charge(s, -(int64_t)r->charge);
		free(r);
		return;
	}
	o = status == CL_SUCCESS ? cmx_session_obj(s, r->owner, r->kind) : NULL;
	/* A change of an object with no creation kept is no use alone. */
	if (!o || o->err || (!r->made && !o->recs)) {
		free_rec(s, r);
		return;
	}
	pp = &o->recs;
	if (r->slot) {
		/* Only a slot's last value matters. */
		for (; *pp; pp = &(*pp)->onext)
			if ((*pp)->slot && (*pp)->hdr.op == r->hdr.op && (*pp)->index == r->index) {
				struct cmx_rec *old = *pp;
				*pp = old->onext;
				free_rec(s, old);
				break;
			}
		pp = &o->recs;
	}
	while (*pp)
		pp = &(*pp)->onext;
	*pp = r;
	r->prev = log->tail;
	*(log->tail ? &log->tail->next : &log->head) = r;
	log->tail = r;
	log->live++;
	log->bytes += rec_len(r);
}

static void compact(struct cmx_session *s)
{
	struct cmx_reclog *log = &s->log;

	cmx_record_mark(s);
	/* Names first, then the records: a cycle's members name each other,
	 * and what is kept counts only the names that stay. */
	for (struct cmx_rec *r = log->head; r; r = r->next)
		for (uint32_t k = 0; !r->needed && k < r->nrefs; k++) {
			struct cmx_rec *n = rec_named(r)[k];
			if (n && n->needed)
				n->named--;
			rec_named(r)[k] = NULL;
		}
	for (struct cmx_rec *r = log->head, *next; r; r = next) {
		next = r->next;
		if (!r->needed) {
			unlink_rec(log, r);
			r->nrefs = 0;
			charge(s, -(int64_t)r->charge);
			free(r);
		}
	}
}

void cmx_record_forget(struct cmx_session *s, struct cmx_obj *o)
{
	struct cmx_reclog *log = &s->log;
	struct cmx_rec *first = o->recs;

	for (struct cmx_rec *r = first; r; r = r->onext)
		if (!r->dead) {
			r->dead = 1;
			log->live--;
			log->dead++;
		}
	o->recs = NULL;
	if (first && !first->named) {
		/* Nothing names it: its records go now. */
		first->named = 1;
		unname(s, first);
	}
	/* Not while a call's record names records without being in the
	 * log that marks them. */
	if (log->dead > log->live + COMPACT_SLACK && !log->pending)
		compact(s);
}

void cmx_record_free(struct cmx_session *s)
{
	struct cmx_reclog *log = &s->log;

	for (struct cmx_rec *r = log->head, *next; r; r = next) {
		next = r->next;
		charge(s, -(int64_t)r->charge);
		free(r);
	}
	memset(log, 0, sizeof(*log));
}

static int by_owner(const void *a, const void *b)
{
	const struct cmx_rec *x = *(struct cmx_rec *const *)a, *y = *(struct cmx_rec *const *)b;

	return x->owner < y->owner ? -1 : x->owner > y->owner;
}

/* Marks every record of the released object id needed: 1 when one was
 * not before. */
static int need(struct cmx_rec **dead, uint64_t n, uint64_t id)
{
	uint64_t lo = 0, hi = n;
	int changed = 0;

	while (lo < hi) {
		uint64_t mid = lo + (hi - lo) / 2;
		if (dead[mid]->owner < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < n && dead[lo]->owner == id; lo++)
		if (!dead[lo]->needed)
			changed = dead[lo]->needed = 1;
	return changed;
}

uint64_t cmx_record_mark(struct cmx_session *s)
{
	struct cmx_reclog *log = &s->log;
	struct cmx_rec **dead = NULL;
	uint64_t n = 0, count = 0;
	int changed = 1;

	if (log->dead)
		dead = malloc(log->dead * sizeof(*dead));
	for (struct cmx_rec *r = log->head; r; r = r->next) {
		r->needed = !r->dead || !dead;
		if (r->dead && dead)
			dead[n++] = r;
	}
	if (dead) {
		qsort(dead, n, sizeof(*dead), by_owner);
		/* What a needed record names is needed, until nothing
		 * changes: a released kernel's later argument may name a
		 * released buffer. */
		while (changed) {
			changed = 0;
			for (struct cmx_rec *r = log->tail; r; r = r->prev)
				for (uint32_t k = 0; r->needed && k < r->nrefs; k++)
					changed |= need(dead, n, rec_refs(r)[k]);
		}
		free(dead);
	}
	for (struct cmx_rec *r = log->head; r; r = r->next)
		count += r->needed;
	return count;
}

static const struct {
	uint16_t op;
	const struct cmx_msgdesc *desc;
} releases[CMX_K_COUNT] = {
    [CMX_K_CONTEXT] = {CMX_OP_ReleaseContext, &cmx_desc_ReleaseContext_in},
    [CMX_K_QUEUE] = {CMX_OP_ReleaseQueue, &cmx_desc_ReleaseQueue_in},
    [CMX_K_MEM] = {CMX_OP_ReleaseMem, &cmx_desc_ReleaseMem_in},
    [CMX_K_PROGRAM] = {CMX_OP_ReleaseProgram, &cmx_desc_ReleaseProgram_in},
    [CMX_K_KERNEL] = {CMX_OP_ReleaseKernel, &cmx_desc_ReleaseKernel_in},
    [CMX_K_SAMPLER] = {CMX_OP_ReleaseSampler, &cmx_desc_ReleaseSampler_in},
};

void cmx_record_write(struct cmx_session *s, struct cmx_state_writer *w)
{
	for (struct cmx_rec *r = s->log.head; r; r = r->next) {
		struct iovec iov[2] = {{&r->hdr, sizeof(r->hdr)}, {r->data, rec_len(r)}};
		if (r->needed)
			cmx_state_put(w, CMX_STATE_CALL, iov, 2);
	}
	/* A released object written for what names it is released again
	 * once those exist: natively they hold it, as they did. Each
	 * Release*_in is one id. */
	for (struct cmx_rec *r = s->log.head; r; r = r->next) {
		struct cmx_ref ref = {.id = r->owner};
		uint8_t args[64];
		struct cmx_hdr h = {.op = releases[r->kind].op};
		if (!r->needed || !r->dead || !releases[r->kind].desc)
			continue;
		/* Once, after its creation's record (the others change it). */
		if (!r->made)
			continue;
		h.size = (uint32_t)cmx_codec_size(releases[r->kind].desc, &ref);
		if (h.size > sizeof(args))
			continue;
		cmx_codec_encode(releases[r->kind].desc, &ref, args);
		struct iovec iov[2] = {{&h, sizeof(h)}, {args, h.size}};
		cmx_state_put(w, CMX_STATE_CALL, iov, 2);
	}
}
