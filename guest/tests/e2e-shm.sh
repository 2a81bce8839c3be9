#!/bin/sh
# SPDX-License-Identifier: MIT
# The end-to-end programs again, the ICD speaking the shm transport (rings
# in shared memory, upgraded from the daemon's Unix socket).
set -u
export CMX_E2E_TRANSPORT=shm
rc=0
for t in e2e_compute e2e_memory e2e_events e2e_program e2e_multi e2e_async; do
	./guest/tests/$t >guest/tests/$t-shm.out 2>&1
	s=$?
	case $s in
	0) echo "shm: $t passed" ;;
	77) echo "shm: $t skipped" ;;
	*) echo "shm: $t FAILED ($s)"; tail -40 guest/tests/$t-shm.out; rc=1 ;;
	esac
done
exit $rc
