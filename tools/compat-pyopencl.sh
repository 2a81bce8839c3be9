#!/bin/sh
# SPDX-License-Identifier: MIT
# PyOpenCL parity: tools/tests/compat_pyopencl.py natively, then through
# clmux (a clmuxd of its own on a private socket); fails when a test that
# passes natively does not pass through clmux. The one allowed exception
# is a skip whose reason names issue 3 (images, reported absent by clmux).
# Exit 77 when /usr/bin/python3 cannot import pyopencl and numpy. From
# make check, OCL_ICD_VENDORS and CLMUXD come from tools/local.mk; by hand:
#   OCL_ICD_VENDORS=build/icd CLMUXD=build/host/clmuxd tools/compat-pyopencl.sh
set -u
srcdir=${srcdir:-$(dirname "$0")/..}
py=/usr/bin/python3
test="$srcdir/tools/tests/compat_pyopencl.py"
"$py" -c 'import pyopencl, numpy' 2>/dev/null ||
	{ echo "SKIP: $py cannot import pyopencl and numpy (apt-get install python3-pyopencl)"; exit 77; }
. "${srcdir:-$(dirname "$0")/..}/tools/tests/compat-env.sh"
native_name=$(OCL_ICD_VENDORS="$tmp/native" "$py" -c 'import pyopencl as cl; print(cl.get_platforms()[0].name)')

# PyOpenCL's kernel cache lives under XDG_CACHE_HOME: a fresh one for each
# side, so both compile (and clmux forwards) every program; the second
# clmux run finds it filled and builds from the cached binaries instead
# (clCreateProgramWithBinary through clmux).
run() { # vendors-dir platform results
	echo "== $3"
	XDG_CACHE_HOME="$tmp/cache-$1" OCL_ICD_VENDORS="$tmp/$1" CLMUX_SERVER="unix:$tmp/s.sock" \
		CMX_COMPAT_PLATFORM="$2" CMX_COMPAT_RESULTS="$tmp/$3.res" "$py" "$test" 2>&1
	[ -s "$tmp/$3.res" ] || { echo "FAIL: no results from the $3 run"; exit 1; }
}
run native "$native_name" native
run clmux clmux clmux
run clmux clmux clmux-cached

fail=0
for side in clmux clmux-cached; do
	while read -r name status why; do
		[ "$status" = pass ] || continue
		got=$(grep "^$name " "$tmp/$side.res")
		case "$got" in
		"$name pass") ;;
		"$name skip "*"issue 3"*) ;;
		*) echo "FAIL: $name passes natively, $side: ${got:-missing}"; fail=1 ;;
		esac
	done <"$tmp/native.res"
done
count() { printf '%s pass, %s fail, %s skip' "$(grep -c ' pass$' "$1")" \
	"$(grep -c ' fail$' "$1")" "$(grep -c ' skip' "$1")"; }
echo "native ($native_name): $(count "$tmp/native.res")"
echo "clmux:                   $(count "$tmp/clmux.res")"
echo "clmux, cached binaries:  $(count "$tmp/clmux-cached.res")"
[ $fail = 0 ] && echo "PASS: every test that passes natively passes through clmux (or skips: issue 3)"
exit $fail
