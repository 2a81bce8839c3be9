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
icd=${OCL_ICD_VENDORS:-icd}
clmuxd=${CLMUXD:-host/clmuxd}
[ -f "$icd/clmux.icd" ] || { echo "FAIL: no $icd/clmux.icd"; exit 1; }
[ -x "$clmuxd" ] || { echo "FAIL: no daemon at $clmuxd"; exit 1; }
# An ASan build's ICD cannot load into an uninstrumented program (clinfo,
# /usr/bin/python3): the sanitizer runtime must come first.
nm -D "$(cat "$icd/clmux.icd")" 2>/dev/null | grep -q __asan_init &&
	{ echo "SKIP: sanitizer-instrumented libclmux cannot load into an uninstrumented program"; exit 77; }
native=$(ls "$icd"/*.icd | grep -v '/clmux\.icd$' | head -1)
[ -n "$native" ] || { echo "SKIP: no native ICD next to clmux.icd"; exit 77; }

tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/native" "$tmp/clmux"
cp "$native" "$tmp/native/"
cp "$icd/clmux.icd" "$tmp/clmux/"
native_name=$(OCL_ICD_VENDORS="$tmp/native" "$py" -c 'import pyopencl as cl; print(cl.get_platforms()[0].name)')

"$clmuxd" --listen "unix:$tmp/s.sock" 2>"$tmp/clmuxd.log" &
pid=$!
i=0
while [ ! -S "$tmp/s.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -S "$tmp/s.sock" ] || { echo "FAIL: clmuxd did not start"; cat "$tmp/clmuxd.log"; exit 1; }

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
