# SPDX-License-Identifier: MIT
sbin_PROGRAMS += host/clmuxd
# Everything of the daemon but main(): clmuxd, and the session fuzzers that
# run a worker's core in their own process.
host_core_sources = host/loop.h host/loop.c host/conn.h host/conn.c \
	host/call.h host/call.c host/dispatch.h host/dispatch.c host/session.h host/session.c host/release.h host/release.c host/object.h host/objtab.h \
	host/objtab.c host/executor.h host/executor.c host/server.h host/device.c \
	host/staging.h host/staging.c host/area.h host/area.c host/shm.h host/shm.c host/exec.h host/exec.c host/defer.h host/defer.c host/complete.h host/complete.c host/fence.h host/fence.c host/exec_session.c host/exec_context.c host/exec_timer.c host/exec_queue.c \
	host/exec_mem.c host/exec_image.c host/exec_program.c host/parts.h host/parts.c host/buildcheck.h host/buildcheck.c host/binkeep.h host/binkeep.c host/incdir.h host/incdir.c host/exec_kernel.c host/exec_cmdbuf.c host/kprintf.h host/kprintf.c host/exec_event.c \
	host/peer.h host/peer.c host/pending.h host/pending.c host/auth.h host/auth.c host/listener.h host/listener.c \
	host/tls.h host/tls.c host/inflate.h host/inflate.c host/land.h host/land.c host/lane.h host/lane.c host/exec_lane.c \
	host/reaper.h host/reaper.c host/vhost.h host/vhost.c host/ivshmem.h host/ivshmem.c \
	host/tenant.h host/tenant.c host/conffile.h host/conffile.c host/text.h host/text.c \
	host/admin.h host/admin.c host/jsonline.h host/jsonline.c host/scheduler.h host/scheduler.c host/pinned.h host/pinned.c host/exec_pinned.c \
	host/ctl.h host/ctl.c host/front.h host/front.c host/worker.h host/worker.c \
	host/privilege.h host/privilege.c host/zero.h host/zero.c host/libvirt.h host/libvirt.c \
	host/sandbox.h host/sandbox.c host/activation.h host/activation.c \
	host/tuning.h host/tuning.c \
	host/state.h host/state.c host/record.h host/record.c \
	host/checkpoint.h host/checkpoint.c host/restore.h host/restore.c \
	host/eventstate.h host/eventstate.c \
	host/migrate.h host/migrate.c
if HAVE_LIBVIRT
host_core_sources += host/domxml.h host/domxml.c
endif
host_clmuxd_SOURCES = host/main.c host/notify.h host/notify.c $(host_core_sources) \
	host/cdikeep.h host/cdikeep.c tools/cdi.h tools/cdi.c
nodist_host_clmuxd_SOURCES = host/handlers.gen.h host/handlers.gen.c
host_clmuxd_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host -I$(top_builddir)/host $(URING_CFLAGS) \
	$(SSL_CFLAGS) $(JSONC_CFLAGS) $(LIBVIRT_CFLAGS) -I$(top_srcdir)/tools -DCMX_LIBDIR='"$(libdir)"'
# [clmuxd] cdi = PATH: the spec's code loads the ICD to find its libraries.
host_clmuxd_LDADD = transport/libcmxtransport.la $(URING_LIBS) $(SSL_LIBS) $(JSONC_LIBS) \
	$(OPENCL_LIBS) $(LIBVIRT_LIBS) -lpthread -ldl

if HAVE_CHECK
check_PROGRAMS += host/tests/test_auth
TESTS += host/tests/test_auth
host_tests_test_auth_SOURCES = host/tests/test_auth.c host/auth.c host/peer.c
host_tests_test_auth_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host
host_tests_test_auth_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS) $(SSL_CFLAGS)
host_tests_test_auth_LDADD = $(CHECK_LIBS) $(SSL_LIBS)
check_PROGRAMS += host/tests/test_config
TESTS += host/tests/test_config
host_tests_test_config_SOURCES = host/tests/test_config.c host/conffile.c host/tenant.c host/text.c \
	host/tuning.c \
	host/sandbox.c
host_tests_test_config_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host
host_tests_test_config_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_config_LDADD = transport/libcmxtransport.la $(CHECK_LIBS)

if HAVE_LIBVIRT
check_PROGRAMS += host/tests/test_domxml
TESTS += host/tests/test_domxml
host_tests_test_domxml_SOURCES = host/tests/test_domxml.c host/domxml.c
host_tests_test_domxml_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host $(LIBVIRT_CFLAGS)
host_tests_test_domxml_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_domxml_LDADD = $(CHECK_LIBS) $(LIBVIRT_LIBS)
endif

# The binaries a restore keeps (host/binkeep.c), on the native platform.
check_PROGRAMS += host/tests/test_binkeep
TESTS += host/tests/test_binkeep
host_tests_test_binkeep_SOURCES = host/tests/test_binkeep.c host/binkeep.c host/binkeep.h
host_tests_test_binkeep_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host
host_tests_test_binkeep_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_binkeep_LDADD = $(CHECK_LIBS) $(OPENCL_LIBS) -lpthread
check_PROGRAMS += host/tests/test_state
TESTS += host/tests/test_state
host_tests_test_state_SOURCES = host/tests/test_state.c host/state.c host/state.h
host_tests_test_state_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host
host_tests_test_state_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_state_LDADD = transport/libcmxtransport.la $(CHECK_LIBS) -lpthread

check_PROGRAMS += host/tests/test_objtab
TESTS += host/tests/test_objtab
host_tests_test_objtab_SOURCES = host/tests/test_objtab.c host/objtab.c
host_tests_test_objtab_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host
host_tests_test_objtab_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_objtab_LDADD = $(CHECK_LIBS)

# The worker's seccomp filter in forked children, and every worker of a
# live clmuxd filtered (host/sandbox.c).
check_PROGRAMS += host/tests/test_sandbox
TESTS += host/tests/test_sandbox
host_tests_test_sandbox_SOURCES = host/tests/test_sandbox.c host/sandbox.c host/sandbox.h
host_tests_test_sandbox_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host -I$(top_srcdir)/guest/tests
host_tests_test_sandbox_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_sandbox_LDADD = guest/tests/libe2e.la $(CHECK_LIBS) $(OPENCL_LIBS) -lpthread
endif

# The decoder fuzzer (clang's libFuzzer): tools/check runs it for a while.
EXTRA_DIST += host/tests/fuzz_decoder.c host/tests/corpus host/tests/fuzz_session.c \
	host/tests/fuzz_area.c host/tests/fuzz_seeds.c host/tests/corpus-session \
	host/tests/fuzz_state.c host/tests/corpus-state \
	host/tests/corpus-area
if ENABLE_FUZZER
noinst_PROGRAMS += host/tests/fuzz_decoder host/tests/fuzz_state
host_tests_fuzz_state_SOURCES = host/tests/fuzz_state.c host/state.c host/state.h
host_tests_fuzz_state_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host
host_tests_fuzz_state_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
host_tests_fuzz_state_LDFLAGS = -fsanitize=fuzzer
host_tests_fuzz_state_LDADD = transport/libcmxtransport.la -lpthread
host_tests_fuzz_decoder_SOURCES = host/tests/fuzz_decoder.c
host_tests_fuzz_decoder_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
host_tests_fuzz_decoder_LDFLAGS = -fsanitize=fuzzer
host_tests_fuzz_decoder_LDADD = transport/libcmxtransport.la

# The session fuzzers (host/tests/fuzz_session.c): a worker's core in the
# fuzzer's process, on PoCL; fuzz_area adds a thread that rewrites the
# shared area while the daemon reads it. The daemon's code is built once
# for both, instrumented for coverage.
noinst_LTLIBRARIES += host/libcmxfuzzcore.la
host_libcmxfuzzcore_la_SOURCES = $(host_core_sources) $(transport_libcmxtransport_la_SOURCES)
nodist_host_libcmxfuzzcore_la_SOURCES = host/handlers.gen.h host/handlers.gen.c \
	transport/proto.gen.h transport/proto.gen.c
host_libcmxfuzzcore_la_CPPFLAGS = $(host_clmuxd_CPPFLAGS)
host_libcmxfuzzcore_la_CFLAGS = $(AM_CFLAGS) $(LZ4_CFLAGS) -fsanitize=fuzzer-no-link
fuzz_session_ldadd = host/libcmxfuzzcore.la $(LZ4_LIBS) $(URING_LIBS) $(SSL_LIBS) $(JSONC_LIBS) $(OPENCL_LIBS) \
	$(LIBVIRT_LIBS) -lpthread
noinst_PROGRAMS += host/tests/fuzz_session host/tests/fuzz_area host/tests/fuzz_seeds
host_tests_fuzz_seeds_SOURCES = host/tests/fuzz_seeds.c
host_tests_fuzz_seeds_LDADD = transport/libcmxtransport.la
host_tests_fuzz_session_SOURCES = host/tests/fuzz_session.c
host_tests_fuzz_session_CPPFLAGS = $(host_clmuxd_CPPFLAGS)
host_tests_fuzz_session_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
host_tests_fuzz_session_LDFLAGS = -fsanitize=fuzzer
host_tests_fuzz_session_LDADD = $(fuzz_session_ldadd)
host_tests_fuzz_area_SOURCES = host/tests/fuzz_area.c
host_tests_fuzz_area_CPPFLAGS = $(host_clmuxd_CPPFLAGS)
host_tests_fuzz_area_CFLAGS = $(AM_CFLAGS) -fsanitize=fuzzer
host_tests_fuzz_area_LDFLAGS = -fsanitize=fuzzer
host_tests_fuzz_area_LDADD = $(fuzz_session_ldadd)
endif

# Long runs, outside make check (tools/check runs a minute of each):
# every fuzzer FUZZ_SECONDS (an hour), then host/'s line coverage from the
# corpora they kept (in build-cov, a coverage build beside this one).
FUZZ_SECONDS = 3600
EXTRA_DIST += tools/fuzz-run tools/fuzz-coverage
fuzz-long:
	$(top_srcdir)/tools/fuzz-run . $(FUZZ_SECONDS)
fuzz-coverage:
	$(top_srcdir)/tools/fuzz-coverage .
.PHONY: fuzz-long fuzz-coverage

if HAVE_CHECK
check_PROGRAMS += host/tests/test_badinput
TESTS += host/tests/test_badinput
host_tests_test_badinput_SOURCES = host/tests/test_badinput.c host/tests/rawclient.h
host_tests_test_badinput_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_badinput_LDADD = guest/tests/libe2e.la transport/libcmxtransport.la $(CHECK_LIBS) \
	$(OPENCL_LIBS) -lpthread
check_PROGRAMS += host/tests/test_hostile_args
TESTS += host/tests/test_hostile_args
host_tests_test_hostile_args_SOURCES = host/tests/test_hostile_args.c host/tests/rawclient.h
host_tests_test_hostile_args_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_hostile_args_LDADD = guest/tests/libe2e.la transport/libcmxtransport.la \
	$(CHECK_LIBS) $(OPENCL_LIBS) -lpthread
check_PROGRAMS += host/tests/test_lanes
TESTS += host/tests/test_lanes
host_tests_test_lanes_SOURCES = host/tests/test_lanes.c host/tests/rawclient.h
host_tests_test_lanes_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_lanes_LDADD = guest/tests/libe2e.la transport/libcmxtransport.la $(CHECK_LIBS) \
	$(OPENCL_LIBS) -lpthread
check_PROGRAMS += host/tests/test_compressed
TESTS += host/tests/test_compressed
host_tests_test_compressed_SOURCES = host/tests/test_compressed.c host/tests/rawclient.h
host_tests_test_compressed_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_compressed_LDADD = guest/tests/libe2e.la transport/libcmxtransport.la $(CHECK_LIBS) \
	$(OPENCL_LIBS) -lpthread
endif

# The shared area and the shm rings against a live daemon.
if HAVE_CHECK
check_PROGRAMS += host/tests/test_shm
TESTS += host/tests/test_shm
host_tests_test_shm_SOURCES = host/tests/test_shm.c host/tests/rawclient.h
host_tests_test_shm_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_shm_LDADD = guest/tests/libe2e.la transport/libcmxtransport.la $(CHECK_LIBS) \
	$(OPENCL_LIBS) -lpthread
endif

# An ivshmem region against a live daemon, from a raw guest.
if HAVE_CHECK
check_PROGRAMS += host/tests/test_ivshmem
TESTS += host/tests/test_ivshmem
host_tests_test_ivshmem_SOURCES = host/tests/test_ivshmem.c host/tests/rawclient.h
host_tests_test_ivshmem_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_ivshmem_LDADD = guest/tests/libe2e.la transport/libcmxtransport.la $(CHECK_LIBS) \
	$(OPENCL_LIBS) -lpthread
endif

if HAVE_CHECK
check_PROGRAMS += host/tests/test_vhost_badinput
TESTS += host/tests/test_vhost_badinput
host_tests_test_vhost_badinput_SOURCES = host/tests/test_vhost_badinput.c
host_tests_test_vhost_badinput_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/transport/tests
host_tests_test_vhost_badinput_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_vhost_badinput_LDADD = $(CHECK_LIBS)
endif

# Least privilege: region files, socket modes, metrics, --user.
if HAVE_CHECK
check_PROGRAMS += host/tests/test_privilege
TESTS += host/tests/test_privilege
host_tests_test_privilege_SOURCES = host/tests/test_privilege.c host/tests/rawclient.h
host_tests_test_privilege_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_privilege_LDADD = transport/libcmxtransport.la $(CHECK_LIBS) -lpthread
endif

if HAVE_CHECK
check_PROGRAMS += host/tests/test_tenant
TESTS += host/tests/test_tenant
host_tests_test_tenant_SOURCES = host/tests/test_tenant.c host/tests/rawclient.h \
	host/tests/adminclient.h
host_tests_test_tenant_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_tenant_LDADD = transport/libcmxtransport.la $(CHECK_LIBS) -lpthread
endif

# A hostile tenant's cases against a live daemon with a config (issue 22).
if HAVE_CHECK
check_PROGRAMS += host/tests/test_hostile_quota
TESTS += host/tests/test_hostile_quota
host_tests_test_hostile_quota_SOURCES = host/tests/test_hostile_quota.c host/tests/rawclient.h \
	host/tests/adminclient.h
host_tests_test_hostile_quota_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
host_tests_test_hostile_quota_LDADD = guest/tests/libe2e.la transport/libcmxtransport.la \
	$(CHECK_LIBS) $(OPENCL_LIBS) -lpthread
endif
