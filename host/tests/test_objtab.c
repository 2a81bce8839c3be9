// SPDX-License-Identifier: MIT
// Unit tests of the session object table: ids, kinds, deletion, growth.
#include <check.h>
#include <errno.h>
#include <stdlib.h>

#include "object.h"
#include "objtab.h"

static struct cmx_obj *obj(uint64_t id)
{
	struct cmx_obj *o = calloc(1, sizeof(*o));

	o->id = id;
	return o;
}

START_TEST(add_get_del)
{
	struct cmx_objtab t;
	struct cmx_obj *a = obj(1), *b = obj(2), *dup = obj(1);

	cmx_objtab_init(&t);
	ck_assert_ptr_null(cmx_objtab_get(&t, 1));
	ck_assert_int_eq(cmx_objtab_add(&t, a), 0);
	ck_assert_int_eq(cmx_objtab_add(&t, b), 0);
	ck_assert_int_eq(cmx_objtab_add(&t, dup), -EEXIST);
	ck_assert_ptr_eq(cmx_objtab_get(&t, 1), a);
	ck_assert_ptr_eq(cmx_objtab_del(&t, 1), a);
	ck_assert_ptr_null(cmx_objtab_get(&t, 1));
	ck_assert_ptr_null(cmx_objtab_del(&t, 1));
	ck_assert_ptr_eq(cmx_objtab_get(&t, 2), b);
	ck_assert_uint_eq(t.count, 1);
	cmx_objtab_fini(&t);
	free(a);
	free(b);
	free(dup);
}
END_TEST

/* Many objects, interleaved deletes (tombstones), forged ids never found. */
START_TEST(churn)
{
	enum { N = 20000 };
	struct cmx_objtab t;
	struct cmx_obj **all = calloc(N, sizeof(*all));

	cmx_objtab_init(&t);
	for (int round = 0; round < 3; round++) {
		for (uint64_t i = 0; i < N; i++) {
			all[i] = obj(i * 7919 + 1);
			ck_assert_int_eq(cmx_objtab_add(&t, all[i]), 0);
		}
		for (uint64_t i = 0; i < N; i += 2)
			ck_assert_ptr_eq(cmx_objtab_del(&t, all[i]->id), all[i]);
		for (uint64_t i = 0; i < N; i++) {
			struct cmx_obj *o = cmx_objtab_get(&t, all[i]->id);
			ck_assert_ptr_eq(o, i % 2 ? all[i] : NULL);
			ck_assert_ptr_null(cmx_objtab_get(&t, all[i]->id + 1));
		}
		for (uint64_t i = 1; i < N; i += 2)
			ck_assert_ptr_eq(cmx_objtab_del(&t, all[i]->id), all[i]);
		ck_assert_uint_eq(t.count, 0);
		for (uint64_t i = 0; i < N; i++)
			free(all[i]);
	}
	ck_assert_uint_le(t.cap, 4 * 65536);
	cmx_objtab_fini(&t);
	free(all);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("objtab");
	TCase *tc = tcase_create("objtab");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, add_get_del);
	tcase_add_test(tc, churn);
	tcase_set_timeout(tc, 60);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
