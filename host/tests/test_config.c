// SPDX-License-Identifier: MIT
// Unit tests: clmuxd.conf parsing, quota values, identity lookup, and the
// comment-keeping edit that saves a changed quota.
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conffile.h"
#include "tenant.h"

static const char conf[] = "# clmuxd.conf\n"
			   "[clmuxd]\n"
			   "default-tenant = guests\n"
			   "\n"
			   "[tenant alice]\n"
			   "mem = 2G   \n"
			   "weight = 3\n"
			   "uid = 1000\n"
			   "; a comment\n"
			   "[defaults]\n"
			   "objects = 500\n"
			   "[tenant bob]\n"
			   "cap = 50%\n"
			   "rate = 1G/s\n"
			   "gid = 100\n"
			   "cid = 7\n";

static void load(struct cmx_tenants *ts, const char *text)
{
	char why[160];

	memset(ts, 0, sizeof(*ts));
	cmx_quota_unlimited(&ts->defaults);
	ck_assert_msg(cmx_config_parse(text, ts, why, sizeof(why)) == 0, "%s", why);
}

START_TEST(parse)
{
	struct cmx_tenants ts;
	struct cmx_tenant *a, *b;

	load(&ts, conf);
	ck_assert_uint_eq(ts.count, 2);
	ck_assert_str_eq(ts.fallback, "guests");
	a = cmx_tenant_find(&ts, "alice");
	b = cmx_tenant_find(&ts, "bob");
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_nonnull(b);
	ck_assert_uint_eq(a->q.mem, 2ull << 30);
	ck_assert_uint_eq(a->q.weight, 3);
	/* Defaults apply wherever their section stands. */
	ck_assert_uint_eq(a->q.objects, 500);
	ck_assert_uint_eq(b->q.objects, 500);
	ck_assert_uint_eq(b->q.mem, CMX_UNLIMITED);
	ck_assert_uint_eq(b->q.cap, 50);
	ck_assert_uint_eq(b->q.rate, 1ull << 30);
	ck_assert_uint_eq(b->q.weight, 1);
	cmx_tenants_fini(&ts);
}
END_TEST

START_TEST(errors)
{
	static const char *bad[] = {
	    "mem = 1G\n",			/* outside a section */
	    "[tenant a]\nmem = lots\n",		/* bad size */
	    "[tenant a]\nweight = 0\n",		/* weight 1..1000 */
	    "[tenant a]\ncap = 101%\n",		/* cap 1..100 */
	    "[tenant a]\ncolour = blue\n",	/* unknown key */
	    "[tenant a/b]\n",			/* bad name */
	    "[tenant a]\nuid = -1\n",		/* bad uid */
	    "[nonsense]\n",			/* unknown section */
	    "[tenant a]\nmem\n",		/* no '=' */
	    "[tenant a\n",			/* unclosed */
	    "[clmuxd]\ndefault-tenant = a b\n", /* bad name */
	};
	char why[160];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct cmx_tenants ts = {0};
		cmx_quota_unlimited(&ts.defaults);
		why[0] = '\0';
		ck_assert_msg(cmx_config_parse(bad[i], &ts, why, sizeof(why)) != 0, "accepted: %s",
			      bad[i]);
		ck_assert_msg(!strncmp(why, "line ", 5), "no line number: %s", why);
		cmx_tenants_fini(&ts);
	}
}
END_TEST

START_TEST(lookup)
{
	struct cmx_tenants ts;
	struct cmx_ident id = {0};

	load(&ts, conf);
	id.has_cred = 1;
	id.uid = 1000;
	id.gid = 5;
	ck_assert_str_eq(cmx_tenant_lookup(&ts, &id)->name, "alice");
	id.uid = 1001;
	id.gid = 100;
	ck_assert_str_eq(cmx_tenant_lookup(&ts, &id)->name, "bob");
	id.gid = 101;
	/* Unknown: the default tenant, created on demand with the defaults. */
	ck_assert_str_eq(cmx_tenant_lookup(&ts, &id)->name, "guests");
	ck_assert_uint_eq(cmx_tenant_find(&ts, "guests")->q.objects, 500);
	id.listener_tenant = "carol";
	ck_assert_str_eq(cmx_tenant_lookup(&ts, &id)->name, "carol");
	id.listener_tenant = NULL;
	id.has_cid = 1;
	id.cid = 7;
	ck_assert_str_eq(cmx_tenant_lookup(&ts, &id)->name, "bob");
	id.token_tenant = "alice";
	ck_assert_str_eq(cmx_tenant_lookup(&ts, &id)->name, "alice");
	/* No default tenant: refused. */
	ts.fallback[0] = '\0';
	id = (struct cmx_ident){.has_cred = 1, .uid = 4242, .gid = 4242};
	ck_assert_ptr_null(cmx_tenant_lookup(&ts, &id));
	cmx_tenants_fini(&ts);
}
END_TEST

START_TEST(quota_values)
{
	struct cmx_quota q;
	char why[160], v[64];

	cmx_quota_unlimited(&q);
	ck_assert_int_eq(cmx_quota_set(&q, "mem", "512M", why, sizeof(why)), 0);
	ck_assert_uint_eq(q.mem, 512ull << 20);
	ck_assert_int_eq(cmx_quota_set(&q, "mem", "1.5GiB", why, sizeof(why)), 0);
	ck_assert_uint_eq(q.mem, 3ull << 29);
	cmx_quota_format(&q, "mem", v, sizeof(v));
	ck_assert_str_eq(v, "1536M");
	ck_assert_int_eq(cmx_quota_set(&q, "rate", "100M/s", why, sizeof(why)), 0);
	cmx_quota_format(&q, "rate", v, sizeof(v));
	ck_assert_str_eq(v, "100M/s");
	ck_assert_int_eq(cmx_quota_set(&q, "inflight", "none", why, sizeof(why)), 0);
	cmx_quota_format(&q, "inflight", v, sizeof(v));
	ck_assert_str_eq(v, "none");
	ck_assert_int_ne(cmx_quota_set(&q, "objects", "12x", why, sizeof(why)), 0);
	ck_assert_int_ne(cmx_quota_set(&q, "mem", "-1", why, sizeof(why)), 0);
	ck_assert_int_ne(cmx_quota_set(&q, "mem", "99999999T", why, sizeof(why)), 0);
}
END_TEST

/* Every key of the quota table reads back what it writes, with and without
 * its unit, and refuses what its range excludes. */
START_TEST(quota_table_round_trip)
{
	static const struct {
		const char *key, *in, *out;
	} ok[] = {
	    {"mem", "2G", "2G"},	 {"objects", "10000", "10000"},
	    {"inflight", "256", "256"},	 {"weight", "3", "3"},
	    {"cap", "50%", "50%"},	 {"cap", "50", "50%"},
	    {"cap", "100%", "none"},	 {"cap", "unlimited", "none"},
	    {"rate", "1G/s", "1G/s"},	 {"rate", "1G", "1G/s"},
	    {"sessions", "8", "8"},	 {"build-mem", "4G", "4G"},
	    {"build-time", "60s", "60"}, {"builds", "2", "2"},
	    {"kernel-time", "30", "30"}, {"kernel-time", "none", "none"},
	};
	static const struct {
		const char *key, *in;
	} bad[] = {
	    {"weight", "0"},	 {"weight", "1001"}, {"weight", "none"}, {"cap", "101%"},
	    {"cap", "%"},	 {"rate", "0/s"},    {"rate", "/s"},	 {"build-mem", "32M"},
	    {"build-time", "s"}, {"objects", "0"},   {"mem", "none%"},	 {"builds", "nones"},
	};
	struct cmx_quota q;
	char why[200], v[64];

	for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cmx_quota_unlimited(&q);
		ck_assert_msg(!cmx_quota_set(&q, ok[i].key, ok[i].in, why, sizeof(why)),
			      "%s=%s: %s", ok[i].key, ok[i].in, why);
		cmx_quota_format(&q, ok[i].key, v, sizeof(v));
		ck_assert_str_eq(v, ok[i].out);
	}
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cmx_quota_unlimited(&q);
		ck_assert_msg(cmx_quota_set(&q, bad[i].key, bad[i].in, why, sizeof(why)) == -EINVAL,
			      "%s=%s accepted", bad[i].key, bad[i].in);
		ck_assert_ptr_nonnull(strstr(why, "bad value"));
	}
	ck_assert_int_eq(cmx_quota_set(&q, "memory", "1G", why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "unknown quota 'memory' (mem, objects, inflight, weight, cap, rate, "
			      "sessions, build-mem, build-time, builds, kernel-time)");
	for (unsigned k = 0; k < CMX_QUOTA_KEYS; k++)
		ck_assert_ptr_eq(cmx_quota_key_find(cmx_quota_keys[k].name), &cmx_quota_keys[k]);
}
END_TEST

/* The [clmuxd] tuning keys: defaults, values in range, a clear refusal
 * out of it, and the environment's overrides checked the same way. */
START_TEST(tuning_keys)
{
	struct cmx_tenants ts;
	struct cmx_tuning t;
	char why[200];

	load(&ts, "[clmuxd]\nshort-blocking = on\nshm-sync-spin-us = 20\npinned = off\n"
		  "pinned-min = 64K\nunread-s = 20\n");
	ck_assert_int_eq(ts.tune.short_blocking, 1);
	ck_assert_int_eq(ts.tune.shm_sync_spin_us, 20);
	ck_assert_int_eq(ts.tune.pinned, 0);
	ck_assert_int_eq(ts.tune.pinned_min, 64 << 10);
	ck_assert_int_eq(ts.tune.unread_s, 20);
	ck_assert_int_eq(ts.tune.sched_peek, 1);
	ck_assert_int_eq(ts.tune.uring_coop, 1);
	ck_assert_int_eq(ts.tune.equal_turns, CMX_TUNE_AUTO);
	cmx_tenants_fini(&ts);
	load(&ts, "[clmuxd]\nshort-blocking = auto\nequal-turns = off\n");
	ck_assert_int_eq(ts.tune.short_blocking, CMX_TUNE_AUTO);
	ck_assert_int_eq(ts.tune.equal_turns, 0);
	ck_assert_int_eq(ts.tune.shm_sync_spin_us, CMX_TUNE_AUTO);
	ck_assert_int_eq(ts.tune.unread_s, 60);
	cmx_tenants_fini(&ts);

	memset(&ts, 0, sizeof(ts));
	ck_assert_int_eq(cmx_config_parse("[clmuxd]\n\nunread-s = 0\n", &ts, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "line 3: unread-s = '0': expected 1 to 86400");
	ck_assert_int_eq(cmx_config_parse("[clmuxd]\nsched-peek = auto\n", &ts, why, sizeof(why)),
			 -EINVAL);
	ck_assert_str_eq(why, "line 2: sched-peek = 'auto': expected on, off");
	ck_assert_int_eq(cmx_config_parse("[clmuxd]\nshm-sync-spin-us = 5x\n", &ts, why,
					  sizeof(why)),
			 -EINVAL);
	cmx_tenants_fini(&ts);

	cmx_tuning_defaults(&t);
	setenv("CLMUX_SHORT_BLOCKING", "1", 1);
	setenv("CLMUX_UNREAD_S", "20", 1);
	ck_assert_int_eq(cmx_tuning_env(&t, why, sizeof(why)), 0);
	ck_assert_int_eq(t.short_blocking, 1);
	ck_assert_int_eq(t.unread_s, 20);
	setenv("CLMUX_UNREAD_S", "20s", 1);
	ck_assert_int_eq(cmx_tuning_env(&t, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "CLMUX_UNREAD_S='20s': expected 1 to 86400");
	unsetenv("CLMUX_UNREAD_S");
	setenv("CLMUX_SHORT_BLOCKING", "yes", 1);
	ck_assert_int_eq(cmx_tuning_env(&t, why, sizeof(why)), -EINVAL);
	ck_assert_str_eq(why, "CLMUX_SHORT_BLOCKING='yes': expected on, off or auto");
	unsetenv("CLMUX_SHORT_BLOCKING");
}
END_TEST

START_TEST(edit_keeps_the_rest)
{
	struct cmx_tenants ts;
	struct cmx_quota q;
	char why[160], *out, *again;

	load(&ts, conf);
	q = cmx_tenant_find(&ts, "alice")->q;
	ck_assert_int_eq(cmx_quota_set(&q, "mem", "1G", why, sizeof(why)), 0);
	ck_assert_int_eq(cmx_quota_set(&q, "inflight", "64", why, sizeof(why)), 0);
	out = cmx_config_edit(conf, "alice", &q);
	ck_assert_ptr_nonnull(out);
	ck_assert_ptr_nonnull(strstr(out, "# clmuxd.conf\n"));
	ck_assert_ptr_nonnull(strstr(out, "; a comment\n"));
	ck_assert_ptr_nonnull(strstr(out, "uid = 1000\n"));
	ck_assert_ptr_null(strstr(out, "mem = 2G"));
	cmx_tenants_fini(&ts);
	load(&ts, out);
	ck_assert_uint_eq(cmx_tenant_find(&ts, "alice")->q.mem, 1ull << 30);
	ck_assert_uint_eq(cmx_tenant_find(&ts, "alice")->q.inflight, 64);
	ck_assert_uint_eq(cmx_tenant_find(&ts, "bob")->q.cap, 50);
	/* Editing again with the same values changes nothing. */
	again = cmx_config_edit(out, "alice", &q);
	ck_assert_str_eq(again, out);
	free(again);
	/* A tenant without a section gets one at the end. */
	again = cmx_config_edit(out, "dave", &q);
	ck_assert_ptr_nonnull(strstr(again, "[tenant dave]\nmem = 1G\n"));
	cmx_tenants_fini(&ts);
	load(&ts, again);
	ck_assert_uint_eq(cmx_tenant_find(&ts, "dave")->q.inflight, 64);
	cmx_tenants_fini(&ts);
	free(again);
	free(out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, parse);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, lookup);
	tcase_add_test(tc, quota_values);
	tcase_add_test(tc, quota_table_round_trip);
	tcase_add_test(tc, tuning_keys);
	tcase_add_test(tc, edit_keeps_the_rest);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
