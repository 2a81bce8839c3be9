// SPDX-License-Identifier: MIT
// Transport addresses ("unix:/path", "vsock:2:7447", "tcp:HOST:PORT", ...):
// parsing, connecting, listening.
#ifndef CMX_ADDR_H
#define CMX_ADDR_H

#include <stddef.h>
#include <stdint.h>

enum cmx_addr_type {
	CMX_ADDR_UNIX,	    /* unix:PATH */
	CMX_ADDR_VSOCK,	    /* vsock:[CID:]PORT (AF_VSOCK) */
	CMX_ADDR_VSOCK_UDS, /* vsock-uds:PATH: a hybrid-vsock VMM's <uds>_<port> socket */
	CMX_ADDR_TCP,	    /* tcp:HOST:PORT, tcp:[V6]:PORT; tls:HOST:PORT (tls set) */
};

/* The vsock port clmuxd listens on by default, and the guest's default
 * server is vsock:2:CMX_VSOCK_PORT (docs/protocol.md, Transports). */
#define CMX_VSOCK_PORT 7447u
#define CMX_VSOCK_CID_HOST 2u
#define CMX_VSOCK_CID_ANY 0xffffffffu

/* clmux's vsock port: a guest's server is vsock:2:CMX_VSOCK_PORT. */
#define CMX_VSOCK_PORT 7447u

struct cmx_addr {
	enum cmx_addr_type type;
	char path[108]; /* unix, vsock-uds: sun_path */
	char host[64];	/* tcp: a name or an IPv4/IPv6 literal, without brackets */
	uint32_t cid;	/* vsock: the peer to connect to, or ANY to listen */
	uint32_t port;	/* vsock, tcp */
	int tls;	/* tcp: written tls:, the guest speaks TLS (guest/tls.c) */
	char opts[256]; /* ",key=value" options after the address, verbatim */
};

/* 0, or -EINVAL with a reason in err (errlen bytes). */
int cmx_addr_parse(const char *spec, struct cmx_addr *a, char *err, size_t errlen);
/* The address without its options, for messages ("tcp:[::1]:7447"). */
const char *cmx_addr_str(const struct cmx_addr *a, char *buf, size_t len);
/* A connected, blocking, close-on-exec stream socket, or -errno. */
int cmx_addr_connect(const struct cmx_addr *a);
/* A listening, non-blocking, close-on-exec socket, or -errno. A stale unix
 * socket file is replaced. A Unix socket gets the address's mode= and
 * group= (cmx_addr_perm()) after bind and before listen, so nobody can
 * connect while it has the umask's mode. */
int cmx_addr_listen(const struct cmx_addr *a);
/* Options mode=OCTAL (0 to 0777) and group=NAME|GID of a Unix socket or
 * file: -1 each where not given. */
struct cmx_addr_perm {
	int mode;
	long gid;
};
/* 0, or -EINVAL with a reason in err (NULL: no reason wanted). */
int cmx_addr_perm(const struct cmx_addr *a, struct cmx_addr_perm *p, char *err, size_t errlen);
/* Larger socket buffers: a bulk transfer moves in fewer, larger steps; and
 * no Nagle delay on TCP. Best effort (the system's maximum applies). */
void cmx_addr_tune(int fd);
/* The value of option `key` in a->opts into val, or -ENOENT. A bare key
 * (",tls") has the value "". */
int cmx_addr_opt(const struct cmx_addr *a, const char *key, char *val, size_t len);
/* A size as options and the configuration write it: "4096", "512M", "1.5G",
 * "1GiB", "64KB" (K, M, G, T binary multiples; "i" and "B" optional; a
 * fraction rounds down to a byte). 0, or -EINVAL. */
int cmx_size_parse(const char *s, uint64_t *out);
/* A decimal number in [min, max], digits only (no sign, space or suffix,
 * which strtoul would take or leave): 0, or -EINVAL. */
int cmx_uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
