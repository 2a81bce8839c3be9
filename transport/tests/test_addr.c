// SPDX-License-Identifier: MIT
// Transport addresses (transport/addr.c): every form, its errors, options,
// and a listen/connect round trip on each local kind.
#include <check.h>
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"

static struct cmx_addr parse_ok(const char *spec)
{
	struct cmx_addr a;
	char err[256] = "";

	ck_assert_msg(!cmx_addr_parse(spec, &a, err, sizeof(err)), "%s: %s", spec, err);
	return a;
}

START_TEST(forms)
{
	struct cmx_addr a;
	char buf[160];

	a = parse_ok("unix:/run/clmux/clmuxd.sock");
	ck_assert_int_eq(a.type, CMX_ADDR_UNIX);
	ck_assert_str_eq(a.path, "/run/clmux/clmuxd.sock");
	a = parse_ok("vsock:2:7447");
	ck_assert_int_eq(a.type, CMX_ADDR_VSOCK);
	ck_assert_uint_eq(a.cid, 2);
	ck_assert_uint_eq(a.port, 7447);
	ck_assert_str_eq(cmx_addr_str(&a, buf, sizeof(buf)), "vsock:2:7447");
	a = parse_ok("vsock:7447");
	ck_assert_uint_eq(a.cid, CMX_VSOCK_CID_ANY);
	ck_assert_str_eq(cmx_addr_str(&a, buf, sizeof(buf)), "vsock:7447");
	a = parse_ok("vsock-uds:/run/fc/v.sock_7447,cid=3");
	ck_assert_int_eq(a.type, CMX_ADDR_VSOCK_UDS);
	ck_assert_str_eq(a.path, "/run/fc/v.sock_7447");
	ck_assert_str_eq(cmx_addr_str(&a, buf, sizeof(buf)), "vsock-uds:/run/fc/v.sock_7447");
	a = parse_ok("tcp:127.0.0.1:7447");
	ck_assert_int_eq(a.type, CMX_ADDR_TCP);
	ck_assert_str_eq(a.host, "127.0.0.1");
	ck_assert_uint_eq(a.port, 7447);
	a = parse_ok("tcp:[::1]:7447,tokens=/etc/t");
	ck_assert_str_eq(a.host, "::1");
	ck_assert_str_eq(cmx_addr_str(&a, buf, sizeof(buf)), "tcp:[::1]:7447");
	a = parse_ok("tcp:fe80::1:9"); /* a bare v6 literal: the last colon is the port's */
	ck_assert_str_eq(a.host, "fe80::1");
	ck_assert_uint_eq(a.port, 9);
	a = parse_ok("tcp:gpu-host.example:7447");
	ck_assert_str_eq(a.host, "gpu-host.example");
}
END_TEST

START_TEST(errors)
{
	static const char *const bad[] = {
		"", "udp:1", "unix:", "vsock:", "vsock:x", "vsock:2:", "vsock:2:0", "vsock:-1:5",
		"vsock:2:99999999999", "vsock:4294967295:5", "tcp:", "tcp:1.2.3.4", "tcp::5",
		"tcp:[::1]", "tcp:[::1]5", "tcp:[::1:5", "tcp:h:65536", "tcp:h:+5", "tcp:h: 5",
	};
	struct cmx_addr a;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_msg(cmx_addr_parse(bad[i], &a, err, sizeof(err)) == -EINVAL, "'%s' accepted",
			      bad[i]);
		ck_assert_msg(err[0], "'%s': no reason", bad[i]);
	}
}
END_TEST

START_TEST(options)
{
	struct cmx_addr a = parse_ok("tcp:1.2.3.4:5,tokens=/etc/t,tls,cid=33,cidx=4");
	char v[64];

	ck_assert_int_eq(cmx_addr_opt(&a, "tokens", v, sizeof(v)), 0);
	ck_assert_str_eq(v, "/etc/t");
	ck_assert_int_eq(cmx_addr_opt(&a, "tls", v, sizeof(v)), 0);
	ck_assert_str_eq(v, "");
	ck_assert_int_eq(cmx_addr_opt(&a, "cid", v, sizeof(v)), 0);
	ck_assert_str_eq(v, "33");
	ck_assert_int_eq(cmx_addr_opt(&a, "ci", v, sizeof(v)), -ENOENT);
	ck_assert_int_eq(cmx_addr_opt(&a, "key", v, sizeof(v)), -ENOENT);
	ck_assert_int_eq(cmx_addr_opt(&a, "tokens", v, 3), -ENAMETOOLONG);
}
END_TEST

/* One size parser for options and the configuration: units with or
 * without "i" and "B", a fraction, and nothing a number-reading libc
 * function would also take. */
START_TEST(sizes)
{
	static const struct {
		const char *s;
		uint64_t v;
	} ok[] = {
		{ "0", 0 },
		{ "4096", 4096 },
		{ "4096B", 4096 },
		{ "64k", 64ull << 10 },
		{ "64KB", 64ull << 10 },
		{ "512M", 512ull << 20 },
		{ "128MiB", 128ull << 20 },
		{ "1g", 1ull << 30 },
		{ "1.5G", 3ull << 29 },
		{ "1.5GiB", 3ull << 29 },
		{ "0.25K", 256 },
		{ "2T", 2ull << 40 },
		{ "16777215T", 16777215ull << 40 },
		{ "18446744073709551615", UINT64_MAX },
	};
	static const char *bad[] = { "", "M", "-1", "+1", " 1", "1 ", "0x10", "1e3", "inf",
				     "nan", "1.", ".5", "1.5.1G", "12x", "1Gx", "1iB", "1GBB",
				     "16777216T", "18446744073709551616", "99999999T" };
	uint64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		v = 1;
		ck_assert_msg(cmx_size_parse(ok[i].s, &v) == 0, "%s", ok[i].s);
		ck_assert_msg(v == ok[i].v, "%s: %llu", ok[i].s, (unsigned long long)v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(cmx_size_parse(bad[i], &v) == -EINVAL, "%s", bad[i]);
}
END_TEST

/* Numbers of options and variables: digits only, within the range. */
START_TEST(numbers)
{
	static const char *bad[] = { "", "-1", "+1", " 1", "1 ", "0x10", "12x", "1M", "9", "0",
				     "18446744073709551616" };
	uint64_t v = 0;

	ck_assert_int_eq(cmx_uint_parse("1", 1, 8, &v), 0);
	ck_assert_uint_eq(v, 1);
	ck_assert_int_eq(cmx_uint_parse("0008", 1, 8, &v), 0);
	ck_assert_uint_eq(v, 8);
	ck_assert_int_eq(cmx_uint_parse("18446744073709551615", 0, UINT64_MAX, &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		v = 7;
		ck_assert_msg(cmx_uint_parse(bad[i], 1, 8, &v) == -EINVAL, "%s", bad[i]);
		ck_assert_uint_eq(v, 7);
	}
}
END_TEST

/* Listens, connects and moves a byte on each kind this machine has. */
START_TEST(round_trip)
{
	char dir[] = "/tmp/clmux-addr-XXXXXX", spec[128], err[128];
	const char *specs[] = { "unix:%s/a.sock", "vsock-uds:%s/v.sock_7447", "tcp:127.0.0.1:0",
				"tcp:[::1]:0" };

	ck_assert_ptr_nonnull(mkdtemp(dir));
	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		struct cmx_addr a;
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int l, c, s;
		char b = 0;

		snprintf(spec, sizeof(spec), specs[i], dir);
		ck_assert_int_eq(cmx_addr_parse(spec, &a, err, sizeof(err)), 0);
		l = cmx_addr_listen(&a);
		if (l == -EAFNOSUPPORT || l == -EADDRNOTAVAIL) /* no IPv6 here */
			continue;
		ck_assert_msg(l >= 0, "listen %s: %s", spec, strerror(-l));
		if (a.type == CMX_ADDR_TCP) {
			ck_assert_int_eq(getsockname(l, (struct sockaddr *)&ss, &len), 0);
			a.port = ntohs(((struct sockaddr_in *)&ss)->sin_port); /* same offset in v6 */
		}
		c = cmx_addr_connect(&a);
		ck_assert_msg(c >= 0, "connect %s: %s", spec, strerror(-c));
		s = accept(l, NULL, NULL);
		ck_assert_int_ge(s, 0);
		ck_assert_int_eq(send(c, "x", 1, 0), 1);
		ck_assert_int_eq(recv(s, &b, 1, 0), 1);
		ck_assert_int_eq(b, 'x');
		close(s);
		close(c);
		close(l);
		if (a.type != CMX_ADDR_TCP)
			unlink(a.path);
	}
	rmdir(dir);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("addr");
	TCase *tc = tcase_create("addr");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, forms);
	tcase_add_test(tc, errors);
	tcase_add_test(tc, options);
	tcase_add_test(tc, sizes);
	tcase_add_test(tc, numbers);
	tcase_add_test(tc, round_trip);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
