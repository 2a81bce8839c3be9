// SPDX-License-Identifier: MIT
// Reaching clmuxd: configuration, connecting a channel, the Auth exchange.
#include "dial.h"

#include <CL/cl.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "compress.h"
#include "ivshmem.h"
#include "log.h"
#include "proto.gen.h"
#include "tls.h"

int cmx_conf_get(const char *key, char *buf, size_t len)
{
	size_t klen = strlen(key);
	char line[512];
	int e = -ENOENT;
	FILE *f = fopen(CMX_CLIENT_CONF, "re");

	if (!f)
		return -ENOENT;
	while (e && fgets(line, sizeof(line), f)) {
		char *v = line + strspn(line, " \t");
		if (strncmp(v, key, klen) || !strchr(" \t=", v[klen]))
			continue;
		v += klen;
		v += strspn(v, " \t=");
		v[strcspn(v, " \t\r\n#")] = '\0';
		if (*v && strlen(v) < len) {
			strcpy(buf, v);
			e = 0;
		}
	}
	explicit_bzero(line, sizeof(line));
	fclose(f);
	return e;
}

const char *cmx_dial_server(char *buf, size_t len)
{
	const char *env = getenv("CLMUX_SERVER");

	if (env && *env)
		return env;
	if (!cmx_conf_get("server", buf, len))
		return buf;
	/* A VM: a clmux region on an ivshmem device was put there for us;
	 * else vsock. */
	if (access(CMX_DEFAULT_UNIX, F_OK) && !cmx_givs_discover(buf, len))
		return buf;
	if (access(CMX_DEFAULT_UNIX, F_OK) && !access("/dev/vsock", F_OK))
		snprintf(buf, len, "vsock:%u:%u", CMX_VSOCK_CID_HOST, CMX_VSOCK_PORT);
	else
		snprintf(buf, len, "unix:%s", CMX_DEFAULT_UNIX);
	return buf;
}

/*
 * The TLS link of each channel dialled with tls:, by socket. A process has
 * one session, so two channels; the table has room for a reconnect's too.
 * A slot is filled before its socket is handed out and emptied after the
 * last call on it, so lookups need no lock.
 */
#define LINKS 8
static struct {
	_Atomic int fd; /* -1 (after first use) or 0 with t NULL: free */
	struct cmx_tls *t;
} links[LINKS];
static char dial_why[200];

static struct cmx_tls *link_of(int fd)
{
	for (int i = 0; i < LINKS; i++)
		if (links[i].t && atomic_load(&links[i].fd) == fd)
			return links[i].t;
	return NULL;
}

static int link_add(int fd, struct cmx_tls *t)
{
	for (int i = 0; i < LINKS; i++)
		if (!links[i].t) {
			atomic_store(&links[i].fd, fd);
			links[i].t = t;
			return 0;
		}
	return -EMFILE;
}

void cmx_dial_forked(void)
{
	for (int i = 0; i < LINKS; i++) {
		atomic_store(&links[i].fd, -1);
		links[i].t = NULL;
	}
}

void cmx_dial_close(int fd)
{
	if (fd < 0)
		return;
	for (int i = 0; i < LINKS; i++)
		if (links[i].t && atomic_load(&links[i].fd) == fd) {
			cmx_tls_free(links[i].t);
			atomic_store(&links[i].fd, -1);
			links[i].t = NULL;
		}
	close(fd);
}

ssize_t cmx_dial_sendmsg(int fd, const struct msghdr *mh)
{
	struct cmx_tls *t = link_of(fd);

	return t ? cmx_tls_send(t, mh->msg_iov, mh->msg_iovlen) : sendmsg(fd, mh, MSG_NOSIGNAL);
}

ssize_t cmx_dial_recvmsg(int fd, struct msghdr *mh, int flags)
{
	struct cmx_tls *t = link_of(fd);

	if (!t)
		return recvmsg(fd, mh, flags);
	mh->msg_controllen = 0;
	return cmx_tls_recv(t, mh->msg_iov[0].iov_base, mh->msg_iov[0].iov_len, 0);
}

ssize_t cmx_dial_recv(int fd, void *buf, size_t len, int flags)
{
	struct cmx_tls *t = link_of(fd);

	return t ? cmx_tls_recv(t, buf, len, flags & MSG_WAITALL) : recv(fd, buf, len, flags);
}

unsigned cmx_dial_compress(void)
{
	const char *env = getenv("CLMUX_COMPRESS");
	char conf[32];

	if (!env && !cmx_conf_get("compress", conf, sizeof(conf)))
		env = conf;
	if (env && !strcmp(env, "lz4"))
		return CMX_COMPRESS_LZ4;
	if (env && *env && strcmp(env, "none"))
		cmx_warn("compress=%s: expected lz4 or none; payloads go uncompressed", env);
	return 0;
}

const char *cmx_dial_strerror(int err)
{
	return dial_why[0] ? dial_why : strerror(-err);
}

int cmx_dial_send_all(int fd, struct iovec *iov, int n, uint64_t *writes)
{
	while (n) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)n };
		ssize_t w = cmx_dial_sendmsg(fd, &mh);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (writes)
			(*writes)++;
		while (n && (size_t)w >= iov->iov_len) {
			w -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n) {
			iov->iov_base = (char *)iov->iov_base + w;
			iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int cmx_dial_recv_all(int fd, void *p, uint64_t n)
{
	while (n) {
		ssize_t r = cmx_dial_recv(fd, p, n, MSG_WAITALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ECONNRESET;
		p = (char *)p + r;
		n -= (uint64_t)r;
	}
	return 0;
}

static int io_all(int fd, void *p, size_t n, int out)
{
	struct iovec iov = { p, n };

	return out ? cmx_dial_send_all(fd, &iov, 1, NULL) : cmx_dial_recv_all(fd, p, n);
}

/* Sends Auth and reads its Reply (status only). */
static int auth(int fd, const char *token)
{
	struct cmx_Auth_in in = { .token = { token, strlen(token) } };
	size_t size = cmx_codec_size(&cmx_desc_Auth_in, &in);
	uint8_t msg[CMX_HDR_SIZE + 8 + 264];
	struct cmx_hdr h = { .size = (uint32_t)size, .op = CMX_OP_Auth, .flags = CMX_HDR_SYNC };
	int64_t status;
	int e;

	if (size > sizeof(msg) - CMX_HDR_SIZE)
		return -E2BIG;
	memcpy(msg, &h, CMX_HDR_SIZE);
	cmx_codec_encode(&cmx_desc_Auth_in, &in, msg + CMX_HDR_SIZE);
	e = io_all(fd, msg, CMX_HDR_SIZE + size, 1);
	explicit_bzero(msg, sizeof(msg));
	if (!e)
		e = io_all(fd, &h, CMX_HDR_SIZE, 0);
	if (!e && (h.op != CMX_OP_REPLY || h.size != 8 || h.bulk))
		e = -EPROTO;
	if (!e)
		e = io_all(fd, &status, 8, 0);
	if (e)
		return e;
	if (status == CL_SUCCESS)
		return 0;
	if (status == CL_OUT_OF_RESOURCES)
		return -EAGAIN;
	return *token ? -EKEYREJECTED : -ENOKEY;
}

/* tls: the handshake, the server checked against $CLMUX_TLS_CA, else
 * client.conf's tls_ca, else the system's CAs. */
static int tls_start(int fd, const struct cmx_addr *a)
{
	const char *env = getenv("CLMUX_TLS_CA");
	char conf[256];
	const char *ca = env && *env ? env : !cmx_conf_get("tls_ca", conf, sizeof(conf)) ? conf : NULL;
	struct cmx_tls *t;
	int e = cmx_tls_connect(fd, a->host, ca, &t, dial_why, sizeof(dial_why));

	if (!e && (e = link_add(fd, t)))
		cmx_tls_free(t);
	return e;
}

int cmx_dial(const struct cmx_addr *a)
{
	const char *env = getenv("CLMUX_TOKEN");
	char conf[300];
	const char *token = env && *env ? env : !cmx_conf_get("token", conf, sizeof(conf)) ? conf : "";
	int fd = cmx_addr_connect(a), e = 0;

	dial_why[0] = '\0';
	if (fd >= 0 && a->tls)
		e = tls_start(fd, a);
	if (fd < 0 || e || (!*token && a->type != CMX_ADDR_TCP)) {
		explicit_bzero(conf, sizeof(conf));
		if (e)
			cmx_dial_close(fd);
		return e ? e : fd;
	}
	e = auth(fd, token);
	explicit_bzero(conf, sizeof(conf));
	if (e) {
		cmx_dial_close(fd);
		return e;
	}
	return fd;
}
