#!/bin/sh
# SPDX-License-Identifier: MIT
# The end-to-end programs again, the ICD speaking the shm transport (rings
# in shared memory, upgraded from the daemon's Unix socket); then the
# memory tests with payloads in the stream: over unix: without a shared
# area, and with one too small for most of them and no heap (large
# transfers then land in the native buffer or leave from it, host/land.c,
# and maps take guest memory); over shm: with an area too small for most.
set -u
. "$(dirname "$0")/e2e-run.sh"
# e2e-ivshmem.sh: the same over an ivshmem region (the daemon serves a
# file as QEMU's ivshmem-plain would share it, the ICD maps it as a guest
# maps the BAR, both sides polling), then a region too small for most
# payloads.
if [ "${1:-}" = ivshmem ]; then
	for t in e2e_compute e2e_memory e2e_events e2e_program e2e_multi e2e_async e2e_image \
		e2e_daemon_killed; do
		run "$t-ivshmem" CMX_E2E_TRANSPORT=ivshmem "./guest/tests/$t"
	done
	run e2e_memory-ivshmem-small CMX_E2E_TRANSPORT=ivshmem CMX_E2E_IVSHMEM=size=8M,slots=2 \
		./guest/tests/e2e_memory
	exit $rc
fi
for t in e2e_compute e2e_memory e2e_events e2e_program e2e_multi e2e_async e2e_daemon_killed \
	e2e_daemon_restart e2e_zcopy e2e_cmdbuf e2e_checkpoint e2e_migrate; do
	run "$t-shm" CMX_E2E_TRANSPORT=shm "./guest/tests/$t"
done
run e2e_memory-unix-no-area CLMUX_AREA_MB=0 ./guest/tests/e2e_memory
run e2e_memory-unix-small-area CLMUX_AREA_MB=1 CLMUX_HEAP_MB=0 ./guest/tests/e2e_memory
run e2e_memory-shm-small-area CMX_E2E_TRANSPORT=shm CLMUX_AREA_MB=1 ./guest/tests/e2e_memory
exit $rc
