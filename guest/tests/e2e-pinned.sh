#!/bin/sh
# SPDX-License-Identifier: MIT
# The transfer tests through the GPU paths, on whatever device the daemon
# serves: the daemon's pinned staging and copy threads forced on for every
# payload (CLMUX_PINNED=1, CLMUX_PINNED_MIN=1; a CPU device has them off),
# the ICD's copy helpers too (CLMUX_COPY_THREADS; off on small machines).
set -u
rc=0
run() { # NAME ENV... PROGRAM
	name=$1
	shift
	env CLMUX_PINNED=1 CLMUX_PINNED_MIN=1 CLMUX_COPY_THREADS=2 "$@" >"guest/tests/$name.out" 2>&1
	s=$?
	case $s in
	0) echo "$name: passed" ;;
	77) echo "$name: skipped" ;;
	*) echo "$name: FAILED ($s)"; tail -40 "guest/tests/$name.out"; rc=1 ;;
	esac
}
for t in e2e_memory e2e_events e2e_zcopy; do
	run "$t-pinned" ./guest/tests/$t
	run "$t-pinned-shm" CMX_E2E_TRANSPORT=shm ./guest/tests/$t
done
# Payloads in the stream (no area): staging, not area blocks, is copied.
run e2e_memory-pinned-no-area CLMUX_AREA_MB=0 ./guest/tests/e2e_memory
# Without an area no buffer lives in the heap, so vecadd's non-blocking
# 64 MiB writes go through the daemon's slots in 16 chunks; the benchmark
# fails on a wrong sum.
run vecadd-pinned-no-area CLMUX_AREA_MB=0 ./tools/clmux-bench --clmuxd "$CLMUXD" \
	--only vecadd --reps 2
exit $rc
