#!/bin/sh
# SPDX-License-Identifier: MIT
# piglit's OpenCL tests natively and through clmux: every test must end the
# same way (pass, fail, skip, warn, crash) on both, but for the differences
# listed below with their reasons; with CMX_PIGLIT_PARITY=pass (Oclgrind:
# tools/compat-oclgrind-suites.sh), every test that passes natively must
# pass through clmux. A driver crash that ends clmuxd (an in-process driver)
# gets the next test a fresh daemon; the tests that did are named.
#
# The set: every cl-* program piglit ships (Debian's piglit package,
# /usr/lib/x86_64-linux-gnu/piglit/bin) except cl-interop-* (EGL/GL
# sharing, no display here), plus cl-program-tester on piglit's
# tests/cl/program: all of build/ (options, includes, failures) and the
# part of execute/ that exercises the API paths clmux forwards (images,
# work-item functions, memory spaces, calls). The 101 tests of
# execute/builtin/ check the device's OpenCL C built-ins, which clmux only
# passes through; with the rest of execute/ they run with CMX_PIGLIT_ALL=1
# (`make check-piglit-all`: about 3 minutes on 2 cores; not in tools/check). Each runs with a
# vendors directory holding only the native ICD, then only clmux.icd, in
# front of a clmuxd of its own. Exit 0: same; 1: a difference, printed;
# 77: piglit not installed. From make check (tools/local.mk), or by hand:
#   OCL_ICD_VENDORS=build/icd CLMUXD=build/host/clmuxd tools/compat-piglit.sh
# CMX_PIGLIT_LIST=FILE writes the per-test results (test native clmux).
set -u
pbin=${PIGLIT_BIN:-/usr/lib/x86_64-linux-gnu/piglit/bin}
ptests=${PIGLIT_TESTS:-/usr/lib/x86_64-linux-gnu/piglit/tests/cl/program}
[ -x "$pbin/cl-api-get-platform-ids" ] || { echo "SKIP: piglit not installed"; exit 77; }
. "${srcdir:-$(dirname "$0")/..}/tools/tests/compat-env.sh"
export CLMUX_SERVER="unix:$tmp/s.sock"
limit=${CMX_PIGLIT_TIMEOUT:-120}

# Tests whose outcome through clmux differs on purpose: device (the native
# ICD's name), test, the clmux outcome, why. Only the device's own lines
# count.
cat >"$tmp/exceptions.all" <<'XEOF'
pocl cl-api-create-command-queue pass natively PoCL 3.1 ends the program with status 2 before it reports (crash); clmux answers every case as the spec wants
oclgrind cl-custom-use-sub-buffer-in-kernel fail Oclgrind accepts a sub-buffer origin of 100 bytes although its CL_DEVICE_MEM_BASE_ADDR_ALIGN is 1024 bits; the spec requires CL_MISALIGNED_SUB_BUFFER_OFFSET, which clmux returns (checked in the guest)
XEOF
awk -v d="$device" '$1 == d { $1 = ""; sub(/^ /, ""); print }' "$tmp/exceptions.all" >"$tmp/exceptions"

# What a difference is. same (PoCL): every test must end through clmux as
# natively. pass (CMX_PIGLIT_PARITY=pass, Oclgrind): every test that passes
# natively must pass through clmux; other differences (a native crash that
# clmux's own argument checks turn into a pass, say) are printed as notes.
parity=${CMX_PIGLIT_PARITY:-same}

# One "NAME<tab>COMMAND" line per test.
{
	for p in "$pbin"/cl-*; do
		n=$(basename "$p")
		case $n in cl-interop-*|cl-program-tester) continue ;; esac
		printf '%s\t%s\n' "$n" "$p"
	done
	if [ -n "${CMX_PIGLIT_ALL:-}" ]; then
		find "$ptests" -name '*.cl' -o -name '*.program_test'
	else
		find "$ptests/build" -name '*.cl' -o -name '*.program_test'
		for f in image-attributes.cl image-read-2d.cl image-write-2d.cl get-global-id.cl \
			get-global-size.cl get-group-id.cl get-local-id.cl get-local-size.cl \
			get-num-groups.cl get-work-dim.cl global-offset.cl global-memory.cl \
			local-memory.cl constant-load.cl kernel_exec.cl program-scope-arrays.cl \
			calls.cl calls-struct.cl for-loop.cl sampler.cl vector-load-int4.cl \
			vector-store-int4.cl; do
			[ -f "$ptests/execute/$f" ] && echo "$ptests/execute/$f"
		done
	fi 2>/dev/null | sort |
		while read -r f; do
			printf 'program/%s\t%s/cl-program-tester %s\n' "${f#"$ptests"/}" "$pbin" "$f"
		done
} >"$tmp/tests"

# outcome VENDORS COMMAND: the PIGLIT result line's word, else crash/timeout.
outcome() {
	out=$(cd "$tmp" && OCL_ICD_VENDORS="$1" timeout "$limit" $2 2>&1)
	rc=$?
	r=$(printf '%s\n' "$out" | sed -n 's/.*PIGLIT: *{ *"result": *"\([a-z]*\)".*/\1/p' | tail -1)
	if [ -n "$r" ]; then echo "$r"
	elif [ $rc = 124 ]; then echo timeout
	else echo "crash"; fi
}

: >"$tmp/results"
while IFS="$(printf '\t')" read -r name cmd; do
	nat=$(outcome "$tmp/native" "$cmd")
	clmuxd_up
	printf '%s %s %s\n' "$name" "$nat" "$(outcome "$tmp/clmux" "$cmd")" >>"$tmp/results"
	kill -0 "$pid" 2>/dev/null || echo "$name" >>"$tmp/killers"
done <"$tmp/tests"
[ -n "${CMX_PIGLIT_LIST:-}" ] && cp "$tmp/results" "$CMX_PIGLIT_LIST"

fail=0
while read -r name nat cmx; do
	want=$(awk -v n="$name" '$1 == n { print $2 }' "$tmp/exceptions")
	if [ -n "$want" ]; then
		[ "$cmx" = "$want" ] || { echo "FAIL: $name: clmux $cmx, listed as $want"; fail=1; }
	elif [ "$nat" != "$cmx" ] && { [ "$parity" = same ] || [ "$nat" = pass ]; }; then
		echo "FAIL: $name: native $nat, clmux $cmx"
		fail=1
	elif [ "$nat" != "$cmx" ]; then
		echo "note: $name: native $nat, clmux $cmx"
	fi
done <"$tmp/results"
count() { awk -v c="$1" -v w="$2" '$c == w' "$tmp/results" | wc -l; }
for side in native:2 clmux:3; do
	c=${side#*:}
	printf '%-7s %3d pass, %3d fail, %3d skip, %3d warn, %3d crash, %3d timeout\n' "${side%:*}" \
		"$(count "$c" pass)" "$(count "$c" fail)" "$(count "$c" skip)" "$(count "$c" warn)" \
		"$(count "$c" crash)" "$(count "$c" timeout)"
done
[ -s "$tmp/killers" ] && echo "note: the driver crashed clmuxd in:" $(cat "$tmp/killers")
[ $fail = 0 ] && [ "$parity" = same ] &&
	echo "PASS: $(wc -l <"$tmp/results") piglit OpenCL tests end the same natively and through clmux ($device)"
[ $fail = 0 ] && [ "$parity" = pass ] &&
	echo "PASS: of $(wc -l <"$tmp/results") piglit OpenCL tests, every one that passes natively passes through clmux ($device)"
exit $fail
