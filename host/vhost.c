// SPDX-License-Identifier: MIT
// clmuxd as a VM's vsock device: the vhost-user socket and the kick fds on
// the io_uring loop, and each guest stream to the host's clmux port a
// session whose bytes move between the virtqueues and host/conn.c's parser
// with no host socket in between.
#include "vhost.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "addr.h"
#include "conn.h"
#include "log.h"
#include "vhost_user.h"
#include "vsock_dev.h"

#define VSOCK_RX 0
#define VSOCK_TX 1
#define MAX_VHOST 16

struct vm;

/* One vhost-user socket: one VM at a time. */
struct vlistener {
	struct cmx_io io;
	int fd;
	char path[108];
	uint64_t cid;
	uint32_t port;
	char tenant[64];
	int inherited; /* fd=: the front end made the socket and keeps its file */
	struct vm *vm;
	struct cmx_server *srv;
};

/* The server's vhost-user sockets (srv->vhost): made at the first listen,
 * freed once the loop is gone (cmx_vhost_destroy()). */
struct cmx_vhost {
	struct vlistener l[MAX_VHOST];
	unsigned n;
};

/* A read in flight on a kick eventfd; stale once gen moves on. */
struct kick {
	struct cmx_io io;
	struct vm *vm;
	unsigned idx, gen;
	uint64_t val;
};

/* A guest stream to clmux's port and the connection it feeds. */
struct chan {
	struct vm *vm;
	struct cmx_vsock_stream *st; /* NULL once the guest side is gone */
	struct cmx_conn *conn;	     /* NULL once the connection is gone */
	struct chan *next_dead;
	/* Bytes the connection did not take yet (it holds input back): kept
	 * here, uncredited, so the guest's vsock window bounds them. */
	uint8_t *kept;
	size_t nkept;
};

struct vm {
	struct vlistener *l;
	struct cmx_vhu_dev vhu;
	struct cmx_vsock_dev vsock;
	struct cmx_io sock_io;
	struct kick *kick[CMX_VHU_MAX_QUEUES];
	unsigned kick_gen[CMX_VHU_MAX_QUEUES];
	struct chan *dead; /* freed when the current entry point returns */
	int refs, dead_vm, busy;
};


int cmx_vhost_is_spec(const char *spec)
{
	return !strncmp(spec, "vhost-user-vsock:", 17);
}

static void vm_put(struct vm *vm)
{
	if (--vm->refs)
		return;
	free(vm);
}

static void vm_destroy(struct vm *vm, const char *why);

/* Signals the queues we used. */
static void vm_signal(struct vm *vm)
{
	if (vm->vsock.rx_pushed && cmx_virtq_should_notify(&vm->vhu.vring[VSOCK_RX].q))
		cmx_vhu_call(&vm->vhu, VSOCK_RX);
	if (vm->vsock.tx_pushed && cmx_virtq_should_notify(&vm->vhu.vring[VSOCK_TX].q))
		cmx_vhu_call(&vm->vhu, VSOCK_TX);
	vm->vsock.rx_pushed = vm->vsock.tx_pushed = 0;
}

static void vm_destroy_posted(void *arg)
{
	struct vm *vm = arg;

	if (!vm->dead_vm)
		vm_destroy(vm, "the guest broke the vsock protocol");
	vm_put(vm);
}

static void chan_free(struct chan *ch)
{
	free(ch->kept);
	free(ch);
}

/* After every entry point from the loop: signal the queues, free dead
 * chans, end a device the guest broke. */
static void vm_settle(struct vm *vm)
{
	vm_signal(vm);
	while (vm->dead) {
		struct chan *ch = vm->dead;
		vm->dead = ch->next_dead;
		chan_free(ch);
	}
	if (vm->vsock.broken && !vm->dead_vm)
		vm_destroy(vm, "the guest broke the vsock protocol");
}

/* ---- the connection's side of a stream ---- */

static long chan_write(void *ctx, const struct iovec *iov, int n)
{
	struct chan *ch = ctx;
	size_t len = 0;
	long w;

	if (!ch->st)
		return -EPIPE;
	for (int i = 0; i < n; i++)
		len += iov[i].iov_len;
	w = cmx_vsock_stream_write(&ch->vm->vsock, ch->st, iov, (unsigned)n, len);
	if (!ch->vm->busy) {
		/* Called from deep in a connection: the device may not end here. */
		vm_signal(ch->vm);
		if (ch->vm->vsock.broken && !ch->vm->dead_vm) {
			ch->vm->refs++;
			cmx_loop_post(ch->vm->l->srv->loop, vm_destroy_posted, ch->vm);
		}
	}
	return w;
}

static void chan_close(void *ctx)
{
	struct chan *ch = ctx;
	struct vm *vm = ch->vm;

	if (!ch->conn)
		return; /* the guest side ended it */
	ch->conn = NULL;
	if (ch->st)
		cmx_vsock_stream_close(&vm->vsock, ch->st);
	ch->st = NULL;
	if (vm->busy) {
		/* The device's caller may still look at ch: freed on settling. */
		ch->next_dead = vm->dead;
		vm->dead = ch;
	} else {
		vm_signal(vm);
		chan_free(ch);
	}
}

/* The connection takes input again: what it left is offered first, and
 * what it takes is credited to the guest. */
static void chan_resume(void *ctx)
{
	struct chan *ch = ctx;
	size_t n;

	if (!ch->conn || !ch->st || !ch->nkept)
		return;
	n = cmx_conn_input(ch->conn, ch->kept, ch->nkept);
	if (!ch->st)
		return; /* ended meanwhile */
	memmove(ch->kept, ch->kept + n, ch->nkept - n);
	ch->nkept -= n;
	cmx_vsock_stream_credit(&ch->vm->vsock, ch->st, (uint32_t)n);
	if (!ch->vm->busy)
		vm_signal(ch->vm);
}

static const struct cmx_conn_mover chan_mover = {
    .write = chan_write, .close = chan_close, .resume = chan_resume};

/* ---- the device's side ---- */

static int vs_accept(void *ctx, struct cmx_vsock_stream *st)
{
	struct vm *vm = ctx;
	struct chan *ch;

	if (st->host_port != vm->l->port || vm->l->srv->draining)
		return -ECONNREFUSED;
	ch = calloc(1, sizeof(*ch));
	if (!ch)
		return -ENOMEM;
	ch->vm = vm;
	ch->st = st;
	ch->conn = cmx_conn_create_moved(vm->l->srv, &chan_mover, ch, (uint32_t)vm->l->cid,
					  vm->l->tenant[0] ? vm->l->tenant : NULL);
	if (!ch->conn) {
		chan_free(ch);
		return -ENOMEM;
	}
	st->user = ch;
	return 0;
}

/* Keeps len bytes of iov at off the connection did not take; the device
 * bounds them by the stream's window (CMX_VSOCK_BUF_ALLOC). */
static int chan_keep(struct chan *ch, const struct iovec *iov, unsigned n, size_t off, size_t len)
{
	uint8_t *k;

	if (!ch->kept) {
		k = malloc(CMX_VSOCK_BUF_ALLOC);
		if (!k)
			return -ENOMEM;
		ch->kept = k;
	}
	if (len > CMX_VSOCK_BUF_ALLOC - ch->nkept)
		return -EMSGSIZE;
	ch->nkept += cmx_iov_read(iov, n, off, ch->kept + ch->nkept, len);
	return 0;
}

static size_t vs_data(void *ctx, struct cmx_vsock_stream *st, const struct iovec *iov, unsigned n,
		      size_t off, size_t len)
{
	struct chan *ch = st->user;
	size_t took = 0, pos = off, base = 0;
	unsigned i = 0;

	/* Behind bytes kept already, everything is kept: order holds. */
	while (len && ch->conn && !ch->nkept && i < n) {
		size_t k, t;
		if (pos >= base + iov[i].iov_len) {
			base += iov[i].iov_len;
			i++;
			continue;
		}
		k = base + iov[i].iov_len - pos;
		if (k > len)
			k = len;
		t = cmx_conn_input(ch->conn, (char *)iov[i].iov_base + (pos - base), k);
		took += t;
		pos += t;
		len -= t;
		if (t < k)
			break;
	}
	if (!len || !ch->conn)
		return took + len; /* a connection gone takes what is left */
	if (chan_keep(ch, iov, n, pos, len))
		cmx_conn_kill(ch->conn, "out of memory keeping its input");
	return took;
}

static void vs_closed(void *ctx, struct cmx_vsock_stream *st)
{
	struct vm *vm = ctx;
	struct chan *ch = st->user;
	struct cmx_conn *c = ch->conn;

	ch->st = NULL;
	ch->conn = NULL;
	if (c)
		cmx_conn_kill(c, "guest closed the stream");
	ch->next_dead = vm->dead;
	vm->dead = ch;
}

static void vs_writable(void *ctx, struct cmx_vsock_stream *st)
{
	struct chan *ch = st->user;

	if (ch->conn)
		cmx_conn_tx_ready(ch->conn);
}

static const struct cmx_vsock_ops vs_ops = {
	.accept = vs_accept, .data = vs_data, .closed = vs_closed, .writable = vs_writable,
};

/* ---- the loop ---- */

static void kick_arm(struct vm *vm, struct kick *k)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(vm->l->srv->loop, &k->io);

	io_uring_prep_read(sqe, vm->vhu.vring[k->idx].kick_fd, &k->val, sizeof(k->val), 0);
	vm->refs++;
}

static void kick_done(struct cmx_io *io, int res, unsigned flags)
{
	struct kick *k = (struct kick *)io;
	struct vm *vm = k->vm;

	if (vm->dead_vm || k->gen != vm->kick_gen[k->idx] || res < 0) {
		if (vm->kick[k->idx] == k)
			vm->kick[k->idx] = NULL;
		free(k);
		vm_put(vm);
		return;
	}
	vm->busy = 1;
	if (k->idx == VSOCK_TX)
		cmx_vsock_dev_tx(&vm->vsock);
	else
		cmx_vsock_dev_rx(&vm->vsock);
	vm->busy = 0;
	vm_settle(vm);
	if (!vm->dead_vm && k->gen == vm->kick_gen[k->idx])
		kick_arm(vm, k);
	else
		free(k);
	vm_put(vm);
}

static void vhu_queue_state(struct cmx_vhu_dev *d, unsigned idx, int running)
{
	struct vm *vm = d->user;
	struct kick *k;

	vm->kick_gen[idx]++;
	if (vm->kick[idx]) {
		/* Its completion (-ECANCELED) frees it. */
		io_uring_prep_cancel64(cmx_loop_sqe(vm->l->srv->loop, NULL),
				       (uint64_t)(uintptr_t)&vm->kick[idx]->io, 0);
		vm->kick[idx] = NULL;
	}
	if (!running || vm->dead_vm)
		return;
	k = calloc(1, sizeof(*k));
	if (!k) {
		vm_destroy(vm, "out of memory");
		return;
	}
	k->io.cb = kick_done;
	k->vm = vm;
	k->idx = idx;
	k->gen = vm->kick_gen[idx];
	vm->kick[idx] = k;
	kick_arm(vm, k);
	/* The guest may have queued before the ring was ours. */
	if (idx == VSOCK_TX && vm->vhu.vring[VSOCK_RX].started)
		cmx_vsock_dev_tx(&vm->vsock);
}

/* The guest reset or shut down its device: its connections are gone, and
 * the sessions they carried close (a rebooted guest starts afresh). */
static void vhu_stopped(struct cmx_vhu_dev *d)
{
	struct vm *vm = d->user;

	if (vm->vsock.streams)
		cmx_info("vhost-user-vsock %s: device stopped; closing the guest's sessions",
			 vm->l->path);
	cmx_vsock_dev_fini(&vm->vsock);
}

static const struct cmx_vhu_ops vhu_ops = { .queue_state = vhu_queue_state,
					    .stopped = vhu_stopped };

static void sock_arm(struct vm *vm)
{
	io_uring_prep_poll_add(cmx_loop_sqe(vm->l->srv->loop, &vm->sock_io), vm->vhu.fd, POLLIN);
	vm->refs++;
}

static void sock_done(struct cmx_io *io, int res, unsigned flags)
{
	struct vm *vm = (struct vm *)((char *)io - offsetof(struct vm, sock_io));
	int e;

	if (vm->dead_vm || res < 0) {
		if (!vm->dead_vm)
			vm_destroy(vm, strerror(-res));
		vm_put(vm);
		return;
	}
	vm->busy = 1;
	e = cmx_vhu_dev_handle(&vm->vhu);
	vm->busy = 0;
	vm_settle(vm);
	if (e)
		vm_destroy(vm, e == -ECONNRESET ? "the VMM disconnected" : strerror(-e));
	else if (!vm->dead_vm)
		sock_arm(vm);
	vm_put(vm);
}

static void vm_destroy(struct vm *vm, const char *why)
{
	uint64_t objects = vm->l->srv->objects, bytes = vm->l->srv->bytes;

	if (vm->dead_vm)
		return;
	vm->dead_vm = 1;
	vm->l->vm = NULL;
	vm->busy = 1;
	/* Every session of the VM closes and returns what it held. */
	cmx_vsock_dev_fini(&vm->vsock);
	io_uring_prep_cancel64(cmx_loop_sqe(vm->l->srv->loop, NULL), (uint64_t)(uintptr_t)&vm->sock_io,
			       0);
	cmx_vhu_dev_fini(&vm->vhu); /* cancels the kick reads through queue_state */
	vm->busy = 0;
	while (vm->dead) {
		struct chan *ch = vm->dead;
		vm->dead = ch->next_dead;
		chan_free(ch);
	}
	/* Its sessions are closed: what they held is returned by now. */
	cmx_info("vhost-user-vsock %s: VM with CID %" PRIu64 " gone: %s; its sessions returned %" PRIu64
		 " objects, %" PRIu64 " bytes; daemon holds %" PRIu64 " objects, %" PRIu64 " bytes",
		 vm->l->path, vm->l->cid, why, objects - vm->l->srv->objects, bytes - vm->l->srv->bytes,
		 vm->l->srv->objects, vm->l->srv->bytes);
	vm_put(vm);
}

static void accept_done(struct cmx_io *io, int res, unsigned flags)
{
	struct vlistener *l = (struct vlistener *)io;
	uint8_t config[8];
	struct vm *vm;

	if (res >= 0) {
		if (l->srv->draining || l->vm || !(vm = calloc(1, sizeof(*vm)))) {
			cmx_warn("vhost-user-vsock %s: %s", l->path,
				 l->vm ? "a VM already uses this socket" : "refusing a VMM");
			close(res);
		} else {
			/* The device config space is the guest's CID (le64). */
			memcpy(config, &l->cid, sizeof(config));
			vm->l = l;
			vm->refs = 1;
			vm->sock_io.cb = sock_done;
			cmx_vhu_dev_init(&vm->vhu, res, 0, config, sizeof(config), &vhu_ops, vm);
			cmx_vsock_dev_init(&vm->vsock, l->cid, &vm->vhu.vring[VSOCK_RX].q,
					   &vm->vhu.vring[VSOCK_TX].q, &vs_ops, vm);
			l->vm = vm;
			cmx_info("vhost-user-vsock %s: VMM connected (guest CID %" PRIu64 ")", l->path,
				 l->cid);
			sock_arm(vm);
		}
	}
	if (!(flags & IORING_CQE_F_MORE) && !l->srv->draining && l->fd >= 0)
		io_uring_prep_multishot_accept(cmx_loop_sqe(l->srv->loop, &l->io), l->fd, NULL, NULL,
					       SOCK_CLOEXEC);
}

int cmx_vhost_listen(struct cmx_server *srv, const char *spec, char *err, size_t errlen)
{
	struct cmx_vhost *vh = srv->vhost ? srv->vhost : calloc(1, sizeof(*vh));
	struct vlistener *l;
	struct cmx_addr a;
	struct cmx_addr_perm perm;
	char val[64], unix_spec[300];
	uint64_t num;

	if (!vh) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	srv->vhost = vh;
	l = &vh->l[vh->n];
	if (vh->n == MAX_VHOST) {
		snprintf(err, errlen, "too many vhost-user-vsock listeners");
		return -EINVAL;
	}
	snprintf(unix_spec, sizeof(unix_spec), "unix:%s", spec + 17);
	if (cmx_addr_parse(unix_spec, &a, err, errlen))
		return -EINVAL;
	/* A typo in an option is reported, not ignored. */
	for (const char *p = a.opts; (p = strchr(p, ',')); ) {
		size_t n = strcspn(++p, "=,");
		if (!((n == 3 && !strncmp(p, "cid", 3)) || (n == 4 && !strncmp(p, "port", 4)) ||
		      (n == 6 && !strncmp(p, "tenant", 6)) || (n == 4 && !strncmp(p, "mode", 4)) ||
		      (n == 5 && !strncmp(p, "group", 5)) || (n == 2 && !strncmp(p, "fd", 2)))) {
			snprintf(err, errlen,
				 "unknown option '%.*s' (cid, port, tenant, mode, group, fd)", (int)n,
				 p);
			return -EINVAL;
		}
	}
	if (cmx_addr_perm(&a, &perm, err, errlen))
		return -EINVAL;
	if (cmx_addr_opt(&a, "cid", val, sizeof(val)) ||
	    cmx_uint_parse(val, 3, UINT32_MAX, &num)) {
		snprintf(err, errlen, "needs cid=N (3 or more): %s", spec);
		return -EINVAL;
	}
	l->cid = num;
	l->port = CMX_VSOCK_PORT;
	if (!cmx_addr_opt(&a, "port", val, sizeof(val))) {
		if (cmx_uint_parse(val, 1, UINT32_MAX, &num)) {
			snprintf(err, errlen, "bad port in %s", spec);
			return -EINVAL;
		}
		l->port = (uint32_t)num;
	}
	/* tenant=NAME: the VM is NAME's; else its CID decides (host/tenant.c). */
	if (cmx_addr_opt(&a, "tenant", l->tenant, sizeof(l->tenant)))
		l->tenant[0] = '\0';
	else if (!cmx_tenant_get(&srv->tenants, l->tenant)) {
		snprintf(err, errlen, "bad tenant name in %s", spec);
		return -EINVAL;
	}
	/* fd=N: a socket listening already, made by the front end before QEMU
	 * started (host/libvirt.c); its file is the front end's. */
	l->inherited = !cmx_addr_opt(&a, "fd", val, sizeof(val));
	if (l->inherited) {
		int on = 0;
		socklen_t len = sizeof(on);
		uint64_t fd = 0;
		l->fd = cmx_uint_parse(val, 3, INT_MAX, &fd) ? -1 : (int)fd;
		if (l->fd < 3 || getsockopt(l->fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) || !on) {
			snprintf(err, errlen, "fd=%s is no listening socket", val);
			return -EINVAL;
		}
		fcntl(l->fd, F_SETFD, FD_CLOEXEC);
	} else {
		l->fd = cmx_addr_listen(&a);
	}
	if (l->fd < 0) {
		snprintf(err, errlen, "cannot listen on %s: %s", a.path, strerror(-l->fd));
		return l->fd;
	}
	strcpy(l->path, a.path);
	l->srv = srv;
	l->io.cb = accept_done;
	vh->n++;
	io_uring_prep_multishot_accept(cmx_loop_sqe(srv->loop, &l->io), l->fd, NULL, NULL,
				       SOCK_CLOEXEC);
	cmx_info("listening on vhost-user-vsock:%s (guest CID %" PRIu64 ", port %u)", l->path,
		 l->cid, l->port);
	return 0;
}

void cmx_vhost_drain(struct cmx_server *srv)
{
	for (unsigned i = 0; srv->vhost && i < srv->vhost->n; i++) {
		struct vlistener *l = &srv->vhost->l[i];
		if (l->fd < 0)
			continue;
		io_uring_prep_cancel_fd(cmx_loop_sqe(l->srv->loop, NULL), l->fd, 0);
		close(l->fd);
		if (!l->inherited)
			unlink(l->path);
		l->fd = -1;
		if (l->vm)
			vm_destroy(l->vm, "daemon stopping");
	}
}

void cmx_vhost_destroy(struct cmx_server *srv)
{
	free(srv->vhost);
	srv->vhost = NULL;
}
