// SPDX-License-Identifier: MIT
// Listening sockets: options of each --listen form, accepting on the loop.
#include "listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "activation.h"
#include "auth.h"
#include "conn.h"
#include "log.h"
#include "server.h"
#include "tls.h"

/* Which options each transport takes; anything else is a typo to report. */
static int opt_known(enum cmx_addr_type t, const char *key, size_t n)
{
	static const char *const common[] = { "tokens", "tenant" };
	static const char *const uds[] = { "cid", "mode", "group" };
	static const char *const unix_only[] = { "mode", "group" };
	static const char *const tcp[] = { "tls" };

	for (size_t i = 0; i < sizeof(common) / sizeof(common[0]); i++)
		if (strlen(common[i]) == n && !strncmp(common[i], key, n))
			return 1;
	if (t == CMX_ADDR_VSOCK_UDS)
		for (size_t i = 0; i < sizeof(uds) / sizeof(uds[0]); i++)
			if (strlen(uds[i]) == n && !strncmp(uds[i], key, n))
				return 1;
	if (t == CMX_ADDR_UNIX)
		for (size_t i = 0; i < sizeof(unix_only) / sizeof(unix_only[0]); i++)
			if (strlen(unix_only[i]) == n && !strncmp(unix_only[i], key, n))
				return 1;
	if (t == CMX_ADDR_TCP)
		for (size_t i = 0; i < sizeof(tcp) / sizeof(tcp[0]); i++)
			if (strlen(tcp[i]) == n && !strncmp(tcp[i], key, n))
				return 1;
	return 0;
}

static int check_opts(const struct cmx_addr *a, char *err, size_t errlen)
{
	for (const char *p = a->opts; (p = strchr(p, ',')); ) {
		size_t n = strcspn(++p, "=,");
		if (!opt_known(a->type, p, n)) {
			snprintf(err, errlen, "unknown option '%.*s'", (int)n, p);
			return -EINVAL;
		}
	}
	return 0;
}

int cmx_listener_init(struct cmx_listener *l, const char *spec, char *err, size_t errlen)
{
	static const enum cmx_peer_kind kinds[] = {
		[CMX_ADDR_UNIX] = CMX_PEER_UNIX,
		[CMX_ADDR_VSOCK] = CMX_PEER_VSOCK,
		[CMX_ADDR_VSOCK_UDS] = CMX_PEER_VSOCK_UDS,
		[CMX_ADDR_TCP] = CMX_PEER_TCP,
	};
	struct cmx_addr_perm perm;
	char val[256];
	int e;

	memset(l, 0, sizeof(*l));
	l->fd = -1;
	l->cid = CMX_PEER_CID_NONE;
	e = cmx_addr_parse(spec, &l->addr, err, errlen);
	if (!e)
		e = check_opts(&l->addr, err, errlen);
	if (e)
		return e;
	l->kind = kinds[l->addr.type];
	cmx_addr_str(&l->addr, l->name, sizeof(l->name));
	if (l->addr.type == CMX_ADDR_VSOCK && l->addr.cid != CMX_VSOCK_CID_ANY) {
		snprintf(err, errlen, "listen on vsock:PORT (any CID), not a CID and a port");
		return -EINVAL;
	}
	if (l->addr.tls) {
		snprintf(err, errlen, "listen with tcp:ADDR:PORT,tokens=FILE,tls=CERT:KEY");
		return -EINVAL;
	}
	if (l->addr.type == CMX_ADDR_TCP) {
		struct in6_addr ip;
		if (inet_pton(AF_INET, l->addr.host, &ip) != 1 &&
		    inet_pton(AF_INET6, l->addr.host, &ip) != 1) {
			snprintf(err, errlen, "listen on an IPv4 or IPv6 address, not a name");
			return -EINVAL;
		}
	}
	/* mode= and group= are applied when the socket is made (transport/addr.c). */
	if (cmx_addr_perm(&l->addr, &perm, err, errlen))
		return -EINVAL;
	if (!cmx_addr_opt(&l->addr, "cid", val, sizeof(val))) {
		uint64_t cid;
		if (cmx_uint_parse(val, 3, CMX_PEER_CID_NONE - 1, &cid)) {
			snprintf(err, errlen, "cid=%s: a guest CID is a number from 3", val);
			return -EINVAL;
		}
		l->cid = (uint32_t)cid;
	}
	e = cmx_addr_opt(&l->addr, "tls", val, sizeof(val));
	if (e != -ENOENT) {
		if (!e)
			e = cmx_tls_ctx_create(&l->tls, val, err, errlen);
		else
			snprintf(err, errlen, "tls=CERT:KEY: file names too long");
		if (e)
			return e;
	}
	e = cmx_addr_opt(&l->addr, "tokens", val, sizeof(val));
	if (e == -ENOENT && l->addr.type == CMX_ADDR_TCP) {
		snprintf(err, errlen, "tcp needs tokens=FILE: every connection is authenticated");
		return -EINVAL;
	}
	if (e == -ENOENT)
		return 0;
	if (e || !*val) {
		snprintf(err, errlen, "tokens=FILE: bad file name");
		return -EINVAL;
	}
	e = cmx_auth_create(&l->auth);
	if (!e)
		e = cmx_auth_load(l->auth, val, err, errlen);
	if (e) {
		if (e == -ENOMEM)
			snprintf(err, errlen, "out of memory");
		cmx_auth_destroy(l->auth);
		l->auth = NULL;
	}
	return e;
}

static void accept_arm(struct cmx_listener *l)
{
	struct io_uring_sqe *sqe = cmx_loop_sqe(l->srv->loop, &l->io);

	io_uring_prep_multishot_accept(sqe, l->fd, NULL, NULL, SOCK_CLOEXEC);
}

static void accept_done(struct cmx_io *io, int res, unsigned flags)
{
	struct cmx_listener *l = (struct cmx_listener *)io;
	struct cmx_server *srv = l->srv;

	if (res >= 0) {
		if (srv->draining || l->fd < 0)
			close(res);
		else if (l->tls ? cmx_tls_accept(srv, res, l) : cmx_conn_accept(srv, res, l))
			cmx_err("out of memory accepting a connection");
	} else if (res != -ECANCELED && !srv->draining) {
		cmx_warn("accept on %s: %s", l->name, strerror(-res));
	}
	if (!(flags & IORING_CQE_F_MORE) && !srv->draining && l->fd >= 0)
		accept_arm(l);
}

int cmx_listener_bind(struct cmx_listener *l)
{
	/* The service manager's socket on this path: it outlives the daemon,
	 * so its file is never removed here. */
	l->fd = cmx_activation_take(&l->addr);
	if (l->fd >= 0) {
		l->inherited = 1;
		return 0;
	}
	l->fd = cmx_addr_listen(&l->addr);
	if (l->fd < 0) {
		const char *hint = "";
		int e = l->fd;
		if (l->addr.type == CMX_ADDR_VSOCK &&
		    (e == -EAFNOSUPPORT || e == -EADDRNOTAVAIL || e == -ENODEV))
			hint = " (AF_VSOCK needs the host kernel's vhost_vsock module; with a "
			       "Firecracker or Cloud Hypervisor guest use vsock-uds:UDS_PORT)";
		cmx_err("cannot listen on %s: %s%s", l->name, strerror(-e), hint);
		l->fd = -1;
		return e;
	}
	return 0;
}

int cmx_listener_start(struct cmx_server *srv, struct cmx_listener *l)
{
	int e;

	l->srv = srv;
	if (l->fd < 0 && (e = cmx_listener_bind(l)))
		return e;
	l->io.cb = accept_done;
	accept_arm(l);
	cmx_info("listening on %s%s%s%s", l->name, l->tls ? " (TLS)" : "",
		 l->auth ? " (tokens required)" : "",
		 l->cid != CMX_PEER_CID_NONE ? " for one guest" : "");
	return 0;
}

void cmx_listener_close(struct cmx_server *srv, struct cmx_listener *l)
{
	if (l->fd < 0)
		return;
	/* By the request, not the fd: the fd is closed before the cancel is
	 * submitted, and a cancel by a closed fd finds nothing, leaving the
	 * multishot accept armed on the socket (a retiring worker then went
	 * on taking connections, host/worker.c). */
	io_uring_prep_cancel64(cmx_loop_sqe(srv->loop, NULL), (uint64_t)(uintptr_t)&l->io, 0);
	close(l->fd);
	if (!l->inherited && (l->addr.type == CMX_ADDR_UNIX || l->addr.type == CMX_ADDR_VSOCK_UDS))
		unlink(l->addr.path);
	l->fd = -1;
}

void cmx_listener_fini(struct cmx_listener *l)
{
	cmx_auth_destroy(l->auth);
	l->auth = NULL;
	cmx_tls_ctx_destroy(l->tls);
	l->tls = NULL;
}
