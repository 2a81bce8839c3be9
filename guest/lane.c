// SPDX-License-Identifier: MIT
// Bulk lanes: a thread per extra connection moves one piece of each large
// blocking transfer, so that several cores copy it (docs/protocol.md).
#include "lane.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "codec.h"
#include "dial.h"
#include "env.h"
#include "log.h"
#include "proto.gen.h"
#include "wire.h"

enum job { JOB_NONE, JOB_SEND, JOB_RECV, JOB_QUIT };

struct lane {
	struct cmx_lanes *l;
	unsigned i;
	int fd;
	pthread_t thread;
	int started;
};

struct cmx_lanes {
	unsigned n;
	pthread_mutex_t busy; /* held by the thread whose transfer uses the lanes */
	uint64_t next_id;

	/* lock: the job every lane runs (gen counts them), and its outcome. */
	pthread_mutex_t lock;
	pthread_cond_t go, done;
	uint64_t gen;
	enum job job;
	uint64_t transfer, size;
	char *ptr;
	unsigned running;
	int err;
	struct lane lane[CMX_LANES_MAX];
};

unsigned cmx_lanes_wanted(void)
{
	long n = (long)cmx_env()->lanes;

	if (n == CMX_ENV_AUTO) {
		n = sysconf(_SC_NPROCESSORS_ONLN);
		n = n < 0 ? 0 : n < 4 ? n : 4;
	}
	return (unsigned)n;
}

/* One piece: its header, arguments and payload. */
static int piece_send(struct lane *ln, uint64_t transfer, const char *ptr, uint64_t size)
{
	struct cmx_LanePiece_in in = { .transfer = transfer };
	uint64_t args[2], len;
	struct cmx_hdr h = { .size = sizeof(args), .op = CMX_OP_LanePiece };
	struct iovec iov[3];

	cmx_lane_piece(size, ln->l->n, ln->i, &in.offset, &len);
	if (!len)
		return 0;
	h.bulk = len;
	cmx_codec_encode(&cmx_desc_LanePiece_in, &in, (uint8_t *)args);
	iov[0] = (struct iovec){ &h, CMX_HDR_SIZE };
	iov[1] = (struct iovec){ args, sizeof(args) };
	iov[2] = (struct iovec){ (char *)ptr + in.offset, len };
	return cmx_dial_send_all(ln->fd, iov, 3, NULL);
}

/* The daemon's piece for this lane: exactly the one the split gives it;
 * anything else is a broken peer. */
static int piece_recv(struct lane *ln, uint64_t transfer, char *dst, uint64_t size)
{
	struct cmx_LanePiece_in in;
	uint64_t args[2], off, len;
	struct cmx_hdr h;
	int e;

	cmx_lane_piece(size, ln->l->n, ln->i, &off, &len);
	if (!len)
		return 0;
	e = cmx_dial_recv_all(ln->fd, &h, CMX_HDR_SIZE);
	if (!e && (h.op != CMX_OP_LanePiece || h.size != sizeof(args) || h.flags || h.bulk != len))
		e = -EBADMSG;
	if (!e)
		e = cmx_dial_recv_all(ln->fd, args, sizeof(args));
	if (!e && (cmx_codec_decode(&cmx_desc_LanePiece_in, (uint8_t *)args, sizeof(args), &in) ||
		   in.transfer != transfer || in.offset != off))
		e = -EBADMSG;
	return e ? e : cmx_dial_recv_all(ln->fd, dst + off, len);
}

static void *lane_main(void *arg)
{
	struct lane *ln = arg;
	struct cmx_lanes *l = ln->l;
	uint64_t seen = 0;

	for (;;) {
		enum job job;
		uint64_t transfer, size;
		char *ptr;
		int e = 0;

		pthread_mutex_lock(&l->lock);
		while (l->gen == seen && l->job != JOB_QUIT)
			pthread_cond_wait(&l->go, &l->lock);
		seen = l->gen;
		job = l->job;
		transfer = l->transfer;
		size = l->size;
		ptr = l->ptr;
		pthread_mutex_unlock(&l->lock);
		if (job == JOB_QUIT)
			return NULL;
		if (job == JOB_SEND)
			e = piece_send(ln, transfer, ptr, size);
		else if (job == JOB_RECV)
			e = piece_recv(ln, transfer, ptr, size);
		pthread_mutex_lock(&l->lock);
		if (e && !l->err)
			l->err = e;
		if (!--l->running)
			pthread_cond_broadcast(&l->done);
		pthread_mutex_unlock(&l->lock);
	}
}

int cmx_lanes_create(const int *fds, unsigned n, struct cmx_lanes **out)
{
	struct cmx_lanes *l = n && n <= CMX_LANES_MAX ? calloc(1, sizeof(*l)) : NULL;
	int e = 0;

	if (!l) {
		for (unsigned i = 0; i < n; i++)
			cmx_dial_close(fds[i]);
		return -EINVAL;
	}
	l->n = n;
	pthread_mutex_init(&l->busy, NULL);
	pthread_mutex_init(&l->lock, NULL);
	pthread_cond_init(&l->go, NULL);
	pthread_cond_init(&l->done, NULL);
	for (unsigned i = 0; i < n; i++) {
		l->lane[i] = (struct lane){ .l = l, .i = i, .fd = fds[i] };
	}
	for (unsigned i = 0; i < n && !e; i++) {
		e = -pthread_create(&l->lane[i].thread, NULL, lane_main, &l->lane[i]);
		l->lane[i].started = !e;
	}
	if (e) {
		cmx_lanes_destroy(l);
		return e;
	}
	*out = l;
	return 0;
}

void cmx_lanes_shutdown(struct cmx_lanes *l)
{
	if (!l)
		return;
	for (unsigned i = 0; i < l->n; i++)
		shutdown(l->lane[i].fd, SHUT_RDWR);
}

void cmx_lanes_destroy(struct cmx_lanes *l)
{
	if (!l)
		return;
	cmx_lanes_shutdown(l);
	pthread_mutex_lock(&l->lock);
	l->job = JOB_QUIT;
	pthread_cond_broadcast(&l->go);
	pthread_mutex_unlock(&l->lock);
	for (unsigned i = 0; i < l->n; i++) {
		if (l->lane[i].started)
			pthread_join(l->lane[i].thread, NULL);
		cmx_dial_close(l->lane[i].fd);
	}
	free(l);
}

int cmx_lanes_take(struct cmx_lanes *l, uint64_t *transfer)
{
	if (pthread_mutex_trylock(&l->busy))
		return 0;
	*transfer = ++l->next_id;
	return 1;
}

void cmx_lanes_give(struct cmx_lanes *l)
{
	pthread_mutex_unlock(&l->busy);
}

unsigned cmx_lanes_count(const struct cmx_lanes *l)
{
	return l->n;
}

static void start(struct cmx_lanes *l, enum job job, uint64_t transfer, void *ptr, uint64_t size)
{
	pthread_mutex_lock(&l->lock);
	l->job = job;
	l->transfer = transfer;
	l->ptr = ptr;
	l->size = size;
	l->err = 0;
	l->running = l->n;
	l->gen++;
	pthread_cond_broadcast(&l->go);
	pthread_mutex_unlock(&l->lock);
}

int cmx_lanes_wait(struct cmx_lanes *l)
{
	int e;

	pthread_mutex_lock(&l->lock);
	while (l->running)
		pthread_cond_wait(&l->done, &l->lock);
	e = l->err;
	pthread_mutex_unlock(&l->lock);
	return e;
}

int cmx_lanes_send(struct cmx_lanes *l, uint64_t transfer, const void *ptr, uint64_t size)
{
	start(l, JOB_SEND, transfer, (void *)ptr, size);
	return cmx_lanes_wait(l);
}

void cmx_lanes_recv_start(struct cmx_lanes *l, uint64_t transfer, void *dst, uint64_t size)
{
	start(l, JOB_RECV, transfer, dst, size);
}
