#!/bin/sh
# SPDX-License-Identifier: MIT
# The tests through the GPU's short-call paths, on whatever device the
# daemon serves: small blocking transfers run blocking on the loop
# (CLMUX_SHORT_BLOCKING=1; a CPU device has it off) and the shm loop spins
# after a sync call (CLMUX_SHM_SYNC_SPIN_US; off on small machines).
set -u
rc=0
run() { # NAME ENV... PROGRAM
	name=$1
	shift
	env CLMUX_SHORT_BLOCKING=1 CLMUX_SHM_SYNC_SPIN_US=20 "$@" >"guest/tests/$name.out" 2>&1
	s=$?
	case $s in
	0) echo "$name: passed" ;;
	77) echo "$name: skipped" ;;
	*) echo "$name: FAILED ($s)"; tail -40 "guest/tests/$name.out"; rc=1 ;;
	esac
}
for t in e2e_memory e2e_events e2e_compute; do
	run "$t-short" ./guest/tests/$t
	run "$t-short-shm" CMX_E2E_TRANSPORT=shm ./guest/tests/$t
done
exit $rc
