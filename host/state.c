// SPDX-License-Identifier: MIT
// The state file of one session: CRC32C, the checking reader, the writer,
// and the private state directory.
#define _GNU_SOURCE
#include "state.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "proto.gen.h"

/* CRC32C (Castagnoli): the SSE4.2 instruction where the CPU has it (a
 * 256 MiB restore checks its bytes at memory speed), a table elsewhere. */
static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t n)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, crc_table_init);
	while (n--)
		crc = crc_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n)
{
	uint64_t c = crc;

	for (; n >= 8; n -= 8, p += 8) {
		uint64_t v;
		memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
	}
	crc = (uint32_t)c;
	while (n--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}
#endif

uint32_t cmx_state_crc(uint32_t crc, const void *p, size_t n)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc_hw(crc, p, n);
#endif
	return ~crc_soft(crc, p, n);
}

static uint64_t pad8(uint64_t n)
{
	return (n + 7) & ~7ull;
}

static uint32_t head_crc(const struct cmx_state_head *h)
{
	struct cmx_state_head c = *h;

	c.crc = 0;
	return cmx_state_crc(0, &c, sizeof(c));
}

/* An image's box: inside the image, one run of its packed bytes, those
 * bytes the record's; *off its offset in them. */
static int check_image(const struct cmx_state_image *im, uint64_t len, uint64_t *off)
{
	uint64_t whole = im->elem, n = im->elem;
	const uint64_t *e = im->extent, *o = im->origin, *r = im->region;

	if (!im->elem || im->elem > CMX_STATE_IMAGE_ELEM)
		return -EBADMSG;
	for (int i = 0; i < 3; i++) {
		if (!e[i] || e[i] > CMX_STATE_IMAGE_DIM || !r[i] || r[i] > e[i] ||
		    o[i] > e[i] - r[i])
			return -EBADMSG;
		if (__builtin_mul_overflow(whole, e[i], &whole) ||
		    __builtin_mul_overflow(n, r[i], &n))
			return -EBADMSG;
	}
	/* Part of one row, whole rows of one slice, or whole slices. */
	if ((r[0] != e[0] && (r[1] != 1 || r[2] != 1)) || (r[1] != e[1] && r[2] != 1))
		return -EBADMSG;
	if (n != len || n > CMX_STATE_PIECE)
		return -EBADMSG;
	/* Below whole: each of the box's start is inside the image. */
	*off = ((o[2] * e[1] + o[1]) * e[0] + o[0]) * im->elem;
	return 0;
}

/* One record's shape, beyond its bounds and checksum. */
static int check_rec(const struct cmx_state_rechdr *rh, const uint8_t *data)
{
	struct cmx_hdr h;

	switch (rh->type) {
	case CMX_STATE_CALL:
		if (rh->len < CMX_HDR_SIZE)
			return -EBADMSG;
		memcpy(&h, data, sizeof(h));
		/* The checks of a guest's frame; a payload travels in the
		 * record itself, or names a block of the area (replayed
		 * through the area's own bounds checks). */
		if (cmx_frame_check_call(&h) || (h.flags & CMX_HDR_LZ4) ||
		    (!(h.flags & CMX_HDR_AREA) && h.area_off))
			return -EBADMSG;
		if ((uint64_t)h.size > rh->len - CMX_HDR_SIZE)
			return -EBADMSG;
		if (h.flags & CMX_HDR_AREA)
			return h.size == rh->len - CMX_HDR_SIZE ? 0 : -EBADMSG;
		if (h.bulk != rh->len - CMX_HDR_SIZE - h.size)
			return -EBADMSG;
		return 0;
	case CMX_STATE_AREA:
		return rh->len == 16 ? 0 : -EBADMSG;
	case CMX_STATE_CONTENTS:
		return rh->len < 16 || rh->len - 16 > CMX_STATE_PIECE ? -EBADMSG : 0;
	case CMX_STATE_END:
		return rh->len == 8 ? 0 : -EBADMSG;
	case CMX_STATE_EVENT: {
		struct cmx_state_event ev;
		if (rh->len < sizeof(ev))
			return -EBADMSG;
		memcpy(&ev, data, sizeof(ev));
		/* Values are the restore's to check; the shape is here. */
		if (ev.nc > CMX_STATE_EVENT_CBS || (ev.flags & ~CMX_STATE_EV_ALL) ||
		    rh->len != sizeof(ev) + ev.nc * sizeof(struct cmx_state_event_cb))
			return -EBADMSG;
		return 0;
	}
	case CMX_STATE_IMAGE: {
		struct cmx_state_image im;
		uint64_t off;
		if (rh->len < sizeof(im))
			return -EBADMSG;
		memcpy(&im, data, sizeof(im));
		return check_image(&im, rh->len - sizeof(im), &off);
	}
	}
	return -EBADMSG;
}

/* The header on its own: magic and version before anything else is
 * believed, then its checksum, protocol and tenant. */
static int check_head(const struct cmx_state_head *h)
{
	if (memcmp(h->magic, CMX_STATE_MAGIC, sizeof(h->magic)))
		return -EBADMSG;
	if (h->version != CMX_STATE_VERSION || h->head_size != CMX_STATE_HEAD_SIZE)
		return -EPROTONOSUPPORT;
	if (h->crc != head_crc(h))
		return -EBADMSG;
	if (h->proto != CMX_PROTO_VERSION)
		return -EPROTONOSUPPORT;
	if (!memchr(h->tenant, 0, sizeof(h->tenant)) || !h->tenant[0])
		return -EBADMSG;
	return 0;
}

int cmx_state_open(struct cmx_state_reader *r, const void *p, size_t n)
{
	const struct cmx_state_head *h = &r->head;
	uint64_t records = 0, pos = CMX_STATE_HEAD_SIZE;
	const uint8_t *b = p;
	int e;

	memset(r, 0, sizeof(*r));
	/* Size, magic and version before anything else is believed. */
	if (n < CMX_STATE_HEAD_SIZE || n > CMX_STATE_FILE_MAX)
		return -EBADMSG;
	memcpy(&r->head, p, sizeof(r->head));
	if ((e = check_head(h)) != 0)
		return e;
	if (h->body != n - CMX_STATE_HEAD_SIZE || h->records > h->body / CMX_STATE_REC_SIZE)
		return -EBADMSG;
	for (;;) {
		struct cmx_state_rechdr rh;
		uint64_t end;

		if (n - pos < CMX_STATE_REC_SIZE)
			return -EBADMSG;
		memcpy(&rh, b + pos, sizeof(rh));
		pos += CMX_STATE_REC_SIZE;
		if (rh.len > CMX_STATE_REC_MAX || pad8(rh.len) > n - pos)
			return -EBADMSG;
		end = pos + pad8(rh.len);
		if ((e = check_rec(&rh, b + pos)) != 0)
			return e;
		if (cmx_state_crc(0, b + pos, rh.len) != rh.crc)
			return -EBADMSG;
		for (uint64_t k = pos + rh.len; k < end; k++)
			if (b[k])
				return -EBADMSG;
		if (rh.type == CMX_STATE_END) {
			uint64_t count;
			memcpy(&count, b + pos, 8);
			/* END is last, counts what came before, and the
			 * file ends with it. */
			if (count != records || count != h->records || end != n)
				return -EBADMSG;
			break;
		}
		records++;
		pos = end;
	}
	r->p = b;
	r->n = n;
	r->pos = CMX_STATE_HEAD_SIZE;
	return 0;
}

int cmx_state_next(struct cmx_state_reader *r, struct cmx_state_rec *rec)
{
	struct cmx_state_rechdr rh;

	/* The whole file was checked by cmx_state_open(). */
	if (!r->p)
		return 0;
	memcpy(&rh, r->p + r->pos, sizeof(rh));
	if (rh.type == CMX_STATE_END)
		return 0;
	memset(rec, 0, sizeof(*rec));
	rec->type = rh.type;
	rec->data = r->p + r->pos + CMX_STATE_REC_SIZE;
	rec->len = rh.len;
	if (rh.type == CMX_STATE_CALL) {
		memcpy(&rec->hdr, rec->data, sizeof(rec->hdr));
		rec->args = rec->data + CMX_HDR_SIZE;
		rec->bulk = rec->hdr.bulk && !(rec->hdr.flags & CMX_HDR_AREA)
				? rec->args + rec->hdr.size
				: NULL;
	} else if (rh.type == CMX_STATE_AREA) {
		memcpy(&rec->area_len, rec->data, 8);
		memcpy(&rec->area_flags, rec->data + 8, 8);
	} else if (rh.type == CMX_STATE_CONTENTS) {
		memcpy(&rec->id, rec->data, 8);
		memcpy(&rec->offset, rec->data + 8, 8);
	} else if (rh.type == CMX_STATE_EVENT) {
		memcpy(&rec->ev, rec->data, sizeof(rec->ev));
		rec->cbs = rec->data + sizeof(rec->ev);
	} else if (rh.type == CMX_STATE_IMAGE) {
		memcpy(&rec->img, rec->data, sizeof(rec->img));
		rec->id = rec->img.id;
		/* Checked by cmx_state_open(). */
		(void)check_image(&rec->img, rec->len - sizeof(rec->img), &rec->offset);
	}
	r->pos += CMX_STATE_REC_SIZE + pad8(rh.len);
	return 1;
}

int cmx_state_dir_open(const char *path)
{
	struct stat st;
	int fd;

	if (mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* What it holds is every tenant's memory: this user's alone. */
	if (fstat(fd, &st) || st.st_uid != geteuid() || (st.st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* The file name of dirfd, opened for reading if it is a plain file of
 * this user's alone (st: its stat); else -errno or -EPERM. */
static int open_own(int dirfd, const char *name, int flags, struct stat *st)
{
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | flags);

	if (fd < 0)
		return -errno;
	if (fstat(fd, st) || !S_ISREG(st->st_mode) || st->st_uid != geteuid() ||
	    (st->st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

int cmx_state_map(int dirfd, const char *name, const void **p, size_t *n)
{
	struct stat st;
	void *m;
	int fd = open_own(dirfd, name, 0, &st);

	if (fd < 0)
		return fd;
	if (st.st_size < CMX_STATE_HEAD_SIZE || (uint64_t)st.st_size > CMX_STATE_FILE_MAX) {
		close(fd);
		return -EBADMSG;
	}
	m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	*p = m;
	*n = (size_t)st.st_size;
	return 0;
}

void cmx_state_unmap(const void *p, size_t n)
{
	if (p)
		munmap((void *)p, n);
}

int cmx_state_head_read(int dirfd, const char *name, struct cmx_state_head *h)
{
	struct stat st;
	ssize_t n;
	/* Whom cmx_state_map() would refuse is refused here too. */
	int fd = open_own(dirfd, name, O_NONBLOCK, &st), e;

	if (fd < 0)
		return fd;
	n = pread(fd, h, sizeof(*h), 0);
	e = n < 0 ? -errno : 0;
	close(fd);
	if (e)
		return e;
	return n == sizeof(*h) ? check_head(h) : -EBADMSG;
}

void cmx_state_key_name(const char *key, char *out, size_t len)
{
	size_t i;

	if (!len)
		return;
	if (len > CMX_STATE_KEY_MAX)
		len = CMX_STATE_KEY_MAX;
	for (i = 0; key[i] && i + 1 < len; i++) {
		char c = key[i];
		out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
			     ? c
			     : '_';
	}
	out[i] = '\0';
}

int cmx_state_name_key(const char *name, char *key, size_t len)
{
	const char *dash = strchr(name, '-');
	size_t n = dash ? (size_t)(dash - name) : 0;

	/* Keys are "t:", "l:" or "v:" and more; older names begin with
	 * "p<pid>-" or "m<pid>-". */
	if (n < 3 || n >= CMX_STATE_KEY_MAX || n >= len || name[1] != '_' ||
	    !strchr("tlv", name[0]))
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_'))
			return 0;
	}
	memcpy(key, name, n);
	key[n] = '\0';
	return 1;
}

static void wr(struct cmx_state_writer *w, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n && !w->err) {
		if (w->fill == sizeof(w->buf) || n >= sizeof(w->buf)) {
			/* Large pieces go straight out, after what is
			 * buffered. */
			const uint8_t *src = w->fill ? w->buf : b;
			size_t len = w->fill ? w->fill : n;
			ssize_t k = write(w->fd, src, len);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				w->err = k < 0 ? -errno : -EIO;
				return;
			}
			if (w->fill) {
				memmove(w->buf, w->buf + k, w->fill - (size_t)k);
				w->fill -= (size_t)k;
			} else {
				b += k;
				n -= (size_t)k;
			}
			continue;
		}
		size_t k = sizeof(w->buf) - w->fill < n ? sizeof(w->buf) - w->fill : n;
		memcpy(w->buf + w->fill, b, k);
		w->fill += k;
		b += k;
		n -= k;
	}
}

static void wr_flush(struct cmx_state_writer *w)
{
	size_t off = 0;

	while (off < w->fill && !w->err) {
		ssize_t k = write(w->fd, w->buf + off, w->fill - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			w->err = k < 0 ? -errno : -EIO;
		else
			off += (size_t)k;
	}
	w->fill = 0;
}

int cmx_state_begin(struct cmx_state_writer *w, int dirfd, const char *name, uint64_t session,
		    uint64_t token, uint64_t applied, const char *tenant)
{
	memset(&w->head, 0, sizeof(w->head));
	w->err = 0;
	w->fill = 0;
	w->dirfd = dirfd;
	if (strlen(tenant) >= CMX_STATE_TENANT_MAX || !tenant[0] ||
	    snprintf(w->name, sizeof(w->name), "%s", name) >= (int)sizeof(w->name))
		return -ENAMETOOLONG;
	snprintf(w->tmp, sizeof(w->tmp), "%s.tmp", name);
	(void)unlinkat(dirfd, w->tmp, 0);
	w->fd = openat(dirfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0)
		return -errno;
	memcpy(w->head.magic, CMX_STATE_MAGIC, sizeof(w->head.magic));
	w->head.version = CMX_STATE_VERSION;
	w->head.head_size = CMX_STATE_HEAD_SIZE;
	w->head.proto = CMX_PROTO_VERSION;
	w->head.session = session;
	w->head.token = token;
	w->head.applied = applied;
	strcpy(w->head.tenant, tenant);
	/* Written again, complete, at commit. */
	wr(w, &w->head, sizeof(w->head));
	return 0;
}

void cmx_state_put(struct cmx_state_writer *w, uint32_t type, const struct iovec *iov, int n)
{
	static const uint8_t zeros[8];
	struct cmx_state_rechdr rh = {.type = type};

	for (int i = 0; i < n; i++) {
		rh.len += iov[i].iov_len;
		rh.crc = cmx_state_crc(rh.crc, iov[i].iov_base, iov[i].iov_len);
	}
	if (rh.len > CMX_STATE_REC_MAX && !w->err)
		w->err = -EFBIG;
	wr(w, &rh, sizeof(rh));
	for (int i = 0; i < n; i++)
		wr(w, iov[i].iov_base, iov[i].iov_len);
	wr(w, zeros, pad8(rh.len) - rh.len);
	w->head.body += CMX_STATE_REC_SIZE + pad8(rh.len);
	if (type != CMX_STATE_END)
		w->head.records++;
}

int cmx_state_commit(struct cmx_state_writer *w)
{
	uint64_t count = w->head.records;
	struct iovec iov = {&count, 8};

	cmx_state_put(w, CMX_STATE_END, &iov, 1);
	wr_flush(w);
	w->head.crc = head_crc(&w->head);
	if (!w->err && pwrite(w->fd, &w->head, sizeof(w->head), 0) != sizeof(w->head))
		w->err = -EIO;
	/* Not synced: a state file outlives the daemon, not the host (its
	 * guests and the device's memory end with it), and the page cache
	 * hands the next daemon what was written. The rename is what makes
	 * a file whole under its name; one a host crash cut short fails its
	 * checksums. */
	if (!w->err && renameat(w->dirfd, w->tmp, w->dirfd, w->name))
		w->err = -errno;
	close(w->fd);
	w->fd = -1;
	if (w->err)
		(void)unlinkat(w->dirfd, w->tmp, 0);
	return w->err;
}

void cmx_state_abort(struct cmx_state_writer *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		(void)unlinkat(w->dirfd, w->tmp, 0);
	}
	w->fd = -1;
}
