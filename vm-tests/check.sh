#!/bin/sh
# SPDX-License-Identifier: MIT
# make vm-check: OpenCL programs inside QEMU guests whose vsock device is
# clmuxd, then again through an ivshmem region, each with its own time
# limit. Run from the build directory.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
command -v qemu-system-x86_64 >/dev/null || { echo "vm-check: SKIP (no qemu-system-x86_64)"; exit 0; }
export CLMUXD=${CLMUXD:-$PWD/host/clmuxd} VMDIR=${VMDIR:-$PWD/vm}
pass=0
failed=""

# name, time limit (s), run.sh arguments. TCG runs the guest's CPU (~10x
# slower than the host): the e2e programs compare clmux with itself there
# (no native driver in the guest), so the device work is checked on both.
run() {
	name=$1 limit=$2
	shift 2
	start=$(date +%s)
	if VM_TIMEOUT=$limit "$top/vm-tests/run.sh" "$@" >"vm/$name.log" 2>&1; then
		echo "PASS: vm/$name ($(($(date +%s) - start)) s)"
		pass=$((pass + 1))
	else
		echo "FAIL: vm/$name ($(($(date +%s) - start)) s)"
		tail -30 "vm/$name.log"
		failed="$failed $name"
	fi
}
# CMX_E2E_TRANSPORT tells the programs what the guest's ICD found (it
# finds the daemon by itself): e2e_async expects completion fences only
# where the session has a shared area (ivshmem, not vsock).
E2E="--env CMX_E2E_NATIVE=clmux --env CMX_E2E_REQUIRE=1"

run clinfo 60 -- clinfo -l
run transfer 120 -- vm-transfer 8
run killed-mid-transfer 120 --kill-on transferring -- vm-transfer
run two-vms 180 --vms 2 -- vm-transfer 4
for t in e2e_compute e2e_memory e2e_program e2e_async e2e_multi e2e_events; do
	# shellcheck disable=SC2086
	run "$t" 240 $E2E --env CMX_E2E_TRANSPORT=vsock -- "$t"
done
# The VM's tenant held to its rate quota through the virtqueues.
run rate 120 --rate 1M/s -- vm-transfer rate
# The same through an ivshmem-plain device (the ICD finds it by its PCI
# ids); the killed VM is noticed when its beat stops (10 s).
run ivshmem-clinfo 60 --ivshmem -- clinfo -l
run ivshmem-transfer 120 --ivshmem -- vm-transfer 8
run ivshmem-killed-mid-transfer 120 --ivshmem --kill-on transferring -- vm-transfer
run ivshmem-two-vms 180 --ivshmem --vms 2 -- vm-transfer 4
for t in e2e_compute e2e_memory e2e_program e2e_async e2e_multi e2e_events; do
	# shellcheck disable=SC2086
	run "ivshmem-$t" 240 --ivshmem $E2E --env CMX_E2E_TRANSPORT=ivshmem -- "$t"
done
echo "# vm-check: $pass passed, failed:${failed:- none}"
[ -z "$failed" ]
