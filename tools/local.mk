# SPDX-License-Identifier: MIT
# The benchmark: the same OpenCL work natively and through clmux, one run.
bin_PROGRAMS += tools/clmux-bench tools/clmux-sample
tools_clmux_sample_SOURCES = tools/sample.c
tools_clmux_sample_LDADD = $(OPENCL_LIBS)
tools_clmux_bench_SOURCES = tools/bench.c
tools_clmux_bench_LDADD = $(OPENCL_LIBS) -lm

TESTS += tools/tests/test_cmxgen.sh tools/compat-clinfo.sh tools/compat-pyopencl.sh
EXTRA_DIST += tools/tests/test_cmxgen.sh tools/tests/golden.schema \
	tools/tests/golden/proto.gen.h.expected tools/tests/golden/proto.gen.c.expected \
	tools/tests/golden/stubs.gen.h.expected tools/tests/golden/handlers.gen.h.expected \
	tools/tests/golden/handlers.gen.c.expected tools/demo tools/check tools/setup.sh \
	tools/compat-clinfo.sh tools/compat-pyopencl.sh tools/tests/compat_pyopencl.py \
	tools/tests/compat-env.sh tools/compat-oclgrind.sh tools/compat-piglit.sh tools/compat-apps.sh \
	tools/gpu-bundle tools/gpu-check

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
check-piglit: all icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  srcdir=$(top_srcdir) $(top_srcdir)/tools/compat-piglit.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
# clpeak and hashcat natively and through clmux: minutes, not in check.
bench-apps: all icd/clmux.icd
	OCL_ICD_VENDORS=$(abs_top_builddir)/icd CLMUXD=$(abs_top_builddir)/host/clmuxd \
	  srcdir=$(top_srcdir) $(top_srcdir)/tools/compat-apps.sh
.PHONY: check-oclgrind check-piglit bench-apps
