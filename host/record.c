// SPDX-License-Identifier: MIT
// What made each object of a session: the creation requests the daemon
// applied, kept in applied order for a checkpoint (docs/architecture.md
// "Restarting the daemon").
#include "record.h"

#include <stdlib.h>
#include <string.h>

#include "call.h"
#include "codec.h"
#include "proto.gen.h"
#include "session.h"
#include "state.h"

/* Released objects' records are dropped, all at once, when there are this
 * many more of them than of live ones. */
#define COMPACT_SLACK 256

static int kept_kind(unsigned kind)
{
	return kind == CMX_K_CONTEXT || kind == CMX_K_QUEUE || kind == CMX_K_MEM ||
	       kind == CMX_K_PROGRAM || kind == CMX_K_KERNEL || kind == CMX_K_SAMPLER;
}

static uint64_t *rec_refs(struct cmx_rec *r)
{
	return (uint64_t *)(r->data + ((r->hdr.size + r->hdr.bulk + 7) & ~7ull));
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

static void unlink_rec(struct cmx_reclog *log, struct cmx_rec *r)
{
	*(r->prev ? &r->prev->next : &log->head) = r->next;
	*(r->next ? &r->next->prev : &log->tail) = r->prev;
	log->bytes -= r->hdr.size + r->hdr.bulk;
	if (r->dead)
		log->dead--;
	else
		log->live--;
}

void cmx_record_call(struct cmx_call *c)
{
	struct cmx_session *s = c->s;
	struct cmx_reclog *log = &s->log;
	const struct cmx_msgdesc *d = c->oi->in;
	uint64_t owner = 0, index = 0, bulk = 0;
	unsigned kind = 0;
	struct cmx_obj *o;
	struct cmx_rec *r;
	uint32_t nrefs;

	log->next_seq = c->seq + 1;
	for (unsigned i = 0; i < d->nfields && !owner; i++)
		if (d->fields[i].type == CMX_T_NEWID && kept_kind(d->fields[i].kind)) {
			owner =
			    ((const struct cmx_ref *)((const char *)c->in + d->fields[i].offset))
				->id;
			kind = d->fields[i].kind;
		}
	switch (owner ? 0 : c->op) {
	case 0:
		break;
	case CMX_OP_BuildProgram:
		owner = ((struct cmx_BuildProgram_in *)c->in)->program.id;
		kind = CMX_K_PROGRAM;
		break;
	case CMX_OP_CompileProgram:
		owner = ((struct cmx_CompileProgram_in *)c->in)->program.id;
		kind = CMX_K_PROGRAM;
		break;
	case CMX_OP_IncludeFiles:
		/* The handler copied the tree and left the payload. */
		owner = ((struct cmx_IncludeFiles_in *)c->in)->program.id;
		kind = CMX_K_PROGRAM;
		bulk = c->bulk ? c->bulk_len : 0;
		break;
	case CMX_OP_SetKernelArg:
		owner = ((struct cmx_SetKernelArg_in *)c->in)->kernel.id;
		index = ((struct cmx_SetKernelArg_in *)c->in)->index;
		kind = CMX_K_KERNEL;
		break;
	default:
		return;
	}
	o = owner ? cmx_session_obj(s, owner, kind) : NULL;
	if (!o || o->err)
		return;
	nrefs = refs_of(c, owner, NULL);
	r = malloc(sizeof(*r) + ((c->args_len + bulk + 7) & ~7ull) + nrefs * 8ull);
	if (!r) {
		/* A checkpoint of this session would miss it: it says so. */
		log->lost++;
		return;
	}
	memset(r, 0, sizeof(*r));
	r->owner = owner;
	r->index = index;
	r->kind = (uint8_t)kind;
	r->nrefs = nrefs;
	/* A buffer's initial contents are not kept: a checkpoint writes what
	 * it holds then, and its creation without them zeroes it. */
	r->hdr = (struct cmx_hdr){.size = c->args_len,
				  .op = c->op,
				  .flags = c->sync ? CMX_HDR_SYNC : 0,
				  .seq = c->seq,
				  .bulk = bulk};
	memcpy(r->data, c->args, c->args_len);
	if (bulk)
		memcpy(r->data + c->args_len, c->bulk, bulk);
	refs_of(c, owner, rec_refs(r));
	if (c->op == CMX_OP_SetKernelArg) {
		/* Only an argument's last value matters. */
		for (struct cmx_rec **pp = &o->recs; *pp; pp = &(*pp)->onext)
			if ((*pp)->hdr.op == CMX_OP_SetKernelArg && (*pp)->index == index) {
				struct cmx_rec *old = *pp;
				*pp = old->onext;
				unlink_rec(log, old);
				free(old);
				break;
			}
	}
	r->onext = o->recs;
	o->recs = r;
	r->prev = log->tail;
	*(log->tail ? &log->tail->next : &log->head) = r;
	log->tail = r;
	log->live++;
	log->bytes += c->args_len + bulk;
}

static void compact(struct cmx_session *s)
{
	struct cmx_reclog *log = &s->log;

	cmx_record_mark(s);
	for (struct cmx_rec *r = log->head, *next; r; r = next) {
		next = r->next;
		if (!r->needed) {
			unlink_rec(log, r);
			free(r);
		}
	}
}

void cmx_record_forget(struct cmx_session *s, struct cmx_obj *o)
{
	struct cmx_reclog *log = &s->log;

	for (struct cmx_rec *r = o->recs; r; r = r->onext)
		if (!r->dead) {
			r->dead = 1;
			log->live--;
			log->dead++;
		}
	o->recs = NULL;
	if (log->dead > log->live + COMPACT_SLACK)
		compact(s);
}

void cmx_record_free(struct cmx_session *s)
{
	struct cmx_reclog *log = &s->log;

	for (struct cmx_rec *r = log->head, *next; r; r = next) {
		next = r->next;
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
		struct iovec iov[2] = {{&r->hdr, sizeof(r->hdr)},
				       {r->data, r->hdr.size + r->hdr.bulk}};
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
		if (r->hdr.op == CMX_OP_BuildProgram || r->hdr.op == CMX_OP_CompileProgram ||
		    r->hdr.op == CMX_OP_IncludeFiles || r->hdr.op == CMX_OP_SetKernelArg)
			continue;
		h.size = (uint32_t)cmx_codec_size(releases[r->kind].desc, &ref);
		if (h.size > sizeof(args))
			continue;
		cmx_codec_encode(releases[r->kind].desc, &ref, args);
		struct iovec iov[2] = {{&h, sizeof(h)}, {args, h.size}};
		cmx_state_put(w, CMX_STATE_CALL, iov, 2);
	}
}
