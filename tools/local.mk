# SPDX-License-Identifier: MIT
# The benchmark: the same OpenCL work natively and through clmux, one run.
bin_PROGRAMS += tools/clmux-bench tools/clmux-sample
sbin_PROGRAMS += tools/clmuxctl
tools_clmuxctl_SOURCES = tools/clmuxctl.c tools/cdi.h tools/cdi.c tools/cdictl.c
# cdi generate loads the installed ICD to find the libraries it needs.
tools_clmuxctl_CPPFLAGS = $(AM_CPPFLAGS) -DCMX_LIBDIR='"$(libdir)"' $(JSONC_CFLAGS)
tools_clmuxctl_LDADD = $(JSONC_LIBS) -ldl
if HAVE_LIBVIRT
tools_clmuxctl_SOURCES += host/domxml.h host/domxml.c
tools_clmuxctl_CPPFLAGS += -I$(top_srcdir)/host $(LIBVIRT_CFLAGS)
tools_clmuxctl_LDADD += $(LIBVIRT_LIBS)
# libvirt's qemu hook: clmuxctl domain-prepare before QEMU starts.
libvirthookdir = $(sysconfdir)/libvirt/hooks/qemu.d
libvirthook_SCRIPTS = tools/libvirt-hook/clmux
endif
EXTRA_DIST += tools/libvirt-hook.in
CLEANFILES += tools/libvirt-hook/clmux
tools/libvirt-hook/clmux: $(top_srcdir)/tools/libvirt-hook.in Makefile
	$(AM_V_GEN)mkdir -p tools/libvirt-hook && \
	sed 's|@sbindir[@]|$(sbindir)|g' $(top_srcdir)/tools/libvirt-hook.in >$@ && chmod +x $@
# Tenants sharing the device (docs/performance.md): `make tenant-bench`.
check_PROGRAMS += tools/tenant-bench
tools_tenant_bench_SOURCES = tools/tenant-bench.c
tools_tenant_bench_LDADD = $(OPENCL_LIBS)

TENANT_BENCH = OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	tools/tenant-bench --client-vendors $(abs_top_builddir)/icd/clmux.icd $(TENANT_BENCH_FLAGS)
tenant-bench: tools/tenant-bench host/clmuxd icd/clmux.icd
	for n in 1 8 64; do $(TENANT_BENCH) --tenants $$n --seconds 10 --probe; done
	$(TENANT_BENCH) --tenants 2 --weights 1:3 --seconds 10
.PHONY: tenant-bench
# Weights between isolated tenants, the arbiter between workers: a test,
# and its figures (docs/performance.md, "Weights between workers").
TESTS += tools/tests/share-weights.sh
EXTRA_DIST += tools/tests/share-weights.sh tools/share-bench
# clmux inside a podman container against outside (docs/performance.md).
container-bench: container-check
	CLMUXD=$(abs_top_builddir)/host/clmuxd CLMUXCTL=$(abs_top_builddir)/tools/clmuxctl \
	ROOTFS=$(abs_top_builddir)/container/rootfs $(top_srcdir)/tools/container-bench
.PHONY: container-bench
# docs/performance.md's results: clmux-bench (latency, bandwidth by size)
# over unix, shm, tcp and tls and tenant-bench (1, 2, 4 tenants), 3 rounds,
# and two tenants at weights 1:3 sampled every 100 ms (their shares over time),
# into docs/results/DEVICE-NCORESc.json (a few minutes; BENCH_FLAGS: more
# tools/bench-results options); then tools/perf-report makes the tables and
# plots.
bench: tools/clmux-bench tools/tenant-bench host/clmuxd icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  nice $(PYTHON) $(top_srcdir)/tools/bench-results --out-dir $(top_srcdir)/docs/results \
	  --client-vendors $(abs_top_builddir)/icd/clmux.icd --as "make bench $(BENCH_FLAGS)" \
	  $(BENCH_FLAGS)
	$(PYTHON) $(top_srcdir)/tools/perf-report
.PHONY: bench
tools_clmux_sample_SOURCES = tools/sample.c
tools_clmux_sample_LDADD = $(OPENCL_LIBS)
tools_clmux_bench_SOURCES = tools/bench.c
tools_clmux_bench_LDADD = $(OPENCL_LIBS) -lm
# Head-of-line blocking between clients (docs/performance.md); not a test.
# Driver questions for the GPU paths (docs/gpu.md); rides in tools/gpu-bundle.
noinst_PROGRAMS += tools/clmux-gpu-probe
tools_clmux_gpu_probe_SOURCES = tools/gpu-probe.c
tools_clmux_gpu_probe_LDADD = $(OPENCL_LIBS) -lpthread
# Checkpoint and restore time against buffer bytes (docs/performance.md).
noinst_PROGRAMS += tools/clmux-ckpt-bench
tools_clmux_ckpt_bench_SOURCES = tools/ckpt-bench.c
tools_clmux_ckpt_bench_LDADD = $(OPENCL_LIBS)

bin_PROGRAMS += tools/clmux-hol-bench
tools_clmux_hol_bench_SOURCES = tools/hol-bench.c
tools_clmux_hol_bench_LDADD = $(OPENCL_LIBS)
# Bare loopback TCP (send, vmsplice+splice, MSG_ZEROCOPY; N streams), the
# ceiling of the tcp transport (docs/performance.md); not a test.
noinst_PROGRAMS += tools/clmux-loopback-bench
tools_clmux_loopback_bench_SOURCES = tools/loopback-bench.c
tools_clmux_loopback_bench_LDADD = -lpthread

TESTS += tools/tests/test_cmxgen.sh tools/tests/test_adding_call.sh tools/compat-clinfo.sh tools/compat-pyopencl.sh \
	tools/tests/transports.sh tools/tests/tenant-bench-slice.sh tools/tests/tls.sh \
	tools/tests/cdi.sh tools/tests/perf-report.sh tools/tests/activation.sh \
	tools/tests/admin-json.sh tools/tests/include-cycles.sh tools/tests/call-cycles.sh
EXTRA_DIST += tools/tests/perf-report.sh tools/bench-results tools/perf-report \
 tools/tests/test_cmxgen.sh tools/tests/golden.schema \
	tools/tests/test_adding_call.sh tools/tests/adding_call.c \
	tools/tests/golden/proto.gen.h.expected tools/tests/golden/proto.gen.c.expected \
	tools/tests/golden/stubs.gen.h.expected tools/tests/golden/handlers.gen.h.expected \
	tools/tests/golden/handlers.gen.c.expected tools/demo tools/check tools/setup.sh \
	tools/compat-clinfo.sh tools/compat-pyopencl.sh tools/tests/compat_pyopencl.py \
	tools/tests/compat-env.sh tools/tests/transports.sh tools/tests/tenant-bench-slice.sh \
	tools/tests/tls.sh tools/tests/cdi.sh tools/tests/activation.sh tools/tests/admin-json.sh \
	tools/tests/include-cycles.sh tools/tests/call-cycles.sh tools/tests/call-cycles.allow \
	tools/compat-oclgrind.sh tools/compat-piglit.sh tools/compat-apps.sh \
	tools/compat-oclgrind-suites.sh \
	tools/gpu-bundle tools/gpu-check tools/transport-bench tools/seccomp-trace.py \
	tools/container-bench

# What every test sees: the build tree's vendors directory (clmux and the
# native ICDs), the daemon to start, and failure instead of skip when the
# clmux platform is missing.
AM_TESTS_ENVIRONMENT = srcdir=$(srcdir); PYTHON=$(PYTHON); \
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd; CLMUXD=$(abs_top_builddir)/host/clmuxd; \
	CMX_E2E_REQUIRE=1; CLMUX_LOG=$${CLMUX_LOG:-warn}; \
	export srcdir PYTHON OCL_ICD_VENDORS CLMUXD CMX_E2E_REQUIRE CLMUX_LOG;

# The same end-to-end programs with clmuxd serving Oclgrind (a second
# OpenCL implementation), and piglit's OpenCL tests natively and through
# clmux; tools/check runs both after make check (docs/compatibility.md).
# A skip (77: Oclgrind or piglit missing) passes.
check-oclgrind: all $(check_PROGRAMS) icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  $(top_srcdir)/tools/compat-oclgrind.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
# The same, then every exception run natively on Oclgrind, to show
# that it still fails there (12 minutes; not in tools/check).
check-oclgrind-all: all $(check_PROGRAMS) icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  CMX_OCLGRIND_ALL=1 $(top_srcdir)/tools/compat-oclgrind.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
check-piglit: all icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  srcdir=$(top_srcdir) $(top_srcdir)/tools/compat-piglit.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
# Every piglit OpenCL test (all of tests/cl/program, builtins included):
# about 3 minutes on 2 cores, not in tools/check; the per-test results
# go to piglit-all.txt, the counts to docs/compatibility.md.
check-piglit-all: all icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd 	  CMX_PIGLIT_ALL=1 CMX_PIGLIT_LIST=$(abs_top_builddir)/piglit-all.txt 	  srcdir=$(top_srcdir) $(top_srcdir)/tools/compat-piglit.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
# clinfo, piglit's selection and the PyOpenCL test file natively on
# Oclgrind and through clmux serving Oclgrind (1.5 to 2.5 minutes on 2
# cores; tools/check runs it); -all runs every piglit test (per-test
# results in piglit-oclgrind-all.txt). A skip (77: no Oclgrind) passes.
check-compat-oclgrind: all icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  srcdir=$(top_srcdir) $(top_srcdir)/tools/compat-oclgrind-suites.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
check-compat-oclgrind-all: all icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  CMX_OCLGRIND_ALL=1 CMX_PIGLIT_LIST=$(abs_top_builddir)/piglit-oclgrind-all.txt \
	  srcdir=$(top_srcdir) $(top_srcdir)/tools/compat-oclgrind-suites.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
# clpeak and hashcat natively and through clmux, ending alike, with their
# figures side by side: about 3 minutes, in tools/check (check-apps; a skip,
# 77, passes). CMX_APPS_DEVICE=oclgrind: on Oclgrind, about 10 minutes.
check-apps bench-apps: all icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  srcdir=$(top_srcdir) $(top_srcdir)/tools/compat-apps.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
.PHONY: check-oclgrind check-oclgrind-all check-piglit check-piglit-all bench-apps check-apps \
	check-compat-oclgrind check-compat-oclgrind-all
