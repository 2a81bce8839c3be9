// SPDX-License-Identifier: MIT
// e2e.h - harness for the end-to-end tests: platforms, fixtures, daemon, data.
#ifndef CMX_E2E_H
#define CMX_E2E_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 300
#endif

#include <CL/cl.h>
#include <check.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Every test program runs the same OpenCL work on two platforms in one
 * process: the native one (CMX_E2E_NATIVE, default "Portable Computing
 * Language") and the virtual one (CMX_E2E_VIRTUAL, default "clmux").  Both
 * are case-insensitive substrings of CL_PLATFORM_NAME.  A missing platform
 * makes the program exit 77 (skip), or 1 when CMX_E2E_REQUIRE=1.
 *
 * The test runner's process never makes an OpenCL call: ICDs start threads,
 * and a child forked after that inherits a runtime it cannot use.  The probe
 * for the platforms runs in a child of its own, the fixtures run in each
 * test's forked child (CK_FORK, Check's default), and e2e_multi forks its
 * clients from a test child that has not touched OpenCL yet.
 */

#define E2E_EXIT_SKIP 77
#define E2E_TIMEOUT_S 60 /* per test; CK_TIMEOUT_MULTIPLIER scales it */

struct e2e_plat {
	const char *role; /* "native" or "virtual", for messages */
	cl_platform_id platform;
	cl_device_id device;
	cl_context context;
	cl_command_queue queue;      /* in-order */
	cl_command_queue queue_prof; /* in-order, CL_QUEUE_PROFILING_ENABLE */
	char name[256];              /* CL_PLATFORM_NAME */
};

/* Both set up by e2e_setup() in each test child, torn down by e2e_teardown(). */
extern struct e2e_plat e2e_native;
extern struct e2e_plat e2e_virtual;

/* Platform name substrings from the environment, or their defaults. */
const char *e2e_native_match(void);
const char *e2e_virtual_match(void);

/* 0 and *out set, -ENOENT when no platform matches, -EIO on a CL error. */
int e2e_platform_find(const char *match, cl_platform_id *out);
/* Opens context, device and both queues; 0 or -errno.  No Check calls, so
 * e2e_multi's client processes use it too. */
int e2e_plat_init(struct e2e_plat *p, const char *role, const char *match);
void e2e_plat_fini(struct e2e_plat *p);

/* Checked fixture: both platforms, aborting the test if either fails. */
void e2e_setup(void);
void e2e_teardown(void);
/* True when both roles resolved to the same platform (the harness running
 * against itself before the virtual ICD exists). */
int e2e_same_platform(void);

/*
 * Checks the error code of one call made on both platforms.  The virtual
 * platform is held to the spec (want) even where native breaks it (a note
 * goes to stderr), except when both roles are the same platform: then it can
 * only be checked against itself.
 */
void e2e_check_err(const char *what, cl_int virt, cl_int nat, cl_int want);

/* CMX_E2E_TEST=NAME[,NAME...]: only the tests of those names are added
 * (with Check's CK_RUN_CASE, single tests of a case run alone: the Oclgrind
 * script leaves out those that fail natively there). */
void e2e_tcase_add_test(TCase *tc, const TTest *t);
#undef tcase_add_test
#define tcase_add_test(tc, tf) e2e_tcase_add_test(tc, tf)

/* A test case with the e2e fixture and timeout. */
TCase *e2e_tcase(const char *name);
/* Probe, daemon start, srunner_run_all, daemon stop; returns the exit status
 * for main(): 0, 1, or 77 when a platform is missing. */
int e2e_main(Suite *s);
/* Daemon start, srunner_run_all, daemon stop, no platform probe (tests that
 * speak the wire protocol themselves); the exit status for main(). */
int e2e_daemon_run(Suite *s);

/* Daemon: starts $CLMUXD --listen unix:DIR/clmuxd.sock (then the words of
 * $CMX_E2E_DAEMON_ARGS, e.g. "--device oclgrind") if CLMUXD is set and
 * points CLMUX_SERVER at it; 0 or -errno.  Stop sends SIGTERM and returns 0
 * only if the daemon exited with status 0.  Both do nothing without CLMUXD. */
int e2e_daemon_start(void);
/* The daemon's TMPDIR (the harness's private directory), NULL without one. */
const char *e2e_daemon_tmpdir(void);
/* 1 when the file at path begins with the 32-bit magic (an ivshmem region
 * the daemon has finished laying out). */
int e2e_file_has_magic(const char *path, uint32_t magic);
int e2e_daemon_stop(void);
/* Before e2e_main(): the daemon gets a tenant NAME with the quota lines
 * KEYS ("mem = 16M") and a listener of its own; e2e_tenant_server() is its
 * address for CLMUX_SERVER once the daemon runs (NULL without a daemon). */
void e2e_tenant(const char *name, const char *keys);
const char *e2e_tenant_server(void);

const char *e2e_cl_strerror(cl_int err);

#define E2E_OK(p, call)                                                        \
	do {                                                                   \
		cl_int e2e_err_ = (call);                                      \
		ck_assert_msg(e2e_err_ == CL_SUCCESS, "%s: %s: %s (%d)",       \
			      (p)->role, #call, e2e_cl_strerror(e2e_err_),     \
			      e2e_err_);                                       \
	} while (0)

#define E2E_EXPECT(p, call, want)                                              \
	do {                                                                   \
		cl_int e2e_err_ = (call);                                      \
		ck_assert_msg(e2e_err_ == (want),                              \
			      "%s: %s: got %s (%d), want %s (%d)", (p)->role,  \
			      #call, e2e_cl_strerror(e2e_err_), e2e_err_,      \
			      e2e_cl_strerror(want), (cl_int)(want));          \
	} while (0)

/* Builds src for p's device; on failure prints the build log and fails the
 * test.  e2e_build_log() returns the log (free() it) or NULL. */
cl_program e2e_program_build(struct e2e_plat *p, const char *src,
			     const char *options);
char *e2e_build_log(cl_program prog, cl_device_id dev);
cl_kernel e2e_kernel_create(struct e2e_plat *p, cl_program prog,
			    const char *name);
cl_mem e2e_buffer_create(struct e2e_plat *p, cl_mem_flags flags, size_t size,
			 void *host);

/* Deterministic data: the same seed gives the same bytes on every run. */
uint64_t e2e_rand_next(uint64_t *state);
void e2e_rand_bytes(void *dst, size_t n, uint64_t seed);
void e2e_rand_u32(uint32_t *dst, size_t n, uint64_t seed, uint32_t mod);
void e2e_rand_float(float *dst, size_t n, uint64_t seed); /* in [-1, 1) */

void *e2e_xmalloc(size_t n);
void *e2e_xcalloc(size_t n);

/* Fails on the first element where |got - want| > abs_tol + rel_tol*|want|. */
void e2e_assert_floats_near(const float *got, const float *want, size_t n,
			    float abs_tol, float rel_tol, const char *what);
/* Fails naming the first differing byte offset. */
void e2e_assert_bytes_eq(const void *got, const void *want, size_t n,
			 const char *what);

/* Sleeps ms milliseconds (to give a wrongly-unblocked command time to run). */
void e2e_sleep_ms(unsigned ms);

#endif
