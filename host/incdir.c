// SPDX-License-Identifier: MIT
// Guest include directories on the host: a private tree under
// $TMPDIR/clmuxd.XXXXXX/s<session>/p<program>/<dir>/, made by this daemon
// alone (mode 0700), so no path in it is a link someone else placed.
#define _GNU_SOURCE
#include "incdir.h"

#include <CL/cl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"

#define TOKEN "cmx-include:"

static pthread_once_t root_once = PTHREAD_ONCE_INIT;
static char root[256];
static atomic_int made; /* set once root exists; read before dropping */

static void rm_tree(const char *path);

static void root_remove(void)
{
	rm_tree(root);
}

/* Made on first use, so a daemon whose guests ship no headers leaves no
 * trace; removed (empty by then, or nearly) when the daemon exits. */
static void root_make(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/clmuxd.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(root)) {
		cmx_warn("include directories: cannot make %s: %s", root, strerror(errno));
		root[0] = '\0';
		return;
	}
	atexit(root_remove);
	atomic_store(&made, 1);
}

static int path_of(char *out, size_t n, uint64_t session, uint64_t program, int64_t dir)
{
	int k;

	pthread_once(&root_once, root_make);
	if (!root[0])
		return -1;
	if (program == 0)
		k = snprintf(out, n, "%s/s%llu", root, (unsigned long long)session);
	else if (dir < 0)
		k = snprintf(out, n, "%s/s%llu/p%llu", root, (unsigned long long)session,
			     (unsigned long long)program);
	else
		k = snprintf(out, n, "%s/s%llu/p%llu/%lld", root, (unsigned long long)session,
			     (unsigned long long)program, (long long)dir);
	return k < 0 || (size_t)k >= n ? -1 : 0;
}

static int mkdir_ok(const char *p)
{
	return mkdir(p, 0700) == 0 || errno == EEXIST ? 0 : -1;
}

/* A relative path of plain components: no "", ".", ".." and no NUL. */
static int name_ok(const char *s, size_t n)
{
	size_t i = 0;

	if (!n || n > CMX_INCDIR_MAX_NAME || memchr(s, '\0', n) || s[0] == '/')
		return 0;
	while (i < n) {
		const char *c = s + i, *slash = memchr(c, '/', n - i);
		size_t len = slash ? (size_t)(slash - c) : n - i;

		if (!len || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.'))
			return 0;
		i += len + 1;
		if (slash && i == n)
			return 0; /* a trailing slash names no file */
	}
	return 1;
}

/* Makes the directories leading to `path` (below base, which exists). */
static int parents_make(char *path, size_t base_len)
{
	for (char *p = path + base_len + 1; (p = strchr(p, '/')); p++) {
		*p = '\0';
		int e = mkdir_ok(path);
		*p = '/';
		if (e)
			return -1;
	}
	return 0;
}

static int file_write(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	const char *p = data;

	if (fd < 0)
		return -1;
	while (len) {
		ssize_t k = write(fd, p, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			close(fd);
			return -1;
		}
		p += k;
		len -= (size_t)k;
	}
	return close(fd);
}

int cmx_incdir_write(uint64_t session, uint64_t program, uint64_t dir,
		     const struct cmx_IncludeFile_array *files)
{
	char base[512], path[512 + CMX_INCDIR_MAX_NAME + 2];
	size_t blen;

	if (dir >= CMX_INCDIR_MAX_DIRS)
		return CL_INVALID_VALUE;
	if (path_of(base, sizeof(base), session, 0, -1) || mkdir_ok(base) ||
	    path_of(base, sizeof(base), session, program, -1) || mkdir_ok(base) ||
	    path_of(base, sizeof(base), session, program, (int64_t)dir) || mkdir_ok(base))
		return CL_OUT_OF_RESOURCES;
	blen = strlen(base);
	/* The schema bounds both; checked again, as the buffers here need. */
	if (files->n > CMX_INCDIR_MAX_FILES)
		return CL_INVALID_VALUE;
	for (uint64_t i = 0; i < files->n; i++) {
		const struct cmx_IncludeFile *f = &files->v[i];
		size_t nlen = f->path.len;

		if (nlen > CMX_INCDIR_MAX_NAME)
			return CL_INVALID_VALUE;
		/* The name is copied once, and only the copy is checked and
		 * used (the caller's bytes are its own copy too). */
		memcpy(path, base, blen);
		path[blen] = '/';
		memcpy(path + blen + 1, f->path.ptr, nlen);
		path[blen + 1 + nlen] = '\0';
		if (!name_ok(path + blen + 1, nlen))
			return CL_INVALID_VALUE;
		if (parents_make(path, blen) || file_write(path, f->data.ptr, f->data.len))
			return CL_OUT_OF_RESOURCES;
	}
	return CL_SUCCESS;
}

char *cmx_incdir_options(uint64_t session, uint64_t program, const char *options)
{
	struct cmx_buf b;
	const char *s = options ? options : "";
	char dirpath[512];

	cmx_buf_init(&b);
	while (*s) {
		const char *t = strstr(s, "-I " TOKEN);
		char *end;
		unsigned long k;
		struct stat st;

		if (!t) {
			cmx_buf_put(&b, s, strlen(s));
			break;
		}
		t += 3;
		cmx_buf_put(&b, s, (size_t)(t - s));
		k = strtoul(t + strlen(TOKEN), &end, 10);
		/* Only a directory the guest shipped replaces the token. */
		if (end != t + strlen(TOKEN) && (*end == ' ' || !*end) &&
		    !path_of(dirpath, sizeof(dirpath), session, program, (int64_t)k) &&
		    !stat(dirpath, &st) && S_ISDIR(st.st_mode)) {
			cmx_buf_put(&b, dirpath, strlen(dirpath));
			s = end;
		} else {
			s = t;
		}
	}
	cmx_buf_put(&b, "", 1);
	if (b.oom) {
		cmx_buf_fini(&b);
		return NULL;
	}
	return (char *)b.data;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *f)
{
	remove(path);
	return 0;
}

static void rm_tree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void cmx_incdir_drop(uint64_t session, uint64_t program)
{
	char p[512];

	if (atomic_load(&made) && !path_of(p, sizeof(p), session, program, -1))
		rm_tree(p);
}

void cmx_incdir_drop_session(uint64_t session)
{
	char p[512];

	if (atomic_load(&made) && !path_of(p, sizeof(p), session, 0, -1))
		rm_tree(p);
}
