// SPDX-License-Identifier: MIT
// Reaching clmuxd: configuration, connecting a channel, the Auth exchange.
#include "dial.h"

#include <CL/cl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ivshmem.h"
#include "proto.gen.h"

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

static int io_all(int fd, void *p, size_t n, int out)
{
	while (n) {
		ssize_t r = out ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, MSG_WAITALL);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -errno : -ECONNRESET;
		p = (char *)p + r;
		n -= (size_t)r;
	}
	return 0;
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

int cmx_dial(const struct cmx_addr *a)
{
	const char *env = getenv("CLMUX_TOKEN");
	char conf[300];
	const char *token = env && *env ? env : !cmx_conf_get("token", conf, sizeof(conf)) ? conf : "";
	int fd = cmx_addr_connect(a), e;

	if (fd < 0 || (!*token && a->type != CMX_ADDR_TCP))
		return fd;
	e = auth(fd, token);
	explicit_bzero(conf, sizeof(conf));
	if (e) {
		close(fd);
		return e;
	}
	return fd;
}
