# SPDX-License-Identifier: MIT
# QEMU guests built from Debian packages, clmux's guest package among them
# (make debs), running OpenCL programs against clmuxd as their
# vhost-user-vsock device: make vm-check.
noinst_PROGRAMS += vm-tests/vm-transfer
vm_tests_vm_transfer_SOURCES = vm-tests/transfer.c
vm_tests_vm_transfer_LDADD = $(OPENCL_LIBS)
noinst_PROGRAMS += vm-tests/vm-memsize
vm_tests_vm_memsize_SOURCES = vm-tests/memsize.c
vm_tests_vm_memsize_LDADD = $(OPENCL_LIBS)
EXTRA_DIST += vm-tests/mkguest.sh vm-tests/init vm-tests/run.sh vm-tests/check.sh \
	vm-tests/libvirt-check.sh vm-tests/mkrootfs.sh vm-tests/container-check.sh

# The programs the guest carries, with their shared libraries.
VM_GUEST_BINS = guest/tests/e2e_compute guest/tests/e2e_memory guest/tests/e2e_events \
	guest/tests/e2e_program guest/tests/e2e_async guest/tests/e2e_multi \
	tools/clmux-bench vm-tests/vm-transfer vm-tests/vm-memsize

vm-check: all $(check_PROGRAMS) $(VM_GUEST_BINS) debs
	$(AM_V_GEN)$(top_srcdir)/vm-tests/mkguest.sh vm $(GUEST_DEB) $$(command -v clinfo) $(VM_GUEST_BINS)
	$(top_srcdir)/vm-tests/check.sh
.PHONY: vm-check
clean-local: clean-vm
clean-vm:
	rm -rf vm/root vm/*.img vm/vmlinux vm/*.log
.PHONY: clean-vm

# clmuxd following a private libvirtd: domains with a <clmux:gpu> element
# get a tenant and run OpenCL in the guest (tools/check runs it). It skips
# only where libvirtd cannot run, or clmux was configured without libvirt.
if HAVE_LIBVIRT
libvirt-check: all $(VM_GUEST_BINS) tools/libvirt-hook/clmux debs
	$(AM_V_GEN)$(top_srcdir)/vm-tests/mkguest.sh vm $(GUEST_DEB) $$(command -v clinfo) $(VM_GUEST_BINS)
	@CLMUXD=$(abs_top_builddir)/host/clmuxd CLMUXCTL=$(abs_top_builddir)/tools/clmuxctl \
	VMDIR=$(abs_top_builddir)/vm HOOK=$(top_srcdir)/tools/libvirt-hook.in \
	timeout -k 10 900 $(top_srcdir)/vm-tests/libvirt-check.sh; rc=$$?; \
	if [ $$rc = 77 ]; then echo "libvirt-check: SKIP (libvirtd cannot run here)"; exit 0; fi; \
	exit $$rc
else
libvirt-check:
	@echo "libvirt-check: SKIP (configured without libvirt: install libvirt-dev)"
endif
.PHONY: libvirt-check

# Real podman containers given clmux by clmuxctl's CDI spec (tools/check
# runs it): a root filesystem of Debian packages with the ICD loader and no
# clmux. It skips only without podman or root.
CONTAINER_BINS = tools/clmux-sample vm-tests/vm-transfer tools/clmux-bench
container-check: all $(CONTAINER_BINS)
	$(AM_V_GEN)$(top_srcdir)/vm-tests/mkrootfs.sh container $(CONTAINER_BINS)
	@CLMUXD=$(abs_top_builddir)/host/clmuxd CLMUXCTL=$(abs_top_builddir)/tools/clmuxctl \
	ROOTFS=$(abs_top_builddir)/container/rootfs \
	timeout -k 10 600 $(top_srcdir)/vm-tests/container-check.sh
.PHONY: container-check
clean-local: clean-container
clean-container:
	rm -rf container/rootfs
.PHONY: clean-container
