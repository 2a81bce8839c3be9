// SPDX-License-Identifier: MIT
// Unit tests: a libvirt domain's XML as clmux reads it (host/domxml.c):
// the <clmux:gpu> element found by its namespace, and hostile XML refused.
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "domxml.h"

#define UUID "6522b6aa-0a8f-4fe5-a470-0c51f5bdface"

static int parse(const char *xml, struct cmx_domxml *d, char *why)
{
	return cmx_domxml_parse(xml, strlen(xml), d, why, 200);
}

START_TEST(element)
{
	struct cmx_domxml d;
	char why[200];
	const char *xml = "<domain type='qemu'><name>vm1</name><uuid>" UUID "</uuid>"
			  "<metadata><other:gpu xmlns:other='urn:x' mem='1G'/>"
			  "<c:gpu xmlns:c='" CMX_DOMXML_NS "' transport='ivshmem' mem='4G' "
			  "weight='2'/></metadata></domain>";

	ck_assert_msg(parse(xml, &d, why) == 0, "%s", why);
	ck_assert(d.has_gpu);
	ck_assert_str_eq(d.name, "vm1");
	ck_assert_str_eq(d.uuid, UUID);
	ck_assert_uint_eq(d.nattrs, 3);
	ck_assert_str_eq(d.key[1], "mem");
	ck_assert_str_eq(d.value[1], "4G");
}
END_TEST

START_TEST(absent)
{
	struct cmx_domxml d;
	char why[200];

	/* Another namespace's gpu element is not clmux's; no UUID is needed
	 * where there is no element (the hook passes such domains). */
	ck_assert(parse("<domain><name>a</name><metadata><g:gpu xmlns:g='urn:x'/></metadata>"
			"</domain>",
			&d, why) == 0);
	ck_assert(!d.has_gpu);
	ck_assert(parse("<domain><name>a</name></domain>", &d, why) == 0);
	ck_assert(!d.has_gpu);
}
END_TEST

START_TEST(refused)
{
	struct cmx_domxml d;
	char why[200], big[4096];
	int n;

	ck_assert(parse("<domain><name>a</name", &d, why) < 0);
	ck_assert(parse("<vm><name>a</name></vm>", &d, why) < 0);
	ck_assert(parse("<domain><uuid>" UUID "</uuid></domain>", &d, why) < 0);
	/* The element needs the domain's UUID. */
	ck_assert(parse("<domain><name>a</name><metadata><c:gpu xmlns:c='" CMX_DOMXML_NS
			"'/></metadata></domain>",
			&d, why) < 0);
	ck_assert(strstr(why, "uuid"));
	/* An attribute longer than any value clmux takes. */
	n = snprintf(big, sizeof(big),
		     "<domain><name>a</name><uuid>" UUID
		     "</uuid><metadata><c:gpu xmlns:c='" CMX_DOMXML_NS "' mem='");
	memset(big + n, '9', 100);
	snprintf(big + n + 100, sizeof(big) - (size_t)n - 100, "'/></metadata></domain>");
	ck_assert(parse(big, &d, why) < 0);
	ck_assert_msg(strstr(why, "'mem' too long"), "%s", why);
	/* More attributes than clmux has. */
	n = snprintf(big, sizeof(big),
		     "<domain><name>a</name><uuid>" UUID
		     "</uuid><metadata><c:gpu xmlns:c='" CMX_DOMXML_NS "'");
	for (int i = 0; i < CMX_DOMXML_ATTRS + 1; i++)
		n += snprintf(big + n, sizeof(big) - (size_t)n, " a%d='1'", i);
	snprintf(big + n, sizeof(big) - (size_t)n, "/></metadata></domain>");
	ck_assert(parse(big, &d, why) < 0);
	/* Entities from a DTD of the document's own are not expanded into an
	 * external file or a billion laughs. */
	ck_assert(parse("<!DOCTYPE domain [<!ENTITY x SYSTEM 'file:///etc/passwd'>]>"
			"<domain><name>&x;</name></domain>",
			&d, why) < 0 ||
		  !strstr(d.name, "root:"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("domxml");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, element);
	tcase_add_test(tc, absent);
	tcase_add_test(tc, refused);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
