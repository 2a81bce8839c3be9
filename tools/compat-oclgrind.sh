#!/bin/sh
# SPDX-License-Identifier: MIT
# A second OpenCL implementation behind clmux: end-to-end programs with
# clmuxd serving Oclgrind's simulated device (--device oclgrind), each
# compared, as on PoCL, with the same program run natively on Oclgrind.
# Catches reliance on PoCL's behaviour in clmux and in the tests.
#
# Oclgrind simulates every work-item in software and is far too slow for
# the whole suite on 2 cores, and Oclgrind 21.10 (OpenCL 1.2) has bugs of
# its own that some cases hit natively; the selection below is what runs in
# tools/check (docs/compatibility.md says what is left out and why).
# Exit 77 when Oclgrind is not installed. Run from the build directory:
#   CLMUXD=host/clmuxd ../tools/compat-oclgrind.sh
set -u
rt=${OCLGRIND_ICD:-/usr/lib/oclgrind/liboclgrind-rt-icd.so}
[ -f "$rt" ] || { echo "SKIP: Oclgrind not installed ($rt)"; exit 77; }
clmuxd=${CLMUXD:-host/clmuxd}
# Program and Check case: what runs.
cases="e2e_image:transfer e2e_image:kernel e2e_image:query e2e_image:errors e2e_program:build
	e2e_program:compile e2e_memory:transfer
	e2e_memory:create e2e_memory:sub_buffer e2e_memory:map e2e_events:info e2e_async:async
	e2e_printf:gated e2e_program:refused e2e_zcopy:later_write"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "$rt" >"$tmp/oclgrind.icd"
cat "${OCL_ICD_VENDORS:-icd}/clmux.icd" >"$tmp/clmux.icd" 2>/dev/null || echo "$PWD/guest/.libs/libclmux.so" >"$tmp/clmux.icd"

pass=0 fail=0
for c in $cases; do
	prog=${c%%:*} case=${c#*:}
	if OCL_ICD_VENDORS="$tmp" CMX_E2E_NATIVE=Oclgrind CMX_E2E_REQUIRE=1 \
		CMX_E2E_DAEMON_ARGS="--device oclgrind" CLMUXD="$clmuxd" CK_RUN_CASE="$case" \
		CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-5} CLMUX_LOG=${CLMUX_LOG:-warn} \
		"guest/tests/$prog" >"$tmp/log" 2>&1; then
		pass=$((pass + 1))
		echo "ok   $prog $case: $(grep -a '^[0-9]*%' "$tmp/log")"
	else
		fail=$((fail + 1))
		echo "FAIL $prog $case:"
		grep -a -v '^clmuxd: info' "$tmp/log" | tail -20
	fi
done
echo "oclgrind: $pass passed, $fail failed"
[ $fail = 0 ]
