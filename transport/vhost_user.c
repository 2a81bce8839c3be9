// SPDX-License-Identifier: MIT
// vhost-user back end: message framing and fds, the memory table, vring
// set-up and the kick/call eventfds. Every field the front end sends is
// checked; a bad message breaks this one connection.
#include "vhost_user.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "log.h"

enum {
	VHU_GET_FEATURES = 1,
	VHU_SET_FEATURES = 2,
	VHU_SET_OWNER = 3,
	VHU_RESET_OWNER = 4,
	VHU_SET_MEM_TABLE = 5,
	VHU_SET_LOG_BASE = 6,
	VHU_SET_LOG_FD = 7,
	VHU_SET_VRING_NUM = 8,
	VHU_SET_VRING_ADDR = 9,
	VHU_SET_VRING_BASE = 10,
	VHU_GET_VRING_BASE = 11,
	VHU_SET_VRING_KICK = 12,
	VHU_SET_VRING_CALL = 13,
	VHU_SET_VRING_ERR = 14,
	VHU_GET_PROTOCOL_FEATURES = 15,
	VHU_SET_PROTOCOL_FEATURES = 16,
	VHU_GET_QUEUE_NUM = 17,
	VHU_SET_VRING_ENABLE = 18,
	VHU_GET_CONFIG = 24,
	VHU_SET_CONFIG = 25,
};

#define VHU_VERSION 0x1u
#define VHU_FLAG_REPLY 0x4u
#define VHU_F_PROTOCOL_FEATURES (1ull << 30)
#define VIRTIO_F_VERSION_1 (1ull << 32)
#define VHU_PROTOCOL_F_CONFIG (1ull << 9)
/* Dirty logging for live migration: the feature, the log's memory as an
 * fd (SET_LOG_BASE), and a ring's used area logged (SET_VRING_ADDR). */
#define VHU_F_LOG_ALL (1ull << 26)
#define VHU_PROTOCOL_F_LOG_SHMFD (1ull << 1)
#define VHU_PROTOCOLS (VHU_PROTOCOL_F_CONFIG | VHU_PROTOCOL_F_LOG_SHMFD)
#define VHU_VRING_F_LOG 0x1u
/* One bit of the log per page of guest memory. */
#define VHU_LOG_PAGE 4096u
/* A log for up to 1 TiB of guest memory. */
#define VHU_LOG_MAX (32ull << 20)
#define VHU_VRING_NOFD 0x100u
#define VHU_VRING_IDX 0xffu
#define VHU_HDR_SIZE 12
#define VHU_MAX_PAYLOAD 4096
#define VHU_MAX_FDS 8

struct vhu_msg {
	uint32_t request, flags, size;
	union {
		uint64_t u64;
		struct { uint32_t index, num; } state;
		struct {
			uint32_t index, flags;
			uint64_t desc, used, avail, log;
		} addr;
		struct {
			uint32_t nregions, padding;
			struct { uint64_t gpa, size, uva, mmap_offset; } r[CMX_VHU_MAX_REGIONS];
		} mem;
		struct {
			uint32_t offset, size, flags;
			uint8_t data[CMX_VHU_MAX_CONFIG];
		} config;
		struct {
			uint64_t size, offset;
		} log;
		uint8_t raw[VHU_MAX_PAYLOAD];
	};
} __attribute__((packed));

void cmx_vhu_dev_init(struct cmx_vhu_dev *d, int fd, uint64_t device_features, const void *config,
		      unsigned config_len, const struct cmx_vhu_ops *ops, void *user)
{
	struct timeval tv = { .tv_sec = 2 };

	memset(d, 0, sizeof(*d));
	d->fd = fd;
	d->features = device_features | VIRTIO_F_VERSION_1 | VHU_F_PROTOCOL_FEATURES | VHU_F_LOG_ALL;
	if (config_len > CMX_VHU_MAX_CONFIG)
		config_len = CMX_VHU_MAX_CONFIG;
	memcpy(d->config, config, config_len);
	d->config_len = config_len;
	d->ops = ops;
	d->user = user;
	for (unsigned i = 0; i < CMX_VHU_MAX_QUEUES; i++)
		d->vring[i].kick_fd = d->vring[i].call_fd = d->vring[i].err_fd = -1;
	/* A message is read whole once the socket is readable; a front end
	 * that stops half-way must not hold the daemon's loop for long. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static void vring_stop(struct cmx_vhu_dev *d, unsigned i)
{
	struct cmx_vhu_vring *v = &d->vring[i];

	if (!v->started)
		return;
	v->started = 0;
	v->base = v->q.last_avail;
	/* A stopped ring is not touched again (the front end may unmap or
	 * reuse it): pops find nothing until it starts anew. */
	v->q.num = 0;
	v->q.desc = v->q.avail = v->q.used = NULL;
	d->ops->queue_state(d, i, 0);
}

static int reply(struct cmx_vhu_dev *d, struct vhu_msg *m, uint32_t size);

static void log_unmap(struct cmx_vhu_dev *d)
{
	if (d->log_map)
		munmap(d->log_map, d->log_map_len);
	d->log_map = NULL;
	d->log = NULL;
	d->log_len = 0;
}

void cmx_vhu_log(void *ctx, uint64_t gpa, uint64_t len)
{
	struct cmx_vhu_dev *d = ctx;
	uint64_t page, last;

	if (!(d->acked_features & VHU_F_LOG_ALL) || !d->log || !len)
		return;
	last = (gpa + len - 1) / VHU_LOG_PAGE;
	/* A page past the log is one the front end does not track. */
	for (page = gpa / VHU_LOG_PAGE; page <= last && page / 8 < d->log_len; page++)
		/* Pairs with the front end's atomic exchange that reads and
		 * clears the log while the device runs. */
		__atomic_fetch_or(&d->log[page / 8], (uint8_t)(1u << (page % 8)), __ATOMIC_RELAXED);
}

/* The front end's log memory: u64 size and offset, the fd. Replied to
 * with no payload, as QEMU reads it. */
static int set_log_base(struct cmx_vhu_dev *d, struct vhu_msg *m, const int *fds,
			unsigned nfds)
{
	uint64_t size = m->log.size, off = m->log.offset;
	struct stat st;
	void *p;

	if (m->size < sizeof(m->log) || nfds != 1 || !size || size > VHU_LOG_MAX ||
	    off > VHU_LOG_MAX)
		return -EINVAL;
	/* A log past the file's end would be a SIGBUS at the first mark. */
	if (fstat(fds[0], &st) || st.st_size < 0 || (uint64_t)st.st_size < size + off)
		return -EINVAL;
	p = mmap(NULL, (size_t)(size + off), PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	if (p == MAP_FAILED)
		return -errno;
	log_unmap(d);
	d->log_map = p;
	d->log_map_len = (size_t)(size + off);
	d->log = (uint8_t *)p + off;
	d->log_len = size;
	return reply(d, m, 0);
}

static void unmap_all(struct cmx_vhu_dev *d)
{
	for (unsigned i = 0; i < d->nregions; i++)
		munmap(d->regions[i].map, d->regions[i].map_len);
	d->nregions = 0;
}

void cmx_vhu_dev_fini(struct cmx_vhu_dev *d)
{
	for (unsigned i = 0; i < CMX_VHU_MAX_QUEUES; i++) {
		vring_stop(d, i);
		close_fd(&d->vring[i].kick_fd);
		close_fd(&d->vring[i].call_fd);
		close_fd(&d->vring[i].err_fd);
	}
	unmap_all(d);
	log_unmap(d);
	close_fd(&d->fd);
}

void *cmx_vhu_gpa(void *ctx, uint64_t gpa, uint64_t len)
{
	struct cmx_vhu_dev *d = ctx;

	for (unsigned i = 0; i < d->nregions; i++) {
		const struct cmx_vhu_region *r = &d->regions[i];
		if (gpa >= r->gpa && gpa - r->gpa < r->size && len <= r->size - (gpa - r->gpa))
			return r->host + (gpa - r->gpa);
	}
	return NULL;
}

/* A front-end (QEMU process) address range as a host pointer. */
static void *uva_to_host(struct cmx_vhu_dev *d, uint64_t uva, uint64_t len)
{
	for (unsigned i = 0; i < d->nregions; i++) {
		const struct cmx_vhu_region *r = &d->regions[i];
		if (uva >= r->uva && uva - r->uva < r->size && len <= r->size - (uva - r->uva))
			return r->host + (uva - r->uva);
	}
	return NULL;
}

/* The ring's used area is logged when the front end asked for it. */
static void vring_log_set(struct cmx_vhu_dev *d, unsigned i)
{
	struct cmx_vhu_vring *v = &d->vring[i];

	v->q.log = (v->addr_flags & VHU_VRING_F_LOG) ? cmx_vhu_log : NULL;
	v->q.used_gpa = v->log_gpa;
}

/* Starts a ring once it has its size, addresses, kick fd and is enabled. */
static int vring_try_start(struct cmx_vhu_dev *d, unsigned i)
{
	struct cmx_vhu_vring *v = &d->vring[i];
	void *desc, *avail, *used;

	if (v->started || v->kick_fd < 0 || !v->enabled || !v->num)
		return 0;
	/* The alignments virtio requires of the three areas (2.7). */
	if ((v->desc_uva & 15) || (v->avail_uva & 1) || (v->used_uva & 3))
		return -EINVAL;
	desc = uva_to_host(d, v->desc_uva, cmx_virtq_desc_size(v->num));
	avail = uva_to_host(d, v->avail_uva, cmx_virtq_avail_size(v->num));
	used = uva_to_host(d, v->used_uva, cmx_virtq_used_size(v->num));
	if (!desc || !avail || !used || cmx_virtq_init(&v->q, v->num, desc, avail, used, v->base,
						     cmx_vhu_gpa, d))
		return -EINVAL;
	vring_log_set(d, i);
	v->started = 1;
	d->ops->queue_state(d, i, 1);
	return 0;
}

static int set_mem_table(struct cmx_vhu_dev *d, const struct vhu_msg *m, int *fds, unsigned nfds)
{
	unsigned n = m->mem.nregions;

	if (m->size < 8 || n > CMX_VHU_MAX_REGIONS || n != nfds || m->size < 8 + 32 * n)
		return -EINVAL;
	for (unsigned i = 0; i < CMX_VHU_MAX_QUEUES; i++)
		vring_stop(d, i);
	if (d->ops->mem_changed)
		d->ops->mem_changed(d);
	unmap_all(d);
	for (unsigned i = 0; i < n; i++) {
		uint64_t gpa = m->mem.r[i].gpa, size = m->mem.r[i].size;
		uint64_t uva = m->mem.r[i].uva, off = m->mem.r[i].mmap_offset;
		struct cmx_vhu_region *r = &d->regions[i];
		void *p;

		if (!size || gpa + size < gpa || uva + size < uva || off + size < off ||
		    off + size > SIZE_MAX)
			return -EINVAL;
		p = mmap(NULL, (size_t)(off + size), PROT_READ | PROT_WRITE, MAP_SHARED, fds[i], 0);
		if (p == MAP_FAILED)
			return -errno;
		r->gpa = gpa;
		r->size = size;
		r->uva = uva;
		r->map = p;
		r->map_len = (size_t)(off + size);
		r->host = (uint8_t *)p + off;
		d->nregions = i + 1;
	}
	/* Rings stopped above restart on the new table. */
	for (unsigned i = 0; i < CMX_VHU_MAX_QUEUES; i++)
		if (vring_try_start(d, i))
			return -EINVAL;
	return 0;
}

static int reply(struct cmx_vhu_dev *d, struct vhu_msg *m, uint32_t size)
{
	size_t len = VHU_HDR_SIZE + size;
	ssize_t w;

	m->flags = VHU_VERSION | VHU_FLAG_REPLY;
	m->size = size;
	w = send(d->fd, m, len, MSG_NOSIGNAL);
	return w == (ssize_t)len ? 0 : -EIO;
}

/* Reads one message: header with its fds, then the payload. */
static int read_msg(struct cmx_vhu_dev *d, struct vhu_msg *m, int *fds, unsigned *nfds)
{
	union {
		char buf[CMSG_SPACE(VHU_MAX_FDS * sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { m, VHU_HDR_SIZE };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf,
			     .msg_controllen = sizeof(cbuf.buf) };
	ssize_t r = recvmsg(d->fd, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);

	*nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		unsigned k = (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (unsigned i = 0; i < k; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*nfds < VHU_MAX_FDS)
				fds[(*nfds)++] = fd;
			else
				close(fd);
		}
	}
	if (r == 0)
		return -ECONNRESET;
	if (r < 0)
		return -errno;
	if (r != VHU_HDR_SIZE || (mh.msg_flags & MSG_CTRUNC))
		return -EPROTO;
	if ((m->flags & 0x3) != VHU_VERSION || m->size > VHU_MAX_PAYLOAD)
		return -EPROTO;
	if (m->size) {
		r = recv(d->fd, m->raw, m->size, MSG_WAITALL);
		if (r != (ssize_t)m->size)
			return r < 0 ? -errno : -EPROTO;
	}
	return 0;
}

/* The queue index of a state/fd message, checked. */
static int vring_index(const struct vhu_msg *m, uint32_t need, uint32_t idx, unsigned *out)
{
	if (m->size < need || (idx & VHU_VRING_IDX) >= CMX_VHU_MAX_QUEUES)
		return -EINVAL;
	*out = idx & VHU_VRING_IDX;
	return 0;
}

static int handle(struct cmx_vhu_dev *d, struct vhu_msg *m, int *fds, unsigned *nfds)
{
	struct cmx_vhu_vring *v;
	unsigned i;
	int e;

	switch (m->request) {
	case VHU_GET_FEATURES:
		m->u64 = d->features;
		return reply(d, m, 8);
	case VHU_SET_FEATURES:
		if (m->size < 8 || (m->u64 & ~d->features))
			return -EINVAL;
		d->acked_features = m->u64;
		/* Without protocol features a ring runs as soon as it is kicked. */
		for (i = 0; i < CMX_VHU_MAX_QUEUES; i++)
			if (!(m->u64 & VHU_F_PROTOCOL_FEATURES))
				d->vring[i].enabled = 1;
		return 0;
	case VHU_GET_PROTOCOL_FEATURES:
		m->u64 = VHU_PROTOCOLS;
		return reply(d, m, 8);
	case VHU_SET_PROTOCOL_FEATURES:
		if (m->size < 8 || (m->u64 & ~VHU_PROTOCOLS))
			return -EINVAL;
		d->acked_protocol = m->u64;
		return 0;
	case VHU_SET_OWNER:
		return 0;
	case VHU_RESET_OWNER:
		for (i = 0; i < CMX_VHU_MAX_QUEUES; i++)
			vring_stop(d, i);
		return 0;
	case VHU_GET_QUEUE_NUM:
		m->u64 = CMX_VHU_MAX_QUEUES;
		return reply(d, m, 8);
	case VHU_SET_MEM_TABLE:
		e = set_mem_table(d, m, fds, *nfds);
		return e;
	case VHU_SET_VRING_NUM:
		if ((e = vring_index(m, 8, m->state.index, &i)))
			return e;
		if (d->vring[i].started || !m->state.num || m->state.num > CMX_VIRTQ_MAX_SIZE ||
		    (m->state.num & (m->state.num - 1)))
			return -EINVAL;
		d->vring[i].num = m->state.num;
		return 0;
	case VHU_SET_VRING_BASE:
		if ((e = vring_index(m, 8, m->state.index, &i)))
			return e;
		if (d->vring[i].started || m->state.num > 0xffff)
			return -EINVAL;
		d->vring[i].base = (uint16_t)m->state.num;
		return 0;
	case VHU_SET_VRING_ADDR:
		if ((e = vring_index(m, sizeof(m->addr), m->addr.index, &i)))
			return e;
		v = &d->vring[i];
		/* A running ring's addresses stay; the front end sends them
		 * again to turn its logging on or off (a migration's start and
		 * end). */
		if (v->started && (v->desc_uva != m->addr.desc || v->avail_uva != m->addr.avail ||
				   v->used_uva != m->addr.used))
			return -EINVAL;
		v->desc_uva = m->addr.desc;
		v->avail_uva = m->addr.avail;
		v->used_uva = m->addr.used;
		v->addr_flags = m->addr.flags;
		v->log_gpa = m->addr.log;
		if (v->started)
			vring_log_set(d, i);
		return 0;
	case VHU_SET_LOG_BASE:
		return set_log_base(d, m, fds, *nfds);
	case VHU_SET_LOG_FD:
		/* The eventfd of the log's updates: not used (fds closed). */
		return 0;
	case VHU_GET_VRING_BASE:
		if ((e = vring_index(m, 8, m->state.index, &i)))
			return e;
		vring_stop(d, i);
		/* Stopped until kicked anew: the front end sends a fresh kick fd. */
		close_fd(&d->vring[i].kick_fd);
		m->state.num = d->vring[i].base;
		e = reply(d, m, 8);
		if (!e && d->ops->stopped && !d->vring[0].started && !d->vring[1].started)
			d->ops->stopped(d);
		return e;
	case VHU_SET_VRING_KICK:
	case VHU_SET_VRING_CALL:
	case VHU_SET_VRING_ERR:
		if ((e = vring_index(m, 8, (uint32_t)m->u64, &i)))
			return e;
		/* Polling mode (no fd) is not offered. */
		if ((m->u64 & VHU_VRING_NOFD) || *nfds != 1)
			return -EINVAL;
		v = &d->vring[i];
		if (m->request == VHU_SET_VRING_KICK) {
			vring_stop(d, i);
			close_fd(&v->kick_fd);
			v->kick_fd = fds[0];
		} else if (m->request == VHU_SET_VRING_CALL) {
			close_fd(&v->call_fd);
			v->call_fd = fds[0];
		} else {
			close_fd(&v->err_fd);
			v->err_fd = fds[0];
		}
		*nfds = 0; /* kept */
		return m->request == VHU_SET_VRING_KICK ? vring_try_start(d, i) : 0;
	case VHU_SET_VRING_ENABLE:
		if ((e = vring_index(m, 8, m->state.index, &i)))
			return e;
		d->vring[i].enabled = m->state.num != 0;
		if (!d->vring[i].enabled) {
			vring_stop(d, i);
			return 0;
		}
		return vring_try_start(d, i);
	case VHU_GET_CONFIG: {
		uint32_t off = m->config.offset, size = m->config.size;
		if (m->size < 12 || size > CMX_VHU_MAX_CONFIG || m->size < 12 + size)
			return -EINVAL;
		memset(m->config.data, 0, size);
		if (off < d->config_len)
			memcpy(m->config.data, d->config + off,
			       size < d->config_len - off ? size : d->config_len - off);
		return reply(d, m, 12 + size);
	}
	case VHU_SET_CONFIG:
		return 0; /* the vsock config (the CID) is ours, not the guest's */
	default:
		cmx_warn("vhost-user: request %u not supported", m->request);
		return -EOPNOTSUPP;
	}
}

int cmx_vhu_dev_handle(struct cmx_vhu_dev *d)
{
	struct vhu_msg m;
	int fds[VHU_MAX_FDS];
	unsigned nfds;
	int e;

	if (d->broken)
		return -EIO;
	m.request = 0;
	e = read_msg(d, &m, fds, &nfds);
	if (!e) {
		e = handle(d, &m, fds, &nfds);
		/* fds of a message handled without keeping them, or of
		 * set_mem_table (mapped, no longer needed). */
	}
	for (unsigned i = 0; i < nfds; i++)
		close(fds[i]);
	if (e) {
		if (e != -ECONNRESET)
			cmx_warn("vhost-user: request %u: %s; device stops", m.request, strerror(-e));
		d->broken = 1;
	}
	return e;
}

void cmx_vhu_call(struct cmx_vhu_dev *d, unsigned idx)
{
	uint64_t one = 1;

	if (idx < CMX_VHU_MAX_QUEUES && d->vring[idx].call_fd >= 0 &&
	    write(d->vring[idx].call_fd, &one, sizeof(one)) < 0) {
		/* An eventfd write fails only when its counter is saturated:
		 * the front end has a pending signal anyway. */
	}
}
