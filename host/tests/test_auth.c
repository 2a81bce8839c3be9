// SPDX-License-Identifier: MIT
// Token table and failure limit (host/auth.c): loading files, checking
// tokens, and the per-source bucket on a clock the test drives.
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"

static char dir[] = "/tmp/clmux-auth-XXXXXX";

static const char *write_file(const char *name, const char *text, mode_t mode)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	ck_assert_int_eq(chmod(path, mode), 0);
	return path;
}

START_TEST(load_and_check)
{
	struct cmx_auth *a;
	char err[256], tenant[CMX_TENANT_MAX];
	const char *p = write_file("ok", "# tenants\nalice  aaaaaaaaaaaaaaaa1\n\nbob\tbbbbbbbbbbbbbbbb2 # x\n",
				   0600);

	ck_assert_int_eq(cmx_auth_create(&a), 0);
	ck_assert_int_eq(cmx_auth_load(a, p, err, sizeof(err)), 0);
	ck_assert_int_eq(cmx_auth_check(a, "bbbbbbbbbbbbbbbb2", 17, tenant), 0);
	ck_assert_str_eq(tenant, "bob");
	ck_assert_int_eq(cmx_auth_check(a, "aaaaaaaaaaaaaaaa1", 17, tenant), 0);
	ck_assert_str_eq(tenant, "alice");
	/* A prefix, a longer token, a wrong byte, nothing. */
	ck_assert_int_eq(cmx_auth_check(a, "aaaaaaaaaaaaaaaa", 16, tenant), -EACCES);
	ck_assert_int_eq(cmx_auth_check(a, "aaaaaaaaaaaaaaaa12", 18, tenant), -EACCES);
	ck_assert_int_eq(cmx_auth_check(a, "aaaaaaaaaaaaaaaa2", 17, tenant), -EACCES);
	ck_assert_int_eq(cmx_auth_check(a, "", 0, tenant), -EACCES);
	/* The tenancy configuration adds tokens the same way; one token, one tenant. */
	ck_assert_int_eq(cmx_auth_add(a, "carol", "cccccccccccccccc", 16), 0);
	ck_assert_int_eq(cmx_auth_add(a, "dave", "cccccccccccccccc", 16), -EEXIST);
	ck_assert_int_eq(cmx_auth_add(a, "eve", "short", 5), -EINVAL);
	ck_assert_int_eq(cmx_auth_add(a, "bad name", "dddddddddddddddd", 16), -EINVAL);
	cmx_auth_destroy(a);
}
END_TEST

START_TEST(load_refused)
{
	static const struct {
		const char *text;
		mode_t mode;
		int err;
	} cases[] = {
		{ "alice aaaaaaaaaaaaaaaa\n", 0644, -EPERM }, /* world-readable */
		{ "alice aaaaaaaaaaaaaaaa\n", 0602, -EPERM }, /* world-writable */
		{ "alice\n", 0600, -EINVAL },
		{ "alice aaaaaaaaaaaaaaaa extra\n", 0600, -EINVAL },
		{ "alice short\n", 0600, -EINVAL },
		{ "a aaaaaaaaaaaaaaaa\nb aaaaaaaaaaaaaaaa\n", 0600, -EEXIST },
	};
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct cmx_auth *a;
		const char *p = write_file("bad", cases[i].text, cases[i].mode);
		ck_assert_int_eq(cmx_auth_create(&a), 0);
		err[0] = '\0';
		ck_assert_int_eq(cmx_auth_load(a, p, err, sizeof(err)), cases[i].err);
		ck_assert_msg(err[0], "case %zu: no reason given", i);
		ck_assert_msg(!strstr(err, "aaaaaaaaaaaaaaaa"), "case %zu: the token is in '%s'", i, err);
		cmx_auth_destroy(a);
	}
}
END_TEST

START_TEST(failure_limit)
{
	struct cmx_auth *a;
	uint8_t k1[16] = { 1 }, k2[16] = { 2 };
	uint64_t t = 1000000;

	ck_assert_int_eq(cmx_auth_create(&a), 0);
	for (int i = 0; i < CMX_AUTH_BURST - 1; i++) {
		ck_assert_int_eq(cmx_auth_allowed(a, k1, t), 0);
		ck_assert_int_eq(cmx_auth_failed(a, k1, t), 0);
	}
	ck_assert_int_eq(cmx_auth_allowed(a, k1, t), 0);
	ck_assert_int_eq(cmx_auth_failed(a, k1, t), 1); /* the burst is spent */
	ck_assert_int_eq(cmx_auth_allowed(a, k1, t), -EAGAIN);
	/* Another source is not affected. */
	ck_assert_int_eq(cmx_auth_allowed(a, k2, t), 0);
	/* Refused until drained completely, not one drain step later. */
	ck_assert_int_eq(cmx_auth_allowed(a, k1, t + CMX_AUTH_DRAIN_MS), -EAGAIN);
	ck_assert_int_eq(cmx_auth_allowed(a, k1, t + CMX_AUTH_BURST * CMX_AUTH_DRAIN_MS - 1),
			 -EAGAIN);
	ck_assert_int_eq(cmx_auth_allowed(a, k1, t + CMX_AUTH_BURST * CMX_AUTH_DRAIN_MS), 0);
	/* Failures spaced by the drain time never reach the limit. */
	t += 10 * CMX_AUTH_BURST * CMX_AUTH_DRAIN_MS;
	for (int i = 0; i < 4 * CMX_AUTH_BURST; i++, t += CMX_AUTH_DRAIN_MS) {
		ck_assert_int_eq(cmx_auth_allowed(a, k2, t), 0);
		ck_assert_int_eq(cmx_auth_failed(a, k2, t), 0);
	}
	/* Many sources at once: the table reuses slots, never fails. */
	for (int i = 0; i < 4096; i++) {
		uint8_t k[16] = { 0 };
		memcpy(k, &i, sizeof(i));
		cmx_auth_failed(a, k, t);
	}
	cmx_auth_destroy(a);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("auth");
	TCase *tc = tcase_create("auth");
	SRunner *sr;
	int failed;

	if (!mkdtemp(dir))
		return 1;
	tcase_add_test(tc, load_and_check);
	tcase_add_test(tc, load_refused);
	tcase_add_test(tc, failure_limit);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	for (int i = 0; i < 2; i++) {
		char path[128];
		snprintf(path, sizeof(path), "%s/%s", dir, i ? "bad" : "ok");
		unlink(path);
	}
	rmdir(dir);
	return failed ? 1 : 0;
}
