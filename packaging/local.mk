# SPDX-License-Identifier: MIT
# What make install adds for a host or a guest: the configuration files,
# clmuxd's systemd unit; and the checks of the packages built from them
# (debian/).

# The configuration: installed when absent, never over the admin's file;
# uninstalled only while unchanged.
clmuxconfdir = $(sysconfdir)/clmux
CLMUX_CONF_FILES = clmuxd.conf client.conf
EXTRA_DIST += packaging/clmuxd.conf packaging/client.conf
install-data-local: install-clmux-conf
uninstall-local: uninstall-clmux-conf
install-clmux-conf:
	$(MKDIR_P) '$(DESTDIR)$(clmuxconfdir)'
	for f in $(CLMUX_CONF_FILES); do \
	  test -e '$(DESTDIR)$(clmuxconfdir)'/$$f || \
	    $(INSTALL_DATA) $(srcdir)/packaging/$$f '$(DESTDIR)$(clmuxconfdir)'/$$f || exit 1; \
	done
uninstall-clmux-conf:
	for f in $(CLMUX_CONF_FILES); do \
	  if cmp -s $(srcdir)/packaging/$$f '$(DESTDIR)$(clmuxconfdir)'/$$f; then \
	    rm -f '$(DESTDIR)$(clmuxconfdir)'/$$f; fi; \
	done
.PHONY: install-clmux-conf uninstall-clmux-conf

# clmuxd.service, with this build's paths.
# The socket units (systemd holds the sockets across restarts) as they are.
EXTRA_DIST += packaging/clmuxd.service.in packaging/clmuxd.socket packaging/clmuxd-admin.socket
CLEANFILES += packaging/clmuxd.service
if HAVE_SYSTEMD_UNITDIR
systemdsystemunit_DATA = packaging/clmuxd.service packaging/clmuxd.socket \
	packaging/clmuxd-admin.socket
endif
packaging/clmuxd.service: $(top_srcdir)/packaging/clmuxd.service.in Makefile
	$(AM_V_GEN)mkdir -p packaging && sed -e 's|@sbindir[@]|$(sbindir)|g' \
	  -e 's|@sysconfdir[@]|$(sysconfdir)|g' $(top_srcdir)/packaging/clmuxd.service.in >$@

# The unit passes systemd-analyze verify (a skip, 77, where systemd-analyze
# is missing).
TESTS += packaging/unit-check.sh
EXTRA_DIST += packaging/unit-check.sh
check_DATA += packaging/clmuxd.service

# make distcheck: the tarball unpacked, built out of tree (VPATH), every
# test run, installed, uninstalled. distcheck-quick is the same with
# make check limited to DISTCHECK_TESTS (tools/check runs it): the build
# and install checks whole, a test of each part rather than the suite.
DISTCHECK_TESTS = transport/tests/test_codec host/tests/test_config tools/tests/test_cmxgen.sh \
	guest/tests/e2e_compute packaging/unit-check.sh
distcheck-quick:
	$(MAKE) $(AM_MAKEFLAGS) distcheck TESTS='$(DISTCHECK_TESTS)'
.PHONY: distcheck-quick

# The Debian packages (debian/), built once per build tree into debs/ from
# the make dist tree (packaging/debs.sh; again only when that tree
# changed): vm-check's and libvirt-check's guests unpack the guest package,
# package-check installs all three.
EXTRA_DIST += packaging/debs.sh debian/changelog debian/control debian/copyright \
	debian/rules debian/source/format debian/not-installed debian/clmuxd.default \
	debian/clmuxd.install debian/clmuxd.postinst debian/clmuxd.prerm debian/clmuxd.postrm \
	debian/clmux-opencl-icd.install debian/clmux-tools.install
DEB_ARCH = $$(dpkg --print-architecture)
GUEST_DEB = debs/clmux-opencl-icd_$(PACKAGE_VERSION)_$(DEB_ARCH).deb
debs: all
	$(AM_V_GEN)PACKAGE_VERSION=$(PACKAGE_VERSION) $(top_srcdir)/packaging/debs.sh debs
.PHONY: debs
clean-local: clean-debs
clean-debs:
	rm -rf debs
.PHONY: clean-debs

# The packages (debs/, built first where they are not) installed, run as
# the unit runs clmuxd, removed and purged (packaging/package-check.sh; as
# root, a few minutes; tools/check runs it). A skip (77) passes.
EXTRA_DIST += packaging/package-check.sh
package-check: all
	PACKAGE_VERSION=$(PACKAGE_VERSION) top_srcdir=$(top_srcdir) DEBS=$(abs_top_builddir)/debs \
	  CLMUX_SAMPLE=$(abs_top_builddir)/tools/clmux-sample \
	  $(top_srcdir)/packaging/package-check.sh; rc=$$?; [ $$rc = 77 ] || exit $$rc
.PHONY: package-check
