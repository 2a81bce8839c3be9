// SPDX-License-Identifier: MIT
// Transport addresses: unix:PATH, vsock:[CID:]PORT, vsock-uds:PATH,
// tcp:HOST:PORT, each optionally followed by ",key=value" options.
#include "addr.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/vm_sockets.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const struct {
	const char *prefix;
	enum cmx_addr_type type;
} prefixes[] = {
	{ "unix:", CMX_ADDR_UNIX },
	{ "vsock-uds:", CMX_ADDR_VSOCK_UDS },
	{ "vsock:", CMX_ADDR_VSOCK },
	{ "tcp:", CMX_ADDR_TCP },
	{ "tls:", CMX_ADDR_TCP }, /* a guest's server: tcp, spoken through TLS */
};

/* A decimal number in [min, max] spanning exactly n bytes of s. */
static int parse_u32(const char *s, size_t n, uint32_t min, uint32_t max, uint32_t *out)
{
	char buf[16], *end;
	unsigned long v;

	if (!n || n >= sizeof(buf) || s[0] < '0' || s[0] > '9')
		return -EINVAL;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	v = strtoul(buf, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* rest[0..n): "[CID:]PORT". A missing CID is ANY (listen) or the host
 * (connect): the caller decides what ANY means. */
static int parse_vsock(const char *rest, size_t n, struct cmx_addr *a)
{
	const char *colon = memchr(rest, ':', n);

	a->cid = CMX_VSOCK_CID_ANY;
	if (colon) {
		if (parse_u32(rest, (size_t)(colon - rest), 0, 0xfffffffe, &a->cid))
			return -EINVAL;
		n -= (size_t)(colon + 1 - rest);
		rest = colon + 1;
	}
	return parse_u32(rest, n, 1, 0xffffffff, &a->port);
}

/* rest[0..n): "HOST:PORT" or "[V6]:PORT"; a bare IPv6 literal takes its
 * last colon as the port's. */
static int parse_tcp(const char *rest, size_t n, struct cmx_addr *a)
{
	const char *host = rest, *colon;
	size_t hlen;

	if (n && rest[0] == '[') {
		const char *close = memchr(rest, ']', n);
		if (!close || close + 1 >= rest + n || close[1] != ':')
			return -EINVAL;
		host = rest + 1;
		hlen = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = NULL;
		for (const char *p = rest; p < rest + n; p++)
			if (*p == ':')
				colon = p;
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - rest);
	}
	if (!hlen || hlen >= sizeof(a->host))
		return -EINVAL;
	memcpy(a->host, host, hlen);
	a->host[hlen] = '\0';
	return parse_u32(colon + 1, (size_t)(rest + n - colon - 1), 0, 65535, &a->port);
}

int cmx_addr_parse(const char *spec, struct cmx_addr *a, char *err, size_t errlen)
{
	const char *rest = NULL, *comma;
	size_t n;
	int e = 0;

	memset(a, 0, sizeof(*a));
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (!strncmp(spec, prefixes[i].prefix, strlen(prefixes[i].prefix))) {
			a->type = prefixes[i].type;
			a->tls = !strcmp(prefixes[i].prefix, "tls:");
			rest = spec + strlen(prefixes[i].prefix);
			break;
		}
	if (!rest) {
		snprintf(err, errlen,
			 "unknown transport in '%s' (expected unix:PATH, vsock:[CID:]PORT, "
			 "vsock-uds:PATH, tcp:HOST:PORT or tls:HOST:PORT)", spec);
		return -EINVAL;
	}
	comma = strchr(rest, ',');
	n = comma ? (size_t)(comma - rest) : strlen(rest);
	switch (a->type) {
	case CMX_ADDR_UNIX:
	case CMX_ADDR_VSOCK_UDS:
		if (!n || n >= sizeof(a->path)) {
			snprintf(err, errlen, "bad socket path in '%s'", spec);
			return -EINVAL;
		}
		memcpy(a->path, rest, n);
		break;
	case CMX_ADDR_VSOCK:
		e = parse_vsock(rest, n, a);
		if (e)
			snprintf(err, errlen, "bad vsock address in '%s' (expected vsock:[CID:]PORT)",
				 spec);
		break;
	case CMX_ADDR_TCP:
		e = parse_tcp(rest, n, a);
		if (e)
			snprintf(err, errlen,
				 "bad tcp address in '%s' (expected tcp:HOST:PORT or tcp:[IPV6]:PORT)",
				 spec);
		break;
	}
	if (e)
		return e;
	if (comma) {
		if (strlen(comma) >= sizeof(a->opts)) {
			snprintf(err, errlen, "options too long in '%s'", spec);
			return -EINVAL;
		}
		strcpy(a->opts, comma);
	}
	return 0;
}

const char *cmx_addr_str(const struct cmx_addr *a, char *buf, size_t len)
{
	switch (a->type) {
	case CMX_ADDR_UNIX:
		snprintf(buf, len, "unix:%s", a->path);
		break;
	case CMX_ADDR_VSOCK_UDS:
		snprintf(buf, len, "vsock-uds:%s", a->path);
		break;
	case CMX_ADDR_VSOCK:
		if (a->cid == CMX_VSOCK_CID_ANY)
			snprintf(buf, len, "vsock:%u", a->port);
		else
			snprintf(buf, len, "vsock:%u:%u", a->cid, a->port);
		break;
	case CMX_ADDR_TCP:
		snprintf(buf, len, strchr(a->host, ':') ? "%s:[%s]:%u" : "%s:%s:%u",
			 a->tls ? "tls" : "tcp", a->host, a->port);
		break;
	}
	return buf;
}

int cmx_addr_opt(const struct cmx_addr *a, const char *key, char *val, size_t len)
{
	size_t klen = strlen(key);

	for (const char *p = a->opts; (p = strchr(p, ',')); ) {
		p++;
		if (!strncmp(p, key, klen) && (p[klen] == '=' || p[klen] == ',' || !p[klen])) {
			const char *v = p + klen + (p[klen] == '='), *end = strchr(v, ',');
			size_t n = p[klen] == '=' ? (end ? (size_t)(end - v) : strlen(v)) : 0;
			if (n >= len)
				return -ENAMETOOLONG;
			memcpy(val, v, n);
			val[n] = '\0';
			return 0;
		}
	}
	return -ENOENT;
}

int cmx_uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int cmx_size_parse(const char *s, uint64_t *out)
{
	uint64_t n, f = 0, div = 1, part;
	unsigned shift = 0;
	char *p;

	/* Digits, then perhaps a fraction: no sign or space, which strtoull
	 * would take; and no strtod, whose decimal point is the locale's. */
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	n = strtoull(s, &p, 10);
	if (errno)
		return -EINVAL;
	if (*p == '.') {
		if (!isdigit((unsigned char)p[1]))
			return -EINVAL;
		/* Digits past the 15th are worth less than a byte, even of T. */
		for (p++; isdigit((unsigned char)*p); p++)
			if (div < 1000000000000000ull) {
				f = f * 10 + (uint64_t)(*p - '0');
				div *= 10;
			}
	}
	switch (toupper((unsigned char)*p)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	}
	if (shift && *++p == 'i')
		p++;
	if (*p == 'B')
		p++;
	if (*p || n > (UINT64_MAX >> shift))
		return -EINVAL;
	part = (uint64_t)((double)f / (double)div * (double)(1ull << shift));
	if ((n << shift) > UINT64_MAX - part)
		return -EINVAL;
	*out = (n << shift) + part;
	return 0;
}

int cmx_addr_perm(const struct cmx_addr *a, struct cmx_addr_perm *p, char *err, size_t errlen)
{
	char val[64], *end, buf[4096];
	struct group gr, *g = NULL;
	unsigned long v;
	int e;

	p->mode = -1;
	p->gid = -1;
	e = cmx_addr_opt(a, "mode", val, sizeof(val));
	if (e != -ENOENT) {
		errno = 0;
		v = strtoul(val, &end, 8);
		if (e || !*val || *end || errno || v > 0777) {
			if (err)
				snprintf(err, errlen,
					 "mode=%s: an octal mode from 0 to 0777 (0660)",
					 e ? "..." : val);
			return -EINVAL;
		}
		p->mode = (int)v;
	}
	e = cmx_addr_opt(a, "group", val, sizeof(val));
	if (e != -ENOENT) {
		if (!e && *val && getgrnam_r(val, &gr, buf, sizeof(buf), &g) == 0 && g) {
			p->gid = (long)g->gr_gid;
			return 0;
		}
		errno = 0;
		v = e || !*val ? 0 : strtoul(val, &end, 10);
		if (e || !*val || *end || errno || v >= 0xffffffffu) {
			if (err)
				snprintf(err, errlen,
					 "group=%s: no such group (a name or a number)",
					 e ? "..." : val);
			return -EINVAL;
		}
		p->gid = (long)v;
	}
	return 0;
}

static socklen_t unix_sockaddr(const struct cmx_addr *a, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, a->path, strlen(a->path));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(a->path) + 1);
}

void cmx_addr_tune(int fd)
{
	int size = 4 << 20, one = 1, domain = 0;
	socklen_t dlen = sizeof(domain);

	getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dlen);
	if (domain == AF_INET || domain == AF_INET6) {
		/* Replies and small calls go out at once. TCP's own buffer
		 * autotuning (tcp_rmem/tcp_wmem) grows further than a fixed
		 * SO_RCVBUF would, so the sizes are left to it. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (domain == AF_VSOCK) {
		unsigned long long vsize = (unsigned long long)size;
		setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_MAX_SIZE, &vsize, sizeof(vsize));
		setsockopt(fd, AF_VSOCK, SO_VM_SOCKETS_BUFFER_SIZE, &vsize, sizeof(vsize));
	}
}

/* Each of a's socket addresses in turn (one for unix and vsock, what the
 * resolver gives for tcp), passed to try(); the first fd it returns wins. */
static int addr_each(const struct cmx_addr *a, int passive,
		     int (*try)(int family, const struct sockaddr *sa, socklen_t len))
{
	struct sockaddr_un sun;
	struct sockaddr_vm svm;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	char port[8];
	int e, fd = -EINVAL;

	switch (a->type) {
	case CMX_ADDR_UNIX:
	case CMX_ADDR_VSOCK_UDS:
		return try(AF_UNIX, (struct sockaddr *)&sun, unix_sockaddr(a, &sun));
	case CMX_ADDR_VSOCK:
		memset(&svm, 0, sizeof(svm));
		svm.svm_family = AF_VSOCK;
		svm.svm_port = a->port;
		svm.svm_cid = a->cid;
		if (!passive && a->cid == CMX_VSOCK_CID_ANY)
			svm.svm_cid = CMX_VSOCK_CID_HOST;
		return try(AF_VSOCK, (struct sockaddr *)&svm, sizeof(svm));
	case CMX_ADDR_TCP:
		break;
	}
	/* Listening takes literals only: a name could resolve elsewhere later. */
	hints.ai_flags = passive ? AI_NUMERICHOST | AI_PASSIVE : AI_ADDRCONFIG;
	snprintf(port, sizeof(port), "%u", a->port);
	e = getaddrinfo(a->host, port, &hints, &res);
	if (e)
		return e == EAI_SYSTEM ? -errno : e == EAI_MEMORY ? -ENOMEM : -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = try(ai->ai_family, ai->ai_addr, ai->ai_addrlen);
		if (fd >= 0)
			break;
	}
	freeaddrinfo(res);
	return fd;
}

static int connect_one(int family, const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	cmx_addr_tune(fd);
	if (connect(fd, sa, len) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

static int listen_one(int family, const struct sockaddr *sa, socklen_t len)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;

	if (fd < 0)
		return -errno;
	if (family == AF_INET || family == AF_INET6) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		/* Accepted sockets inherit it. */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	if (bind(fd, sa, len) < 0 || listen(fd, 128) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

/* A Unix socket with the permissions asked for: bound, given its group and
 * mode while nobody can connect yet (no listen), then listening. Neither
 * call follows a link that someone put in place of the socket. */
static int listen_unix(const struct cmx_addr *a, const struct cmx_addr_perm *p)
{
	struct sockaddr_un sun;
	socklen_t len = unix_sockaddr(a, &sun);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), e;

	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun, len) < 0) {
		e = -errno;
		close(fd);
		return e;
	}
	if ((p->gid >= 0 && lchown(a->path, (uid_t)-1, (gid_t)p->gid) < 0) ||
	    (p->mode >= 0 &&
	     fchmodat(AT_FDCWD, a->path, (mode_t)p->mode, AT_SYMLINK_NOFOLLOW) < 0) ||
	    listen(fd, 128) < 0) {
		e = -errno;
		close(fd);
		unlink(a->path);
		return e;
	}
	return fd;
}

int cmx_addr_connect(const struct cmx_addr *a)
{
	return addr_each(a, 0, connect_one);
}

int cmx_addr_listen(const struct cmx_addr *a)
{
	struct cmx_addr_perm p;
	struct stat st;

	if (a->type != CMX_ADDR_UNIX && a->type != CMX_ADDR_VSOCK_UDS)
		return addr_each(a, 1, listen_one);
	if (cmx_addr_perm(a, &p, NULL, 0))
		return -EINVAL;
	/* Replace a socket file left by a daemon that died; never another file. */
	if (!lstat(a->path, &st) && S_ISSOCK(st.st_mode))
		unlink(a->path);
	return listen_unix(a, &p);
}
