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

/* A file of one CreateBuffer call and 100 bytes of its contents. */
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
	tcase_add_test(tc, private);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
