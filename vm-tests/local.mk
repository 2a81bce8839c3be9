# SPDX-License-Identifier: MIT
# QEMU guests built from Debian packages, running OpenCL programs against
# clmuxd as their vhost-user-vsock device: make vm-check.
noinst_PROGRAMS += vm-tests/vm-transfer
vm_tests_vm_transfer_SOURCES = vm-tests/transfer.c
vm_tests_vm_transfer_LDADD = $(OPENCL_LIBS)
EXTRA_DIST += vm-tests/mkguest.sh vm-tests/init vm-tests/run.sh vm-tests/check.sh

# The programs the guest carries, with their shared libraries.
VM_GUEST_BINS = guest/tests/e2e_compute guest/tests/e2e_memory guest/tests/e2e_events \
	guest/tests/e2e_program guest/tests/e2e_async guest/tests/e2e_multi \
	tools/clmux-bench vm-tests/vm-transfer

vm-check: all $(check_PROGRAMS) $(VM_GUEST_BINS)
	$(AM_V_GEN)$(top_srcdir)/vm-tests/mkguest.sh vm . $$(command -v clinfo) $(VM_GUEST_BINS)
	$(top_srcdir)/vm-tests/check.sh
.PHONY: vm-check
clean-local: clean-vm
clean-vm:
	rm -rf vm/root vm/*.img vm/vmlinux vm/*.log
.PHONY: clean-vm
