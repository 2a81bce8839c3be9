// SPDX-License-Identifier: MIT
// Transport addresses ("unix:/path", ...): parsing, connecting, listening.
#ifndef CMX_ADDR_H
#define CMX_ADDR_H

#include <stddef.h>
#include <stdint.h>

enum cmx_addr_type { CMX_ADDR_UNIX, CMX_ADDR_VSOCK };

/* clmux's vsock port: a guest's server is vsock:2:CMX_VSOCK_PORT. */
#define CMX_VSOCK_PORT 7447u

struct cmx_addr {
	enum cmx_addr_type type;
	char path[108]; /* sun_path */
	uint32_t cid, port; /* vsock */
	char opts[128]; /* ",key=value" options after the address, verbatim */
};

/* 0, or -EINVAL with a reason in err (errlen bytes). */
int cmx_addr_parse(const char *spec, struct cmx_addr *a, char *err, size_t errlen);
/* A connected, blocking, close-on-exec stream socket, or -errno. */
int cmx_addr_connect(const struct cmx_addr *a);
/* A listening, non-blocking, close-on-exec socket, or -errno. A stale unix
 * socket file is replaced. */
int cmx_addr_listen(const struct cmx_addr *a);
/* Larger socket buffers: a bulk transfer moves in fewer, larger steps.
 * Best effort (the system's maximum applies). */
void cmx_addr_tune(int fd);
/* The value of option `key` in a->opts into val, or -ENOENT. */
int cmx_addr_opt(const struct cmx_addr *a, const char *key, char *val, size_t len);

#endif
