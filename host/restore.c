// SPDX-License-Identifier: MIT
// Restores: the sessions of this process's tenants read back from the
// state directory, each file's requests replayed through the same decoder
// and handlers as a guest's, then its buffers' and images' bytes written
// back.
#define _GNU_SOURCE
#include "restore.h"

#include <CL/cl.h>
#include <liburing.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "area.h"
#include "binkeep.h"
#include "call.h"
#include "dispatch.h"
#include "eventstate.h"
#include "checkpoint.h"
#include "exec.h"
#include "fence.h"
#include "codec.h"
#include "frame.h"
#include "log.h"
#include "proto.gen.h"
#include "loop.h"
#include "release.h"
#include "server.h"
#include "session.h"
#include "staging.h"
#include "state.h"
#include "tenant.h"

/* A buffer whose every byte the file holds, in CONTENTS records one after
 * another from offset 0, or an image whose every packed byte it holds in
 * IMAGE records so: made without its zero fill, since the restore writes
 * it whole before a guest can reach it. */
struct fresh {
	uint64_t id;
	uint32_t type;	  /* CMX_STATE_CONTENTS or CMX_STATE_IMAGE */
	uint64_t bytes;	  /* the file's contiguous bytes of it */
	uint64_t written; /* written into the buffer made for it */
	void *h;	  /* that buffer (NULL: none made without its fill) */
	int broken;	  /* its pieces are not one run from 0: filled as usual */
};

struct cmx_restore {
	char name[256];
	const void *map;
	size_t len;
	struct cmx_state_reader r;
	uint64_t requests, events, bytes, images, t0;
	int in_dispatch;     /* a call of it is being dispatched */
	int sync_done;	     /* the call just dispatched finished inside it */
	int status;	     /* its status */
	struct fresh *fresh; /* by id */
	size_t nfresh;
	int counted;	  /* one of cmx_restore_all()'s files (struct cmx_restores) */
	uint64_t call_t0; /* the request being replayed: when it went in */
	uint16_t call_op;
	/* Its payload, staged by the daemon and charged to the tenant until
	 * its call ends (staged_charge()). */
	uint64_t staged;
};

/* Counts ns to op's kind. A kind that finds no room takes the place of
 * the cheapest, if it cost more: the costliest stay. */
static void spent_add(struct cmx_server *srv, uint16_t op, uint64_t ns)
{
	struct cmx_restore_op_time *spent = srv->restores.spent;
	struct cmx_restore_op_time *least = &spent[0];

	for (unsigned i = 0; i < CMX_RESTORE_SPENT; i++) {
		struct cmx_restore_op_time *t = &spent[i];
		if (t->n && t->op == op) {
			t->n++;
			t->ns += ns;
			return;
		}
		if (t->ns < least->ns)
			least = t;
	}
	if (!least->n || least->ns < ns)
		*least = (struct cmx_restore_op_time){.op = op, .n = 1, .ns = ns};
}

static int costlier(const void *a, const void *b)
{
	const struct cmx_restore_op_time *x = a, *y = b;

	return (x->ns < y->ns) - (x->ns > y->ns);
}

static const char *op_name(uint16_t op)
{
	const struct cmx_opinfo *oi = op ? cmx_op_info(op) : NULL;

	return !op ? "bytes written" : oi && oi->in ? oi->in->name : "?";
}

/* A restored session whose guest has not said Hello by then is closed:
 * what it holds is charged to its tenant. */
#define RESUME_WAIT_S 600

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The line for cmx_restore_all()'s files, once the last is done. */
static void all_done(struct cmx_server *srv)
{
	struct cmx_restores *all = &srv->restores;
	char line[512];
	size_t used = 0;

	if (all->listing || all->left || !(all->restored + all->failed))
		return;
	/* The costliest kinds first. */
	qsort(all->spent, CMX_RESTORE_SPENT, sizeof(all->spent[0]), costlier);
	for (unsigned k = 0; k < 4 && all->spent[k].n && used < sizeof(line); k++)
		used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s %.1f ms (%u)",
					 k ? ", " : "", op_name(all->spent[k].op),
					 (double)all->spent[k].ns / 1e6, all->spent[k].n);
	memset(all->spent, 0, sizeof(all->spent));
	if (used)
		cmx_info("restore: the longest requests, summed over the sessions: %s", line);
	cmx_info("restore: %u session%s restored (%" PRIu64 " image bytes, %" PRIu64
		 " buffer bytes) in %.1f ms, %u failed",
		 all->restored, all->restored == 1 ? "" : "s", all->images, all->bytes,
		 (double)(now_ns() - all->t0) / 1e6, all->failed);
	all->restored = all->failed = 0;
}

/*
 * A replayed request's payload is staged as a guest's is, and held until
 * its call ends, which for a WriteBuffer or WriteImage is after the
 * native transfer: one at a time per session, up to a piece (64 MiB) of
 * an object's bytes or a request's whole payload, while every session of
 * the tenant is restored side by side. So it is the tenant's, held for a
 * transfer as read data staged for its guest is: charged to its output
 * (not competing with the records the replay keeps again; while it is
 * held, the tenant's own new buffers and staged reads count it), and
 * given back when the call ends or the restore does (n < 0).
 */
static void staged_charge(struct cmx_session *s, int64_t n)
{
	s->restore->staged += (uint64_t)n;
	s->tenant->output += (uint64_t)n;
}

/* The file is used up either way: a whole restore removes it, a failed
 * one keeps it as NAME.bad for the administrator, never tried again. */
static void finish(struct cmx_session *s, int e, const char *why)
{
	struct cmx_restore *rs = s->restore;
	struct cmx_server *srv = s->srv; /* s may be gone once closed */
	int dfd = cmx_checkpoint_dirfd(srv);

	staged_charge(s, -(int64_t)rs->staged);
	s->restore = NULL;
	cmx_state_unmap(rs->map, rs->len);
	if (!e) {
		/* A checkpoint that kept the file for it is owed the session,
		 * written now, before the file goes. */
		struct cmx_checkpoint_stats st = {0};
		char name[CMX_STATE_NAME_MAX];
		int owed = s->checkpoint_owed;
		s->checkpoint_owed = 0;
		if (owed && cmx_checkpoint_session(s, name, sizeof(name), &st))
			cmx_warn("session %" PRIu64 ": not written after its restore; %s stays",
				 s->id, rs->name);
		else
			(void)unlinkat(dfd, rs->name, 0);
	}
	if (!e) {
		cmx_info("session %" PRIu64 " (tenant %s): restored from %s: %" PRIu64
			 " requests, %" PRIu64 " events, %" PRIu64 " image bytes, %" PRIu64
			 " buffer bytes in %.1f ms; waiting for its guest",
			 s->id, s->tenant->name, rs->name, rs->requests, rs->events, rs->images,
			 rs->bytes, (double)(now_ns() - rs->t0) / 1e6);
	} else {
		char bad[272];
		snprintf(bad, sizeof(bad), "%s.bad", rs->name);
		(void)renameat(dfd, rs->name, dfd, bad);
		cmx_err("session %" PRIu64 " (tenant %s): not restored from %s: %s; kept as %s",
			s->id, s->tenant->name, rs->name, why, bad);
		cmx_release_session(s);
	}
	if (rs->counted) {
		struct cmx_restores *all = &srv->restores;
		all->left--;
		all->failed += e != 0;
		all->restored += e == 0;
		all->bytes += e ? 0 : rs->bytes;
		all->images += e ? 0 : rs->images;
	}
	free(rs->fresh);
	free(rs);
	all_done(srv);
	/* The binaries its builds kept serve only restores running now. */
	for (struct cmx_session *o = srv->sessions; o; o = o->next)
		if (o->restore)
			return;
	cmx_binkeep_clear();
	cmx_binkeep_charge(&srv->tenants);
}

static int by_id(const void *a, const void *b)
{
	const struct fresh *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* The buffers and images the file holds whole (struct fresh), from its
 * CONTENTS and IMAGE records; the file was checked by cmx_state_open().
 * 0 or -ENOMEM. */
static int scan(struct cmx_restore *rs)
{
	struct cmx_state_reader r = rs->r;
	struct cmx_state_rec rec;
	struct fresh *last = NULL;
	size_t cap = 0;

	while (cmx_state_next(&r, &rec) == 1) {
		if (rec.type != CMX_STATE_CONTENTS && rec.type != CMX_STATE_IMAGE)
			continue;
		if (!last || last->id != rec.id) {
			if (rs->nfresh == cap) {
				size_t n = cap ? cap * 2 : 16;
				struct fresh *v = realloc(rs->fresh, n * sizeof(*v));
				if (!v)
					return -ENOMEM;
				rs->fresh = v;
				cap = n;
			}
			last = &rs->fresh[rs->nfresh++];
			*last = (struct fresh){.id = rec.id, .type = rec.type};
		}
		/* A checkpoint writes a buffer's or an image's pieces in
		 * order, of one kind: anything else leaves it to its zero
		 * fill. */
		if (rec.offset != last->bytes || rec.type != last->type)
			last->broken = 1;
		last->bytes += rec.len - (rec.type == CMX_STATE_IMAGE ? sizeof(rec.img) : 16);
	}
	if (rs->nfresh)
		qsort(rs->fresh, rs->nfresh, sizeof(*rs->fresh), by_id);
	/* An id with two runs is one no fill is skipped for. */
	for (size_t i = 1; i < rs->nfresh; i++)
		if (rs->fresh[i].id == rs->fresh[i - 1].id)
			rs->fresh[i].broken = rs->fresh[i - 1].broken = 1;
	return 0;
}

static struct fresh *fresh_find(struct cmx_restore *rs, uint64_t id)
{
	struct fresh key = {.id = id};

	return rs && rs->nfresh ? bsearch(&key, rs->fresh, rs->nfresh, sizeof(key), by_id) : NULL;
}

/* While s is being restored: whether its file holds every byte of buffer
 * id, size bytes, not yet made; such a buffer needs no zero fill, and
 * unfilled() names the native buffer made without one (its restore fails
 * unless it gets them all). srv->restore_covers, srv->restore_unfilled. */
static int covers(struct cmx_session *s, uint64_t id, uint64_t size)
{
	struct fresh *f = fresh_find(s->restore, id);

	return f && !f->broken && !f->h && f->bytes == size;
}

static void unfilled(struct cmx_session *s, uint64_t id, void *mem)
{
	struct fresh *f = fresh_find(s->restore, id);

	if (f)
		f->h = mem;
}

/* Every buffer made without its fill got every byte: else the restore
 * fails, before a guest could read what the driver's memory held. */
static int fresh_whole(struct cmx_restore *rs)
{
	for (size_t i = 0; i < rs->nfresh; i++)
		if (rs->fresh[i].h && rs->fresh[i].written != rs->fresh[i].bytes)
			return 0;
	return 1;
}

/* A buffer's bytes straight from the mapped file into the buffer, on a
 * queue of its context: one copy, no staging. */
static int contents_direct(struct cmx_session *s, struct cmx_obj *o,
			   const struct cmx_state_rec *rec)
{
	cl_command_queue q;
	int made;
	cl_int e;

	q = cmx_checkpoint_queue(s, o->ctx, &made);
	if (!q)
		return -ENODEV;
	e = clEnqueueWriteBuffer(q, o->h, CL_TRUE, rec->offset, rec->len - 16, rec->data + 16, 0,
				 NULL, NULL);
	if (made)
		clReleaseCommandQueue(q);
	return e ? -EIO : 0;
}

/* One request through the dispatcher, which checks ids, quotas and
 * values as for a guest: 0 when it is done with success, 1 when it was
 * deferred (replayed() goes on), -1 when the restore ended. */
static int replay(struct cmx_session *s, const struct cmx_hdr *h, const uint8_t *args,
		  const uint8_t *payload)
{
	struct cmx_restore *rs = s->restore;
	uint8_t *bulk = NULL;
	char why[96];
	int e;

	if (h->flags & CMX_HDR_AREA) {
		/* A buffer's storage in the area: taken as conn.c takes a
		 * guest's block, within the same bounds. */
		bulk = s->area ? cmx_area_take(s->area, h->area_off, h->bulk) : NULL;
		if (!bulk) {
			finish(s, -EBADMSG, "a block outside the area");
			return -1;
		}
	} else if (h->bulk) {
		/* Charged, never refused: the bytes are the session's own,
		 * which its buffers' charge covered before the checkpoint,
		 * and a tenant at its quota then must get them back. */
		bulk = cmx_staging_get(&s->srv->staging, h->bulk);
		if (!bulk) {
			finish(s, -ENOMEM, "out of memory");
			return -1;
		}
		memcpy(bulk, payload, h->bulk);
		staged_charge(s, (int64_t)h->bulk);
	}
	rs->sync_done = 0;
	rs->status = 0;
	rs->requests++;
	rs->in_dispatch = 1;
	rs->call_op = h->op;
	rs->call_t0 = now_ns();
	e = cmx_dispatch_call(s, h, args, bulk);
	rs->in_dispatch = 0;
	if (!e && rs->sync_done)
		spent_add(s->srv, rs->call_op, now_ns() - rs->call_t0);
	if (e) {
		finish(s, e, "a request the decoder refused");
		return -1;
	}
	if (!rs->sync_done)
		return 1;
	if (rs->status == CL_SUCCESS)
		return 0;
	snprintf(why, sizeof(why), "request %" PRIu64 " (op %#x) failed: %d", rs->requests, h->op,
		 rs->status);
	finish(s, -EIO, why);
	return -1;
}

/* A buffer's bytes, written back where the guest left them. Into a
 * buffer made without its fill, straight from the file; else as a
 * blocking WriteBuffer on a queue of its context, so that it is ordered
 * after the zero fill of the buffer's creation (host/zero.c), as a
 * guest's is. */
static int contents(struct cmx_session *s, const struct cmx_state_rec *rec)
{
	struct cmx_obj *o = cmx_session_obj(s, rec->id, CMX_K_MEM);
	struct fresh *f;
	uint64_t n = rec->len - 16, qid;
	struct cmx_WriteBuffer_in in = {0};
	struct cmx_hdr h = {.op = CMX_OP_WriteBuffer, .flags = CMX_HDR_SYNC, .bulk = n};
	uint8_t args[128];
	int e;

	if (!o || o->err || !o->h || cmx_image_type(o) || rec->offset > o->size ||
	    n > o->size - rec->offset) {
		finish(s, -EBADMSG, "contents of no such buffer");
		return -1;
	}
	s->restore->bytes += n;
	f = fresh_find(s->restore, rec->id);
	qid = cmx_checkpoint_queue_id(s, o->ctx);
	if ((f && f->h == o->h) || !qid) {
		uint64_t t0 = now_ns();
		e = contents_direct(s, o, rec);
		spent_add(s->srv, 0, now_ns() - t0);
		if (e)
			finish(s, e, "a write failed");
		else if (f && f->h == o->h)
			f->written += n;
		return e ? -1 : 0;
	}
	in.queue.id = qid;
	in.mem.id = rec->id;
	in.offset = rec->offset;
	in.size = n;
	h.size = (uint32_t)cmx_codec_size(&cmx_desc_WriteBuffer_in, &in);
	if (h.size > sizeof(args)) {
		finish(s, -EINVAL, "no room");
		return -1;
	}
	cmx_codec_encode(&cmx_desc_WriteBuffer_in, &in, args);
	return replay(s, &h, args, rec->data + 16);
}

/* An image's box straight from the mapped file, its rows packed. */
static int image_direct(struct cmx_session *s, struct cmx_obj *o, const struct cmx_state_rec *rec)
{
	const struct cmx_state_image *im = &rec->img;
	size_t origin[3], region[3];
	cl_command_queue q;
	int made;
	cl_int e;

	for (int i = 0; i < 3; i++) {
		origin[i] = im->origin[i];
		region[i] = im->region[i];
	}
	q = cmx_checkpoint_queue(s, o->ctx, &made);
	if (!q)
		return -ENODEV;
	e = clEnqueueWriteImage(q, o->h, CL_TRUE, origin, region, 0, 0, rec->data + sizeof(*im), 0,
				NULL, NULL);
	if (made)
		clReleaseCommandQueue(q);
	return e ? -EIO : 0;
}

/* An image's bytes, as contents() writes a buffer's: straight from the
 * file into an image made without its fill, else as a blocking
 * WriteImage, ordered after its zero fill, whose handler checks the box
 * against the image as for a guest. Only into an image of the shape the
 * checkpoint read; an image over a buffer has none of its own (its
 * bytes come with the buffer's). */
static int image(struct cmx_session *s, const struct cmx_state_rec *rec)
{
	const struct cmx_state_image *im = &rec->img;
	struct cmx_obj *o = cmx_session_obj(s, rec->id, CMX_K_MEM);
	uint64_t n = rec->len - sizeof(*im), ext[3], elem, qid;
	struct cmx_WriteImage_in in = {0};
	struct cmx_hdr h = {.op = CMX_OP_WriteImage, .flags = CMX_HDR_SYNC, .bulk = n};
	uint8_t args[256];
	struct fresh *f;
	int e;

	if (!o || o->err || !o->h || !cmx_image_shape(o, ext, &elem) || elem != im->elem ||
	    memcmp(ext, im->extent, sizeof(ext))) {
		finish(s, -EBADMSG, "contents of no such image");
		return -1;
	}
	s->restore->images += n;
	f = fresh_find(s->restore, rec->id);
	qid = cmx_checkpoint_queue_id(s, o->ctx);
	if ((f && f->h == o->h) || !qid) {
		e = image_direct(s, o, rec);
		if (e)
			finish(s, e, "a write failed");
		else if (f && f->h == o->h)
			f->written += n;
		return e ? -1 : 0;
	}
	in.queue.id = qid;
	in.mem.id = rec->id;
	in.origin = (struct cmx_u64s){im->origin, 3};
	in.region = (struct cmx_u64s){im->region, 3};
	h.size = (uint32_t)cmx_codec_size(&cmx_desc_WriteImage_in, &in);
	if (h.size > sizeof(args)) {
		finish(s, -EINVAL, "no room");
		return -1;
	}
	cmx_codec_encode(&cmx_desc_WriteImage_in, &in, args);
	return replay(s, &h, args, rec->data + sizeof(*im));
}

/* The session's shared area, made again with its old layout; its memfd
 * waits for the resuming guest's OpenArea (host/exec_session.c). */
static int area(struct cmx_session *s, const struct cmx_state_rec *rec)
{
	int fd;

	if (s->area || (rec->area_flags & ~(uint64_t)CMX_AREA_RINGS) ||
	    rec->area_len > CMX_AREA_MAX) {
		finish(s, -EBADMSG, "a second or malformed area");
		return -1;
	}
	if (cmx_area_create(rec->area_len, (unsigned)rec->area_flags, &s->area, &fd)) {
		finish(s, -ENOMEM, "no memory for its area");
		return -1;
	}
	cmx_area_fence_spin(s->area, cmx_fence_spin_us(s->srv, (rec->area_flags & CMX_AREA_RINGS) != 0));
	s->area_fd = fd;
	return 0;
}

/* An event the guest holds, made again (host/eventstate.c). */
static int event(struct cmx_session *s, const struct cmx_state_rec *rec)
{
	const char *why = NULL;
	int e = cmx_eventstate_restore(s, rec, &why);

	if (e) {
		finish(s, e, why);
		return -1;
	}
	s->restore->events++;
	return 0;
}

/* Replays records until one is deferred (its end calls this again) or
 * the file ends. Loop thread. */
static void next(struct cmx_session *s)
{
	struct cmx_restore *rs = s->restore;
	struct cmx_state_rec rec;

	while (cmx_state_next(&rs->r, &rec) == 1) {
		int e = rec.type == CMX_STATE_CONTENTS ? contents(s, &rec)
			: rec.type == CMX_STATE_IMAGE  ? image(s, &rec)
			: rec.type == CMX_STATE_AREA   ? area(s, &rec)
			: rec.type == CMX_STATE_EVENT  ? event(s, &rec)
						       : replay(s, &rec.hdr, rec.args, rec.bulk);
		if (e)
			return;
	}
	if (!fresh_whole(rs)) {
		finish(s, -EBADMSG, "a buffer or image made for its bytes did not get them all");
		return;
	}
	finish(s, 0, NULL);
}

/* The end of a request the restore dispatched (cmx_call_done(), through
 * srv->replayed). */
static void replayed(struct cmx_session *s, int status)
{
	struct cmx_restore *rs = s->restore;

	/* Its payload has gone back (host/call.c frees it first). */
	staged_charge(s, -(int64_t)rs->staged);
	rs->status = status;
	if (rs->in_dispatch) {
		rs->sync_done = 1;
		return;
	}
	spent_add(s->srv, rs->call_op, now_ns() - rs->call_t0);
	if (status != CL_SUCCESS) {
		finish(s, -EIO, "a deferred request failed");
		return;
	}
	next(s);
}

/* One file: checked whole, its tenant this process's, then replayed. */
static void restore_file(struct cmx_server *srv, int dfd, const char *name, int counted)
{
	struct cmx_restores *all = &srv->restores;
	struct cmx_restore *rs = calloc(1, sizeof(*rs));
	struct cmx_tenant *t;
	struct cmx_session *s;
	int e;

	if (!rs)
		return;
	snprintf(rs->name, sizeof(rs->name), "%s", name);
	rs->t0 = now_ns();
	e = cmx_state_map(dfd, name, &rs->map, &rs->len);
	if (!e)
		e = cmx_state_open(&rs->r, rs->map, rs->len);
	if (e) {
		char bad[272];
		snprintf(bad, sizeof(bad), "%s.bad", name);
		cmx_err("state file %s: refused: %s; kept as %s", name,
			e == -EPROTONOSUPPORT ? "another version"
			: e == -EBADMSG	      ? "damaged (size, magic or checksum)"
					      : strerror(-e),
			bad);
		(void)renameat(dfd, name, dfd, bad);
		cmx_state_unmap(rs->map, rs->len);
		free(rs);
		all->failed += counted;
		return;
	}
	t = cmx_tenant_find(&srv->tenants, rs->r.head.tenant);
	/* The default tenant exists once a peer has been given it. */
	if (!t && srv->tenants.fallback[0] && !strcmp(rs->r.head.tenant, srv->tenants.fallback))
		t = cmx_tenant_get(&srv->tenants, rs->r.head.tenant);
	if (!t || (all->serves && !all->serves(t))) {
		/* Another worker's, or a tenant the configuration lost: left
		 * for whoever serves it. */
		cmx_state_unmap(rs->map, rs->len);
		free(rs);
		return;
	}
	for (s = srv->sessions; s; s = s->next)
		if (s->id == rs->r.head.session && !s->closed)
			break;
	if (s || !(s = cmx_session_create(srv, NULL, t))) {
		cmx_err("state file %s: session %" PRIu64 " exists already, or no memory", name,
			rs->r.head.session);
		cmx_state_unmap(rs->map, rs->len);
		free(rs);
		all->failed += counted;
		return;
	}
	s->id = rs->r.head.session;
	s->token = rs->r.head.token;
	/* Its guest's count of messages goes on from there (GetStats). */
	s->messages = rs->r.head.applied;
	s->restored = s->from_state = 1;
	if (srv->next_session < s->id)
		srv->next_session = s->id;
	s->restore = rs;
	rs->counted = counted;
	all->left += counted;
	if (scan(rs)) {
		finish(s, -ENOMEM, "out of memory");
		return;
	}
	next(s);
}

/* A restored session of tenant t waiting for its guest, with this id and
 * token; NULL when there is none, *busy set when it is still being
 * replayed (a resuming Hello, through srv->restore_find). */
static struct cmx_session *find(struct cmx_server *srv, const struct cmx_tenant *t,
				uint64_t id, uint64_t token, int *busy)
{
	/* Before the files are read (posted to the loop, behind the
	 * connections a worker may be handed first), it may be there soon. */
	*busy = !srv->restores.ran && cmx_checkpoint_dirfd(srv) >= 0;
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (s->id == id && s->restored && !s->closed && s->tenant == t) {
			/* Compared in constant time, as cmx_session_find(). */
			volatile uint64_t diff = s->token ^ token;
			if (diff)
				return NULL;
			*busy = s->restore != NULL;
			return s->restore ? NULL : s;
		}
	return NULL;
}

static void resume_wait_over(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_server *srv =
	    (struct cmx_server *)((char *)io - offsetof(struct cmx_server, resume_wait));
	struct cmx_session *s = srv->sessions;

	srv->resume_wait_armed = 0;
	while (s) {
		struct cmx_session *next = s->next;
		if (s->restored && !s->restore && !s->closed) {
			cmx_warn("session %" PRIu64
				 " (tenant %s): restored, but no guest resumed it "
				 "in %d s: closed",
				 s->id, s->tenant->name, RESUME_WAIT_S);
			/* Unlisted once unreferenced: next was read first. */
			cmx_release_session(s);
		}
		s = next;
	}
}

/* Restored sessions wait for their guests until the timer ends. */
static void wait_arm(struct cmx_server *srv)
{
	if (srv->resume_wait_armed)
		return;
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (s->restored) {
			srv->resume_wait_armed = 1;
			srv->resume_wait.cb = resume_wait_over;
			srv->resume_wait_ts.tv_sec = RESUME_WAIT_S;
			io_uring_prep_timeout(cmx_loop_sqe(srv->loop, &srv->resume_wait),
					      &srv->resume_wait_ts, 0, 0);
			break;
		}
}

void cmx_restore_all(struct cmx_server *srv, int (*serves_fn)(const struct cmx_tenant *t))
{
	struct cmx_restores *all = &srv->restores;
	int dfd = cmx_checkpoint_dirfd(srv);
	DIR *d;
	struct dirent *e;

	all->serves = serves_fn;
	all->ran = 1;
	if (!(d = cmx_checkpoint_dir_list(srv)))
		return;
	all->t0 = now_ns();
	all->listing = 1;
	/* Each file once, by the worker whose key its name begins with:
	 * the one its guest comes back to (cmx_checkpoint_file_ours()). */
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (n > 6 && !strcmp(e->d_name + n - 6, ".state") &&
		    cmx_checkpoint_file_ours(srv, e->d_name))
			restore_file(srv, dfd, e->d_name, 1);
	}
	closedir(d);
	all->listing = 0;
	all_done(srv);
	wait_arm(srv);
}

void cmx_restore_file(struct cmx_server *srv, const char *name)
{
	int dfd = cmx_checkpoint_dirfd(srv);

	if (dfd < 0)
		return;
	restore_file(srv, dfd, name, 0);
	wait_arm(srv);
}

void cmx_restore_attach(struct cmx_server *srv)
{
	srv->replayed = replayed;
	srv->restore_covers = covers;
	srv->restore_unfilled = unfilled;
	srv->restore_find = find;
}
