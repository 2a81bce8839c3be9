// SPDX-License-Identifier: MIT
// Unit tests of the state file: a round trip, and damaged, truncated,
// foreign or badly owned files refused without a crash.
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "codec.h"
#include "proto.gen.h"
#include "state.h"

static char dir[64];

static void setup(void)
{
	strcpy(dir, "/tmp/cmx-state-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* A file of one CreateBuffer call, 100 bytes of its contents, a user
 * event left unset with one callback waiting for it, and the second row
 * of a 4x3 image of 4-byte elements. */
static int write_sample(int dfd, const char *name)
{
	struct cmx_state_writer *w = malloc(sizeof(*w));
	struct cmx_CreateBuffer_in in = {
	    .mem = {.id = 0x10001}, .context = {.id = 0x10000}, .size = 100};
	uint8_t args[256], bytes[100];
	struct cmx_hdr h = {.op = CMX_OP_CreateBuffer};
	uint64_t idoff[2] = {0x10001, 0};
	int e;

	h.size = (uint32_t)cmx_codec_size(&cmx_desc_CreateBuffer_in, &in);
	ck_assert_uint_le(h.size, sizeof(args));
	cmx_codec_encode(&cmx_desc_CreateBuffer_in, &in, args);
	for (int i = 0; i < 100; i++)
		bytes[i] = (uint8_t)i;
	ck_assert_int_eq(cmx_state_begin(w, dfd, name, 7, 0xabcdef, 42, "ci"), 0);
	struct iovec call[2] = {{&h, sizeof(h)}, {args, h.size}};
	cmx_state_put(w, CMX_STATE_CALL, call, 2);
	struct iovec cont[2] = {{idoff, 16}, {bytes, 100}};
	cmx_state_put(w, CMX_STATE_CONTENTS, cont, 2);
	struct cmx_state_event ev = {.id = 0x10002,
				     .context = 0x10000,
				     .status = 2, /* CL_SUBMITTED */
				     .type = 0x1204,
				     .flags = CMX_STATE_EV_USER,
				     .nc = 1};
	struct cmx_state_event_cb cb = {.type = 0, .tag = 0x7f0012345678};
	struct iovec evv[2] = {{&ev, sizeof(ev)}, {&cb, sizeof(cb)}};
	cmx_state_put(w, CMX_STATE_EVENT, evv, 2);
	struct cmx_state_image im = {.id = 0x10003,
				     .elem = 4,
				     .extent = {4, 3, 1},
				     .origin = {0, 1, 0},
				     .region = {4, 1, 1}};
	struct iovec imv[2] = {{&im, sizeof(im)}, {bytes, 16}};
	cmx_state_put(w, CMX_STATE_IMAGE, imv, 2);
	e = cmx_state_commit(w);
	free(w);
	return e;
}

static uint8_t *slurp(int dfd, const char *name, size_t *n)
{
	const void *p;
	uint8_t *copy;

	ck_assert_int_eq(cmx_state_map(dfd, name, &p, n), 0);
	copy = malloc(*n);
	memcpy(copy, p, *n);
	cmx_state_unmap(p, *n);
	return copy;
}

START_TEST(round_trip)
{
	int dfd = cmx_state_dir_open(dir);
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	size_t n;
	uint8_t *f;

	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(write_sample(dfd, "s.state"), 0);
	ck_assert_int_eq(faccessat(dfd, "s.state.tmp", F_OK, 0), -1);
	f = slurp(dfd, "s.state", &n);
	ck_assert_int_eq(cmx_state_open(&r, f, n), 0);
	ck_assert_uint_eq(r.head.session, 7);
	ck_assert_uint_eq(r.head.token, 0xabcdef);
	ck_assert_uint_eq(r.head.applied, 42);
	ck_assert_str_eq(r.head.tenant, "ci");
	ck_assert_int_eq(cmx_state_next(&r, &rec), 1);
	ck_assert_uint_eq(rec.type, CMX_STATE_CALL);
	ck_assert_uint_eq(rec.hdr.op, CMX_OP_CreateBuffer);
	struct cmx_CreateBuffer_in in;
	ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateBuffer_in, rec.args, rec.hdr.size, &in),
			 0);
	ck_assert_uint_eq(in.mem.id, 0x10001);
	ck_assert_uint_eq(in.size, 100);
	ck_assert_int_eq(cmx_state_next(&r, &rec), 1);
	ck_assert_uint_eq(rec.type, CMX_STATE_CONTENTS);
	ck_assert_uint_eq(rec.id, 0x10001);
	ck_assert_uint_eq(rec.len, 116);
	ck_assert_uint_eq(rec.data[16 + 99], 99);
	ck_assert_int_eq(cmx_state_next(&r, &rec), 1);
	ck_assert_uint_eq(rec.type, CMX_STATE_EVENT);
	ck_assert_uint_eq(rec.ev.id, 0x10002);
	ck_assert_int_eq(rec.ev.status, 2);
	ck_assert_uint_eq(rec.ev.nc, 1);
	struct cmx_state_event_cb cb;
	memcpy(&cb, rec.cbs, sizeof(cb));
	ck_assert_uint_eq(cb.tag, 0x7f0012345678);
	ck_assert_int_eq(cmx_state_next(&r, &rec), 1);
	ck_assert_uint_eq(rec.type, CMX_STATE_IMAGE);
	ck_assert_uint_eq(rec.id, 0x10003);
	ck_assert_uint_eq(rec.offset, 16);
	ck_assert_uint_eq(rec.img.extent[1], 3);
	ck_assert_uint_eq(rec.len, sizeof(struct cmx_state_image) + 16);
	ck_assert_uint_eq(rec.data[sizeof(struct cmx_state_image) + 15], 15);
	ck_assert_int_eq(cmx_state_next(&r, &rec), 0);
	free(f);
	close(dfd);
}
END_TEST

/* Every byte changed, every length cut short: refused, never believed. */
START_TEST(damaged)
{
	int dfd = cmx_state_dir_open(dir);
	struct cmx_state_reader r;
	size_t n;
	uint8_t *f;

	ck_assert_int_eq(write_sample(dfd, "s.state"), 0);
	f = slurp(dfd, "s.state", &n);
	for (size_t i = 0; i < n; i++) {
		f[i] ^= 0x5a;
		ck_assert_int_ne(cmx_state_open(&r, f, n), 0);
		f[i] ^= 0x5a;
	}
	for (size_t k = 0; k < n; k++)
		ck_assert_int_ne(cmx_state_open(&r, f, k), 0);
	ck_assert_int_eq(cmx_state_open(&r, f, n), 0);
	/* Another version of the file: named as such. */
	f[8] = CMX_STATE_VERSION + 1;
	ck_assert_int_eq(cmx_state_open(&r, f, n), -EPROTONOSUPPORT);
	free(f);
	close(dfd);
}
END_TEST

/* One EVENT record of len bytes, its head ev: whether the file opens. */
static int event_opens(int dfd, const struct cmx_state_event *ev, size_t len)
{
	struct cmx_state_writer *w = malloc(sizeof(*w));
	uint8_t rec[sizeof(*ev) + 70 * sizeof(struct cmx_state_event_cb)] = {0};
	struct cmx_state_reader r;
	const void *p;
	size_t n;
	int e;

	ck_assert_uint_le(len, sizeof(rec));
	memcpy(rec, ev, sizeof(*ev) < len ? sizeof(*ev) : len);
	ck_assert_int_eq(cmx_state_begin(w, dfd, "e.state", 7, 1, 1, "ci"), 0);
	struct iovec iov = {rec, len};
	cmx_state_put(w, CMX_STATE_EVENT, &iov, 1);
	ck_assert_int_eq(cmx_state_commit(w), 0);
	free(w);
	ck_assert_int_eq(cmx_state_map(dfd, "e.state", &p, &n), 0);
	e = cmx_state_open(&r, p, n);
	cmx_state_unmap(p, n);
	return e;
}

/* An EVENT record whose checksums hold but whose shape does not: its
 * length and its count of callbacks disagree, too many callbacks, flags
 * no checkpoint writes. */
START_TEST(event_shape)
{
	int dfd = cmx_state_dir_open(dir);
	struct cmx_state_event ev = {.id = 0x10002, .context = 0x10000, .nc = 2};
	const size_t cb = sizeof(struct cmx_state_event_cb);

	ck_assert_int_eq(event_opens(dfd, &ev, sizeof(ev) + 2 * cb), 0);
	ck_assert_int_eq(event_opens(dfd, &ev, sizeof(ev) + cb), -EBADMSG);
	ck_assert_int_eq(event_opens(dfd, &ev, sizeof(ev) + 3 * cb), -EBADMSG);
	ck_assert_int_eq(event_opens(dfd, &ev, sizeof(ev) - 8), -EBADMSG);
	ev.nc = CMX_STATE_EVENT_CBS + 1;
	ck_assert_int_eq(event_opens(dfd, &ev, sizeof(ev) + ev.nc * cb), -EBADMSG);
	ev.nc = 0;
	ev.flags = CMX_STATE_EV_ALL + 1;
	ck_assert_int_eq(event_opens(dfd, &ev, sizeof(ev)), -EBADMSG);
	close(dfd);
}
END_TEST

/* Bytes of image_opens()' head: less cuts it short. */
static size_t image_head = sizeof(struct cmx_state_image);

/* One IMAGE record, its head im and n bytes after it: whether the file
 * opens, and the offset the reader gives its box. */
static int image_opens(int dfd, const struct cmx_state_image *im, size_t n, uint64_t *off)
{
	struct cmx_state_writer *w = malloc(sizeof(*w));
	static uint8_t bytes[4096];
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	const void *p;
	size_t len;
	int e;

	ck_assert_uint_le(n, sizeof(bytes));
	ck_assert_int_eq(cmx_state_begin(w, dfd, "i.state", 7, 1, 1, "ci"), 0);
	struct iovec iov[2] = {{(void *)im, image_head}, {bytes, n}};
	cmx_state_put(w, CMX_STATE_IMAGE, iov, 2);
	ck_assert_int_eq(cmx_state_commit(w), 0);
	free(w);
	ck_assert_int_eq(cmx_state_map(dfd, "i.state", &p, &len), 0);
	e = cmx_state_open(&r, p, len);
	if (!e) {
		ck_assert_int_eq(cmx_state_next(&r, &rec), 1);
		*off = rec.offset;
	}
	cmx_state_unmap(p, len);
	return e;
}

/* IMAGE records whose checksums hold: boxes a checkpoint writes (part of
 * a row, rows of a slice, whole slices) opened with their offset in the
 * packed image; a box past the image, one that is no run of its packed
 * bytes, bytes that are not the box's, sizes of 0 or past the limits
 * refused. */
START_TEST(image_shape)
{
	int dfd = cmx_state_dir_open(dir);
	/* 5 elements of 4 bytes, 3 rows, 4 slices: rows of 20, slices of 60. */
	const struct cmx_state_image base = {
	    .id = 0x10003, .elem = 4, .extent = {5, 3, 4}, .region = {1, 1, 1}};
	struct cmx_state_image im;
	uint64_t off = 0;

#define IMAGE(...)                                                                                 \
	do {                                                                                       \
		im = base;                                                                         \
		__VA_ARGS__;                                                                       \
	} while (0)
	IMAGE(im.origin[0] = 2, im.origin[1] = 1, im.origin[2] = 3, im.region[0] = 3);
	ck_assert_int_eq(image_opens(dfd, &im, 12, &off), 0);
	ck_assert_uint_eq(off, 3 * 60 + 20 + 8);
	IMAGE(im.region[0] = 5, im.region[1] = 2, im.origin[1] = 1, im.origin[2] = 2);
	ck_assert_int_eq(image_opens(dfd, &im, 40, &off), 0);
	ck_assert_uint_eq(off, 2 * 60 + 20);
	IMAGE(im.region[0] = 5, im.region[1] = 3, im.region[2] = 3, im.origin[2] = 1);
	ck_assert_int_eq(image_opens(dfd, &im, 180, &off), 0);
	ck_assert_uint_eq(off, 60);
	/* Not the box's bytes. */
	IMAGE(im.region[0] = 3);
	ck_assert_int_eq(image_opens(dfd, &im, 8, &off), -EBADMSG);
	ck_assert_int_eq(image_opens(dfd, &im, 16, &off), -EBADMSG);
	ck_assert_int_eq(image_opens(dfd, &im, 0, &off), -EBADMSG);
	/* Past the image. */
	IMAGE(im.origin[0] = 3, im.region[0] = 3);
	ck_assert_int_eq(image_opens(dfd, &im, 12, &off), -EBADMSG);
	IMAGE(im.origin[2] = 4);
	ck_assert_int_eq(image_opens(dfd, &im, 4, &off), -EBADMSG);
	IMAGE(im.origin[1] = UINT64_MAX);
	ck_assert_int_eq(image_opens(dfd, &im, 4, &off), -EBADMSG);
	/* No run of the packed bytes: part of two rows, rows of two slices
	 * that are not whole slices. */
	IMAGE(im.region[0] = 2, im.region[1] = 2);
	ck_assert_int_eq(image_opens(dfd, &im, 16, &off), -EBADMSG);
	IMAGE(im.region[0] = 5, im.region[1] = 2, im.region[2] = 2);
	ck_assert_int_eq(image_opens(dfd, &im, 80, &off), -EBADMSG);
	/* Sizes of 0, and past the limits. */
	IMAGE(im.region[1] = 0);
	ck_assert_int_eq(image_opens(dfd, &im, 0, &off), -EBADMSG);
	IMAGE(im.extent[2] = 0);
	ck_assert_int_eq(image_opens(dfd, &im, 4, &off), -EBADMSG);
	IMAGE(im.elem = 0);
	ck_assert_int_eq(image_opens(dfd, &im, 0, &off), -EBADMSG);
	IMAGE(im.elem = CMX_STATE_IMAGE_ELEM + 1);
	ck_assert_int_eq(image_opens(dfd, &im, CMX_STATE_IMAGE_ELEM + 1, &off), -EBADMSG);
	IMAGE(im.extent[0] = CMX_STATE_IMAGE_DIM + 1);
	ck_assert_int_eq(image_opens(dfd, &im, 4, &off), -EBADMSG);
	/* A head cut short. */
	IMAGE(im.region[0] = 1);
	image_head = sizeof(im) - 8;
	ck_assert_int_eq(image_opens(dfd, &im, 0, &off), -EBADMSG);
	image_head = sizeof(im);
#undef IMAGE
	close(dfd);
}
END_TEST

/* A file's name says which worker's it is; its header alone says whose
 * tenant, checked as a whole file's is. */
START_TEST(names_and_heads)
{
	int dfd = cmx_state_dir_open(dir), fd;
	struct cmx_state_head h;
	char key[CMX_STATE_KEY_MAX], out[CMX_STATE_KEY_MAX], big[200];

	cmx_state_key_name("l:0", out, sizeof(out));
	ck_assert_str_eq(out, "l_0");
	cmx_state_key_name("t:a.b-c", out, sizeof(out));
	ck_assert_str_eq(out, "t_a_b_c");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[0] = 't';
	big[1] = ':';
	cmx_state_key_name(big, out, sizeof(out));
	ck_assert_uint_eq(strlen(out), CMX_STATE_KEY_MAX - 1);

	ck_assert_int_eq(cmx_state_name_key("v_12-i0123456789abcdef-ci-3.state", key, sizeof(key)),
			 1);
	ck_assert_str_eq(key, "v_12");
	ck_assert_int_eq(cmx_state_name_key("t_ci-m0123456789abcdef-0-9.state", key, sizeof(key)),
			 1);
	ck_assert_str_eq(key, "t_ci");
	/* An older clmuxd's keyed names ("<key>-p<pid>-", "<key>-m<pid>-"). */
	ck_assert_int_eq(cmx_state_name_key("v_12-p77-ci-3.state", key, sizeof(key)), 1);
	ck_assert_str_eq(key, "v_12");
	ck_assert_int_eq(cmx_state_name_key("t_ci-m5-0-9.state", key, sizeof(key)), 1);
	ck_assert_str_eq(key, "t_ci");
	/* Older names, and names of no worker: none. */
	ck_assert_int_eq(cmx_state_name_key("p77-ci-3.state", key, sizeof(key)), 0);
	ck_assert_int_eq(cmx_state_name_key("m77-0-3.state", key, sizeof(key)), 0);
	ck_assert_int_eq(cmx_state_name_key("clone-3.state", key, sizeof(key)), 0);
	ck_assert_int_eq(cmx_state_name_key("t_.x-3.state", key, sizeof(key)), 0);
	ck_assert_int_eq(cmx_state_name_key("x_ci-3.state", key, sizeof(key)), 0);
	ck_assert_int_eq(cmx_state_name_key("t_ci", key, sizeof(key)), 0);
	ck_assert_int_eq(cmx_state_name_key("t_ci-3.state", key, 4), 0);

	ck_assert_int_eq(write_sample(dfd, "t_ci-p1-ci-7.state"), 0);
	ck_assert_int_eq(cmx_state_head_read(dfd, "t_ci-p1-ci-7.state", &h), 0);
	ck_assert_str_eq(h.tenant, "ci");
	ck_assert_uint_eq(h.session, 7);
	/* A header changed, cut short, or another version's: refused. */
	fd = openat(dfd, "t_ci-p1-ci-7.state", O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "X", 1, 70), 1);
	ck_assert_int_eq(cmx_state_head_read(dfd, "t_ci-p1-ci-7.state", &h), -EBADMSG);
	ck_assert_int_eq(ftruncate(fd, 100), 0);
	ck_assert_int_eq(cmx_state_head_read(dfd, "t_ci-p1-ci-7.state", &h), -EBADMSG);
	close(fd);
	ck_assert_int_eq(cmx_state_head_read(dfd, "none.state", &h), -ENOENT);
	ck_assert_int_eq(write_sample(dfd, "v.state"), 0);
	fd = openat(dfd, "v.state", O_RDWR);
	uint32_t v = CMX_STATE_VERSION - 1;
	ck_assert_int_eq(pwrite(fd, &v, 4, 8), 4);
	close(fd);
	ck_assert_int_eq(cmx_state_head_read(dfd, "v.state", &h), -EPROTONOSUPPORT);
	ck_assert_int_eq(fchmodat(dfd, "v.state", 0644, 0), 0);
	ck_assert_int_eq(cmx_state_head_read(dfd, "v.state", &h), -EPERM);
	close(dfd);
}
END_TEST

/* The directory and its files are the daemon's user's alone. */
START_TEST(private)
{
	char sub[128];
	int dfd, fd;
	const void *p;
	size_t n;

	snprintf(sub, sizeof(sub), "%s/made", dir);
	dfd = cmx_state_dir_open(sub);
	ck_assert_int_ge(dfd, 0);
	struct stat st;
	ck_assert_int_eq(stat(sub, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(write_sample(dfd, "s.state"), 0);
	ck_assert_int_eq(fstatat(dfd, "s.state", &st, 0), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0600);
	ck_assert_int_eq(fchmodat(dfd, "s.state", 0644, 0), 0);
	ck_assert_int_eq(cmx_state_map(dfd, "s.state", &p, &n), -EPERM);
	ck_assert_int_eq(symlinkat("s.state", dfd, "link.state"), 0);
	ck_assert_int_lt(cmx_state_map(dfd, "link.state", &p, &n), 0);
	fd = openat(dfd, "short.state", O_WRONLY | O_CREAT, 0600);
	ck_assert_int_eq(write(fd, "CMXSTAT\n", 8), 8);
	close(fd);
	ck_assert_int_eq(cmx_state_map(dfd, "short.state", &p, &n), -EBADMSG);
	close(dfd);
	ck_assert_int_eq(chmod(sub, 0750), 0);
	ck_assert_int_eq(cmx_state_dir_open(sub), -EPERM);
	if (geteuid() != 0)
		ck_assert_int_eq(cmx_state_dir_open("/"), -EPERM);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("state");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, damaged);
	tcase_add_test(tc, event_shape);
	tcase_add_test(tc, image_shape);
	tcase_add_test(tc, private);
	tcase_add_test(tc, names_and_heads);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
