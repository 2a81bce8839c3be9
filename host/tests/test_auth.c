// SPDX-License-Identifier: MIT
// Token table and failure limit (host/auth.c): loading files, checking
// tokens, and the per-source bucket on a clock the test drives.
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "peer.h"

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

/* The key of a TCP peer at the address text (IPv4 as v4-mapped, as
 * host/peer.c stores it). */
static void tcp_key(const char *text, uint8_t key[16])
{
	struct cmx_peer p = {.kind = CMX_PEER_TCP};

	if (inet_pton(AF_INET6, text, p.ip) != 1) {
		p.ip[10] = p.ip[11] = 0xff;
		ck_assert_int_eq(inet_pton(AF_INET, text, p.ip + 12), 1);
	}
	cmx_peer_key(&p, key);
}

/* A host that owns an IPv6 /64 can take a fresh address for every try:
 * its failures all count against one bucket, while each IPv4 address, and
 * the next /64, keep their own. */
START_TEST(failure_limit_per_64)
{
	static const char *const same64[] = {"2001:db8:1:2::1",
					     "2001:db8:1:2::2",
					     "2001:db8:1:2:ffff:ffff:ffff:ffff",
					     "2001:db8:1:2:1234:5678:9abc:def0",
					     "2001:db8:1:2:8000::",
					     "2001:db8:1:2::99"};
	uint8_t k[16], other64[16], v4a[16], v4b[16], uid[16];
	struct cmx_peer u = {.kind = CMX_PEER_UNIX, .uid = 0x02000000};
	struct cmx_auth *a;
	uint64_t t = 1000000;

	_Static_assert(sizeof(same64) / sizeof(same64[0]) > CMX_AUTH_BURST, "more than a burst");
	tcp_key("2001:db8:1:3::1", other64);
	tcp_key("192.0.2.1", v4a);
	tcp_key("192.0.2.2", v4b);
	cmx_peer_key(&u, uid);
	ck_assert_int_eq(cmx_auth_create(&a), 0);
	for (int i = 0; i < CMX_AUTH_BURST; i++) {
		tcp_key(same64[i], k);
		ck_assert_int_eq(cmx_auth_allowed(a, k, t), 0);
		ck_assert_int_eq(cmx_auth_failed(a, k, t), i == CMX_AUTH_BURST - 1);
	}
	/* Every address of that /64 is refused now, one never seen included. */
	for (size_t i = 0; i < sizeof(same64) / sizeof(same64[0]); i++) {
		tcp_key(same64[i], k);
		ck_assert_msg(cmx_auth_allowed(a, k, t) == -EAGAIN, "%s not refused", same64[i]);
	}
	ck_assert_int_eq(cmx_auth_allowed(a, other64, t), 0);
	/* IPv4: per address, as before. */
	for (int i = 0; i < CMX_AUTH_BURST; i++)
		cmx_auth_failed(a, v4a, t);
	ck_assert_int_eq(cmx_auth_allowed(a, v4a, t), -EAGAIN);
	ck_assert_int_eq(cmx_auth_allowed(a, v4b, t), 0);
	/* A Unix uid's key is not any TCP source's. */
	ck_assert_int_ne(memcmp(uid, v4a, 16), 0);
	ck_assert_int_ne(memcmp(uid, other64, 16), 0);
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
	tcase_add_test(tc, failure_limit_per_64);
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
