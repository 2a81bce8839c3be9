#!/bin/sh
# SPDX-License-Identifier: MIT
# The tests through the GPU paths, on whatever device the daemon serves
# (a CPU device has them off): the daemon's pinned staging and copy threads
# for every payload (CLMUX_PINNED=1, CLMUX_PINNED_MIN=1) with the ICD's copy
# helpers (CLMUX_COPY_THREADS; off on small machines); then small blocking
# transfers on the loop (CLMUX_SHORT_BLOCKING=1) and the shm loop's spin
# after a sync call (CLMUX_SHM_SYNC_SPIN_US; off on small machines).
set -u
pinned="CLMUX_PINNED=1 CLMUX_PINNED_MIN=1 CLMUX_COPY_THREADS=2"
short="CLMUX_SHORT_BLOCKING=1 CLMUX_SHM_SYNC_SPIN_US=20"
. "$(dirname "$0")/e2e-run.sh"
# shellcheck disable=SC2086 # word splitting wanted
for t in e2e_memory e2e_events e2e_zcopy; do
	run "$t-pinned" $pinned ./guest/tests/$t
	run "$t-pinned-shm" $pinned CMX_E2E_TRANSPORT=shm ./guest/tests/$t
done
# Payloads in the stream (no area): staging, not area blocks, is copied.
# shellcheck disable=SC2086
run e2e_memory-pinned-no-area $pinned CLMUX_AREA_MB=0 ./guest/tests/e2e_memory
# Without an area no buffer lives in the heap, so vecadd's non-blocking
# 64 MiB writes go through the daemon's slots in 16 chunks; the benchmark
# fails on a wrong sum.
# shellcheck disable=SC2086
run vecadd-pinned-no-area $pinned CLMUX_AREA_MB=0 ./tools/clmux-bench --clmuxd "$CLMUXD" \
	--only vecadd --reps 2
# shellcheck disable=SC2086
for t in e2e_memory e2e_events e2e_compute; do
	run "$t-short" $short ./guest/tests/$t
	run "$t-short-shm" $short CMX_E2E_TRANSPORT=shm ./guest/tests/$t
done
exit $rc
