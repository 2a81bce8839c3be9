// SPDX-License-Identifier: MIT
// Checkpoints: every session of this process written to the state
// directory, each as one state file (host/state.h) of the requests that
// made its objects and the contents of its buffers and images.
#define _GNU_SOURCE
#include "checkpoint.h"

#include <CL/cl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "area.h"
#include "eventstate.h"
#include "exec.h"
#include "log.h"
#include "parts.h"
#include "proto.gen.h"
#include "record.h"
#include "server.h"
#include "session.h"
#include "staging.h"
#include "state.h"
#include "tenant.h"

/*
 * The instance id, 16 hex digits: the names of the files a process
 * writes carry it, and it takes only the files that carry it for its
 * own checkpoint's. Not the pid: in a fresh pid namespace (a container)
 * a restarted daemon and its workers get their predecessors' pids, and
 * would take their files for their own (not restored, then removed by
 * the next checkpoint). Not the pid and the process's start time
 * either: a container started at boot reaches clmuxd in about the same
 * clock tick at every boot, and telling boots apart needs /proc's boot
 * id, which a container may lack. 64 random bits repeat with odds of
 * 2^-64 for two starts, and need nothing but getrandom(), which blocks
 * only until the kernel's pool is first ready, as session tokens'
 * (host/session.c) do. Each process has its own: workers are started
 * with exec, and each opens the state directory itself.
 */
static int instance_make(struct cmx_state_dir *sd)
{
	uint64_t v;
	ssize_t n;

	do
		n = getrandom(&v, sizeof(v), 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(v))
		return n < 0 ? -errno : -EIO;
	snprintf(sd->instance, sizeof(sd->instance), "%016" PRIx64, v);
	return 0;
}

const char *cmx_checkpoint_instance(const struct cmx_server *srv)
{
	return srv->state.instance;
}

int cmx_checkpoint_open(struct cmx_server *srv, const char *path)
{
	struct cmx_state_dir *sd = &srv->state;
	int fd, e;

	if (!sd->instance[0] && (e = instance_make(sd)))
		return e;
	fd = cmx_state_dir_open(path);
	if (fd < 0)
		return fd;
	if (sd->open)
		close(sd->fd);
	sd->fd = fd;
	sd->open = 1;
	cmx_record_keep(srv);
	return 0;
}

int cmx_checkpoint_enabled(const struct cmx_server *srv)
{
	return srv->state.open;
}

int cmx_checkpoint_dirfd(const struct cmx_server *srv)
{
	return srv->state.open ? srv->state.fd : -1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Parts of a program that ProgramPart staged and no creation has taken
 * yet (a checkpoint in the middle of an upload): written as the calls that
 * staged them, in pieces of at most one part, so that the restore's replay
 * stages them again and the creation the resumed guest sends (or sends
 * again) takes them, with the parts it sends after. */
#define PART_PIECE (8ull << 20) /* ProgramPart's `data` max (schema) */

static void parts_write(struct cmx_session *s, struct cmx_state_writer *w)
{
	const struct cmx_parts *p = s->parts;

	if (!p || p->err || !p->data || !p->len)
		return;
	for (uint64_t off = 0; off < p->len; off += PART_PIECE) {
		struct cmx_ProgramPart_in in = {.program = p->program, .offset = off, .total = p->total};
		uint64_t n = p->len - off < PART_PIECE ? p->len - off : PART_PIECE;
		in.data = (struct cmx_blob){p->data + off, n};
		struct cmx_hdr h = {.op = CMX_OP_ProgramPart};
		size_t size = cmx_codec_size(&cmx_desc_ProgramPart_in, &in);
		uint8_t *args = malloc(size);
		if (!args)
			return; /* the creation after the restore fails, as before */
		cmx_codec_encode(&cmx_desc_ProgramPart_in, &in, args);
		h.size = (uint32_t)size;
		struct iovec iov[2] = {{&h, sizeof(h)}, {args, size}};
		cmx_state_put(w, CMX_STATE_CALL, iov, 2);
		free(args);
	}
}

void cmx_checkpoint_worker(struct cmx_server *srv, const char *key)
{
	cmx_state_key_name(key, srv->state.owner, sizeof(srv->state.owner));
}

/* This process's files: "<key>-i<instance>-<tenant>-<session>.state",
 * key the worker's (cmx_state_key_name()), which restores them: a
 * session comes back in the worker its guest comes back to. Session ids
 * are a worker's own, so the instance keeps two workers' apart, and a
 * worker's from its predecessor's. */
static void file_name(const struct cmx_session *s, char *buf, size_t len)
{
	const struct cmx_state_dir *sd = &s->srv->state;
	char t[CMX_STATE_TENANT_MAX], key[CMX_STATE_KEY_MAX], tkey[CMX_TENANT_KEY];
	size_t i;

	for (i = 0; s->tenant->name[i] && i + 1 < sizeof(t); i++) {
		char ch = s->tenant->name[i];
		t[i] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			       (ch >= '0' && ch <= '9') || ch == '_'
			   ? ch
			   : '_';
	}
	t[i] = '\0';
	if (sd->owner[0])
		snprintf(key, sizeof(key), "%s", sd->owner);
	else
		cmx_state_key_name(cmx_tenant_key(s->tenant, tkey), key, sizeof(key));
	snprintf(buf, len, "%s-i%s-%.20s-%" PRIu64 ".state", key, sd->instance, t, s->id);
}

/* Whether name is a file this process wrote: "<key>-i<instance>-". An
 * older clmuxd's "<key>-p<pid>-" names are never this process's, even
 * where the pid is its own: a predecessor's, to restore. */
static int own_file(const struct cmx_state_dir *sd, const char *name)
{
	char mine[24];
	const char *dash = strchr(name, '-');

	if (!sd->instance[0])
		return 0;
	snprintf(mine, sizeof(mine), "-i%s-", sd->instance);
	return dash && !strncmp(dash, mine, strlen(mine));
}

int cmx_checkpoint_file_ours(const struct cmx_server *srv, const char *name)
{
	const char *owner = srv->state.owner;
	char key[CMX_STATE_KEY_MAX];
	int keyed = cmx_state_name_key(name, key, sizeof(key));

	/* This process's own files are a checkpoint of what it serves now. */
	if (own_file(&srv->state, name))
		return 0;
	/* Without workers every file is this process's. */
	if (!owner[0])
		return 1;
	/* A tenant's worker: the files of its tenants' own workers, and
	 * those of no worker's; which tenants are its, the header says. */
	if (owner[0] == 't')
		return !keyed || key[0] == 't';
	/* A TLS listener's or a VM device's worker serves any tenant, but
	 * only its own guests come back to it. */
	return keyed && !strcmp(key, owner);
}

DIR *cmx_checkpoint_dir_list(const struct cmx_server *srv)
{
	int dfd = cmx_checkpoint_dirfd(srv);
	int fd = dfd >= 0 ? openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;

	if (!d && fd >= 0)
		close(fd);
	return d;
}

/* A checkpoint replaces this process's last one: its files go first, so
 * that a session closed since is not restored. */
static void forget_old(struct cmx_server *srv)
{
	DIR *d = cmx_checkpoint_dir_list(srv);
	struct dirent *e;

	if (!d)
		return;
	while ((e = readdir(d)))
		if (own_file(&srv->state, e->d_name))
			(void)unlinkat(srv->state.fd, e->d_name, 0);
	closedir(d);
}

struct objs {
	struct cmx_obj **v;
	size_t n, cap;
	int oom;
};

static void collect(struct cmx_obj *o, void *arg)
{
	struct objs *l = arg;

	if (o->err || !o->h || (o->kind != CMX_K_QUEUE && o->kind != CMX_K_MEM))
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		struct cmx_obj **v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			l->oom = 1;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = o;
}

/* The op that made o (its records' first is its creation). */
static unsigned made_by(const struct cmx_obj *o)
{
	return o->recs ? o->recs->hdr.op : 0;
}

struct find_queue {
	void *ctx;
	cl_command_queue q;
	uint64_t id;
};

static void find_queue(struct cmx_obj *o, void *arg)
{
	struct find_queue *f = arg;

	if (!f->q && o->kind == CMX_K_QUEUE && o->h && !o->err && o->ctx == f->ctx) {
		f->q = o->h;
		f->id = o->id;
	}
}

uint64_t cmx_checkpoint_queue_id(struct cmx_session *s, void *ctx)
{
	struct find_queue f = {.ctx = ctx};

	cmx_objtab_each(&s->objs, find_queue, &f);
	return f.id;
}

void *cmx_checkpoint_queue(struct cmx_session *s, void *ctx, int *made)
{
	struct find_queue f = {.ctx = ctx};
	cl_device_id dev;
	cl_int e;
	cl_command_queue q;

	*made = 0;
	cmx_objtab_each(&s->objs, find_queue, &f);
	if (f.q)
		return f.q;
	if (clGetContextInfo(ctx, CL_CONTEXT_DEVICES, sizeof(dev), &dev, NULL))
		return NULL;
	q = clCreateCommandQueue(ctx, dev, 0, &e);
	*made = q != NULL;
	return q;
}

/* Buffer o's bytes into w, in pieces, each written straight from a map
 * of it: on a CPU device the buffer's own memory, elsewhere the driver's
 * copy, with no staging copy of the daemon's. */
static int write_contents(struct cmx_session *s, struct cmx_state_writer *w, struct cmx_obj *o,
			  uint64_t *bytes)
{
	int made;
	cl_command_queue q = cmx_checkpoint_queue(s, o->ctx, &made);
	int e = 0;

	if (!q)
		return -ENODEV;
	for (uint64_t off = 0; off < o->size && !e; off += CMX_STATE_PIECE) {
		uint64_t n = o->size - off < CMX_STATE_PIECE ? o->size - off : CMX_STATE_PIECE;
		uint64_t head[2] = {o->id, off};
		cl_int ce;
		void *p =
		    clEnqueueMapBuffer(q, o->h, CL_TRUE, CL_MAP_READ, off, n, 0, NULL, NULL, &ce);
		if (!p || ce) {
			e = -EIO;
			break;
		}
		struct iovec iov[2] = {{head, sizeof(head)}, {p, n}};
		cmx_state_put(w, CMX_STATE_CONTENTS, iov, 2);
		*bytes += n;
		if (clEnqueueUnmapMemObject(q, o->h, p, 0, NULL, NULL) || clFinish(q))
			e = -EIO;
	}
	if (made)
		clReleaseCommandQueue(q);
	return e;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* Image o's bytes into w, read with clEnqueueReadImage, rows packed, in
 * boxes of at most a piece that are each one run of its packed bytes
 * (struct cmx_state_image): whole slices, else rows of a slice, else
 * part of a row. A driver lays an image out as it likes (tiles on a GPU),
 * so unlike a buffer's its bytes are not mapped but read into the
 * daemon's staging, one piece at a time. An image over a buffer has no
 * bytes of its own: the buffer's are written. */
static int write_image(struct cmx_session *s, struct cmx_state_writer *w, struct cmx_obj *o,
		       uint64_t *bytes)
{
	struct cmx_state_image im = {.id = o->id};
	uint64_t row, slice, step[3];
	cl_command_queue q;
	uint8_t *buf;
	int made, e = 0;

	if (!cmx_image_shape(o, im.extent, &im.elem))
		return 0;
	/* No overflow: the image was made (cmx_h_CreateImage()). */
	row = im.extent[0] * im.elem;
	slice = row * im.extent[1];
	if (slice <= CMX_STATE_PIECE) {
		step[0] = im.extent[0];
		step[1] = im.extent[1];
		step[2] = CMX_STATE_PIECE / slice;
	} else if (row <= CMX_STATE_PIECE) {
		step[0] = im.extent[0];
		step[1] = CMX_STATE_PIECE / row;
		step[2] = 1;
	} else {
		step[0] = CMX_STATE_PIECE / im.elem;
		step[1] = step[2] = 1;
	}
	/* Not charged to the tenant: a checkpoint runs on the loop from start
	 * to end, one image at a time, so this is the only staging it holds,
	 * at most a piece (64 MiB) for the whole process and back before the
	 * next image; kept after, it is the staging cache's, bounded for all
	 * together (512 MiB, host/staging.c). */
	buf = cmx_staging_get(&s->srv->staging, min64(CMX_STATE_PIECE, slice * im.extent[2]));
	if (!buf)
		return -ENOMEM;
	q = cmx_checkpoint_queue(s, o->ctx, &made);
	if (!q) {
		cmx_staging_put(buf);
		return -ENODEV;
	}
	for (uint64_t z = 0; z < im.extent[2] && !e; z += step[2])
		for (uint64_t y = 0; y < im.extent[1] && !e; y += step[1])
			for (uint64_t x = 0; x < im.extent[0] && !e; x += step[0]) {
				uint64_t at[3] = {x, y, z};
				size_t origin[3], region[3];
				uint64_t n = im.elem;
				for (int i = 0; i < 3; i++) {
					im.origin[i] = at[i];
					im.region[i] = min64(step[i], im.extent[i] - at[i]);
					origin[i] = im.origin[i];
					region[i] = im.region[i];
					n *= im.region[i];
				}
				if (clEnqueueReadImage(q, o->h, CL_TRUE, origin, region, 0, 0, buf,
						       0, NULL, NULL)) {
					e = -EIO;
					break;
				}
				struct iovec iov[2] = {{&im, sizeof(im)}, {buf, n}};
				cmx_state_put(w, CMX_STATE_IMAGE, iov, 2);
				*bytes += n;
			}
	if (made)
		clReleaseCommandQueue(q);
	cmx_staging_put(buf);
	return e;
}

static int write_session(struct cmx_session *s, struct cmx_state_writer *w,
			 struct cmx_checkpoint_stats *st)
{
	struct objs l = {0};
	char name[CMX_STATE_NAME_MAX];
	uint64_t bytes = 0, images = 0, blocked;
	int e;

	/* A call that makes or changes an object is still running (a build
	 * on the executor): the messages counted as applied include it, and
	 * its record is not kept yet, so a restore would lack what it did. */
	if (s->log.pending) {
		cmx_err("session %" PRIu64 " (tenant %s): a call that changes an object is "
			"still running (%" PRIu64 ")",
			s->id, s->tenant->name, s->log.pending);
		return -EBUSY;
	}
	/* A command waits for a user event the guest has not set: the
	 * drain would wait for the guest, and the command is not kept. */
	if ((blocked = cmx_eventstate_blocked(s)) != 0) {
		cmx_err("session %" PRIu64 " (tenant %s): a command waits for user event %#" PRIx64
			", not set yet",
			s->id, s->tenant->name, blocked);
		return -EBUSY;
	}
	cmx_objtab_each(&s->objs, collect, &l);
	if (l.oom) {
		free(l.v);
		return -ENOMEM;
	}
	/* Drained: every command the guest was told of has run, so the
	 * contents read next are what it will find. */
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i]->kind == CMX_K_QUEUE)
			clFinish(l.v[i]->h);
	file_name(s, name, sizeof(name));
	e = cmx_state_begin(w, s->srv->state.fd, name, s->id, s->token, s->messages,
			    s->tenant->name);
	if (e) {
		free(l.v);
		return e;
	}
	if (s->area) {
		/* Made again first, laid out as before: the buffers living
		 * in it and the guest's offsets into it stay where they were. */
		uint64_t area[2] = {s->area->hdr.data_len,
				    s->area->hdr.ring_len[0] ? CMX_AREA_RINGS : 0};
		struct iovec iov = {area, sizeof(area)};
		cmx_state_put(w, CMX_STATE_AREA, &iov, 1);
	}
	st->records += cmx_record_mark(s);
	cmx_record_write(s, w);
	parts_write(s, w);
	/* After the contexts they name; drained, so each has ended but a
	 * user event the guest has not set. */
	cmx_eventstate_write(s, w);
	for (size_t i = 0; i < l.n && !e; i++) {
		unsigned op = l.v[i]->kind == CMX_K_MEM ? made_by(l.v[i]) : 0;
		/* Sub-buffers are their parent's bytes. An area buffer's
		 * are read through the driver too: a device may hold them
		 * apart from the shared memory until they are mapped. */
		if (op == CMX_OP_CreateBuffer || op == CMX_OP_CreateBufferArea)
			e = write_contents(s, w, l.v[i], &bytes);
		else if (op == CMX_OP_CreateImage)
			e = write_image(s, w, l.v[i], &images);
	}
	free(l.v);
	if (e) {
		cmx_state_abort(w);
		return e;
	}
	e = cmx_state_commit(w);
	if (!e) {
		st->bytes += bytes;
		st->images += images;
	}
	return e;
}

int cmx_checkpoint_session(struct cmx_session *s, char *name, size_t len,
			   struct cmx_checkpoint_stats *st)
{
	struct cmx_state_writer *w;
	int e;

	if (!cmx_checkpoint_enabled(s->srv))
		return -ENOENT;
	w = malloc(sizeof(*w));
	e = w ? write_session(s, w, st) : -ENOMEM;
	free(w);
	if (!e)
		file_name(s, name, len);
	return e;
}

int cmx_checkpoint_all(struct cmx_server *srv, struct cmx_checkpoint_stats *st)
{
	struct cmx_state_writer *w;
	uint64_t t0 = now_ns();
	unsigned owed = 0;

	memset(st, 0, sizeof(*st));
	if (!cmx_checkpoint_enabled(srv))
		return -ENOENT;
	w = malloc(sizeof(*w));
	if (!w)
		return -ENOMEM;
	forget_old(srv);
	for (struct cmx_session *s = srv->sessions; s; s = s->next) {
		int e;
		if (s->closed)
			continue;
		/* Still being restored (its requests replayed, some on
		 * executor threads): the file it is restored from is its
		 * state, kept until the restore has written it again. */
		if (s->restore) {
			s->checkpoint_owed = 1;
			st->sessions++;
			owed++;
			continue;
		}
		e = write_session(s, w, st);
		if (e) {
			st->failed++;
			cmx_err("session %" PRIu64 " (tenant %s): not checkpointed: %s", s->id,
				s->tenant->name, strerror(-e));
		} else {
			st->sessions++;
		}
	}
	free(w);
	st->ns = now_ns() - t0;
	cmx_info("checkpoint: %u session%s written (%" PRIu64 " records, %" PRIu64
		 " image bytes, %" PRIu64 " buffer bytes) in %.1f ms, %u failed",
		 st->sessions, st->sessions == 1 ? "" : "s", st->records, st->images, st->bytes,
		 (double)st->ns / 1e6, st->failed);
	if (owed)
		cmx_info("checkpoint: %u of them still being restored: their state files stand for "
			 "them until their restores write them again",
			 owed);
	return 0;
}
