# SPDX-License-Identifier: MIT
# libclmux: the vendor ICD the loader opens (clmux.icd names it).
lib_LTLIBRARIES += guest/libclmux.la
guest_libclmux_la_SOURCES = guest/icd.h guest/object.h guest/track.h guest/command.h \
	guest/image.h guest/program.h guest/object.c guest/context.c guest/track.c guest/icd.c \
	guest/dispatch.c guest/entry.h guest/session.h \
	guest/session.c guest/lane.h guest/lane.c guest/queue.c guest/event.c guest/notify.c guest/mem.h guest/mem.c \
	guest/command.c guest/mapping.c guest/transfer.c guest/rect.c guest/map.c guest/image.c guest/include.c \
	guest/program.c guest/kernel.c guest/cmdbuf.c guest/dial.h guest/dial.c guest/area.h guest/area.c \
	guest/tls.h guest/tls.c guest/ivshmem.h guest/ivshmem.c guest/copy.h guest/copy.c \
	guest/timer.h guest/timer.c
guest_libclmux_la_SOURCES += guest/env.h guest/env.c
nodist_guest_libclmux_la_SOURCES = guest/stubs.gen.h
guest_libclmux_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/guest -I$(top_builddir)/guest \
	$(SSL_CFLAGS) $(LZ4_CFLAGS)
guest_libclmux_la_LIBADD = transport/libcmxtransport.la $(SSL_LIBS) $(LZ4_LIBS) -lpthread
# libclmux.so.1 (SONAME libclmux.so.1): the loader opens it by the vendor
# file's path; the version says which interface of the ICD it is. RUNPATH
# $ORIGIN: in a container (clmuxctl cdi generate) the libraries it needs
# lie beside it, where the image's own are not shadowed.
guest_libclmux_la_LDFLAGS = -version-info 1:0:0 -no-undefined \
	-Wl,--version-script=$(top_srcdir)/guest/libclmux.map -Wl,-rpath,'$$ORIGIN'
EXTRA_DIST += guest/libclmux.map

# Installed: the library, and the vendor file that names it to the loader.
vendorsdir = $(sysconfdir)/OpenCL/vendors
vendors_DATA = guest/clmux.icd
guest/clmux.icd: Makefile
	$(AM_V_GEN)mkdir -p guest && echo "$(libdir)/libclmux.so.1" >$@
CLEANFILES += guest/clmux.icd

# The build tree's own vendors directory for tests: clmux, plus the
# system's ICDs (the native side of every comparison).
icd/clmux.icd: guest/libclmux.la
	$(AM_V_GEN)mkdir -p icd && rm -f icd/*.icd && \
	for f in /etc/OpenCL/vendors/*.icd; do [ -e "$$f" ] && cp "$$f" icd/; done; \
	echo "$(abs_top_builddir)/guest/.libs/libclmux.so" >$@
check_DATA = icd/clmux.icd
clean-local: clean-icd
clean-icd:
	rm -rf icd
.PHONY: clean-icd

if HAVE_CHECK
E2E_TESTS = guest/tests/e2e_compute guest/tests/e2e_memory guest/tests/e2e_events \
	guest/tests/e2e_program guest/tests/e2e_multi guest/tests/e2e_async guest/tests/e2e_image \
	guest/tests/e2e_zcopy \
	guest/tests/e2e_printf guest/tests/e2e_device guest/tests/e2e_checks guest/tests/e2e_callbacks \
	guest/tests/e2e_cmdbuf
check_PROGRAMS += $(E2E_TESTS)
TESTS += $(E2E_TESTS)
check_LTLIBRARIES = guest/tests/libe2e.la
guest_tests_libe2e_la_SOURCES = guest/tests/e2e.h guest/tests/e2e.c
guest_tests_libe2e_la_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
E2E_LDADD = guest/tests/libe2e.la $(CHECK_LIBS) $(OPENCL_LIBS) -lpthread
E2E_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
guest_tests_e2e_compute_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_compute_LDADD = $(E2E_LDADD)
guest_tests_e2e_memory_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_memory_LDADD = $(E2E_LDADD)
guest_tests_e2e_events_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_events_LDADD = $(E2E_LDADD)
guest_tests_e2e_program_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_program_LDADD = $(E2E_LDADD)
guest_tests_e2e_multi_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_multi_LDADD = $(E2E_LDADD)
guest_tests_e2e_async_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_async_LDADD = $(E2E_LDADD)
guest_tests_e2e_image_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_image_LDADD = $(E2E_LDADD)
guest_tests_e2e_zcopy_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_zcopy_LDADD = $(E2E_LDADD)
guest_tests_e2e_printf_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_printf_LDADD = $(E2E_LDADD)
guest_tests_e2e_device_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_device_LDADD = $(E2E_LDADD)
guest_tests_e2e_checks_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_checks_LDADD = $(E2E_LDADD)
guest_tests_e2e_callbacks_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_callbacks_LDADD = $(E2E_LDADD)
guest_tests_e2e_cmdbuf_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_cmdbuf_LDADD = $(E2E_LDADD)
endif

# The end-to-end set a second time over shm:, and the memory tests with
# payloads in the stream (guest/tests/e2e-shm.sh).
if HAVE_CHECK
TESTS += guest/tests/e2e-shm.sh
endif
EXTRA_DIST += guest/tests/e2e-shm.sh guest/tests/e2e-run.sh
# And over an ivshmem region (guest/tests/e2e-ivshmem.sh).
if HAVE_CHECK
TESTS += guest/tests/e2e-ivshmem.sh
endif
EXTRA_DIST += guest/tests/e2e-ivshmem.sh
# The files of the ICD in layers, none calling up (guest/tests/layers.sh).
TESTS += guest/tests/layers.sh
EXTRA_DIST += guest/tests/layers.sh
# And through the GPU paths, forced on (guest/tests/e2e-pinned.sh).
if HAVE_CHECK
TESTS += guest/tests/e2e-pinned.sh
endif
EXTRA_DIST += guest/tests/e2e-pinned.sh
CLEANFILES += guest/tests/e2e_*.out

# An application whose daemon is killed (e2e-shm.sh runs it over shm: too).
if HAVE_CHECK
check_PROGRAMS += guest/tests/e2e_daemon_killed
TESTS += guest/tests/e2e_daemon_killed
guest_tests_e2e_daemon_killed_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_daemon_killed_LDADD = $(E2E_LDADD)
# An application that outlives its daemon: killed, started again, and
# a new context in the same process (e2e-shm.sh and transports.sh run it
# over shm: and tcp: too).
check_PROGRAMS += guest/tests/e2e_daemon_restart
TESTS += guest/tests/e2e_daemon_restart
guest_tests_e2e_daemon_restart_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_daemon_restart_LDADD = $(E2E_LDADD)
endif

# One tenant's wild store and endless kernel beside another's workload
# (worker processes as fault domains, host/front.c).
if HAVE_CHECK
check_PROGRAMS += guest/tests/e2e_contain
TESTS += guest/tests/e2e_contain
guest_tests_e2e_contain_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_contain_LDADD = $(E2E_LDADD)
endif

# Checkpoints of a session to --state-dir (host/checkpoint.c), read back
# with the daemon's reader (host/state.c).
if HAVE_CHECK
check_PROGRAMS += guest/tests/e2e_checkpoint
TESTS += guest/tests/e2e_checkpoint
guest_tests_e2e_checkpoint_SOURCES = guest/tests/e2e_checkpoint.c host/state.c host/state.h
guest_tests_e2e_checkpoint_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/host
guest_tests_e2e_checkpoint_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_checkpoint_LDADD = transport/libcmxtransport.la $(E2E_LDADD)
endif

# Live migration of a session between two daemons (host/migrate.c).
if HAVE_CHECK
check_PROGRAMS += guest/tests/e2e_migrate
TESTS += guest/tests/e2e_migrate
guest_tests_e2e_migrate_CFLAGS = $(E2E_CFLAGS)
guest_tests_e2e_migrate_LDADD = $(E2E_LDADD)
endif
