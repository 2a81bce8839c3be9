#!/bin/sh
# SPDX-License-Identifier: MIT
# The end-to-end programs again over an ivshmem region: the daemon serves
# a file as QEMU's ivshmem-plain would share it, and the ICD maps that file
# as a guest maps the device's BAR (both sides polling); then with a small
# region, whose data areas are too small for most payloads.
set -u
rc=0
run() { # NAME ENV... PROGRAM
	name=$1
	shift
	env "$@" >"guest/tests/$name.out" 2>&1
	s=$?
	case $s in
	0) echo "$name: passed" ;;
	77) echo "$name: skipped" ;;
	*) echo "$name: FAILED ($s)"; tail -40 "guest/tests/$name.out"; rc=1 ;;
	esac
}
for t in e2e_compute e2e_memory e2e_events e2e_program e2e_multi e2e_async e2e_image \
	e2e_daemon_killed; do
	run "$t-ivshmem" CMX_E2E_TRANSPORT=ivshmem "./guest/tests/$t"
done
run e2e_memory-ivshmem-small CMX_E2E_TRANSPORT=ivshmem CMX_E2E_IVSHMEM=size=8M,slots=2 \
	./guest/tests/e2e_memory
exit $rc
