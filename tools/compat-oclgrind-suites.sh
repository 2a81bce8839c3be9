#!/bin/sh
# SPDX-License-Identifier: MIT
# The compatibility suites on a second OpenCL implementation: clinfo,
# piglit's OpenCL tests and the project's PyOpenCL test file, each natively
# on Oclgrind and through clmux with clmuxd serving Oclgrind (--device
# oclgrind), compared by the same scripts as on PoCL (tools/compat-*.sh)
# with Oclgrind's own exception lists. A test that passes natively must
# pass through clmux. clinfo must match but for its listed exceptions.
#
# In tools/check (make check-compat-oclgrind, 1.5 to 2.5 minutes on 2 cores)
# piglit runs the selection it runs on PoCL; every piglit test with
# CMX_OCLGRIND_ALL=1 (make check-compat-oclgrind-all; docs/compatibility.md
# has the counts). Exit 0: parity; 1: a difference; 77:
# Oclgrind not installed (a suite whose tool is missing skips alone). From
# a build directory:
#   OCL_ICD_VENDORS=$PWD/icd CLMUXD=$PWD/host/clmuxd srcdir=.. ../tools/compat-oclgrind-suites.sh
set -u
rt=${OCLGRIND_ICD:-/usr/lib/oclgrind/liboclgrind-rt-icd.so}
[ -f "$rt" ] || { echo "SKIP: Oclgrind not installed ($rt)"; exit 77; }
srcdir=${srcdir:-$(dirname "$0")/..}
icd=${OCL_ICD_VENDORS:-icd}
[ -f "$icd/clmux.icd" ] || { echo "FAIL: no $icd/clmux.icd"; exit 1; }

vendors=$(mktemp -d)
trap 'rm -rf "$vendors"' EXIT
echo "$rt" >"$vendors/oclgrind.icd"
cp "$icd/clmux.icd" "$vendors/"

# piglit on Oclgrind: the same selection as on PoCL (tools/compat-piglit.sh;
# about 1 to 2 minutes on 2 cores), every test with CMX_OCLGRIND_ALL=1.
piglit_env="CMX_PIGLIT_PARITY=pass CMX_PIGLIT_TIMEOUT=${CMX_PIGLIT_TIMEOUT:-60}"
[ -n "${CMX_OCLGRIND_ALL:-}" ] && piglit_env="$piglit_env CMX_PIGLIT_ALL=1 CMX_PIGLIT_LIST=${CMX_PIGLIT_LIST:-}"

fail=0
for suite in clinfo piglit pyopencl; do
	echo "== $suite: Oclgrind natively and through clmux"
	extra=""
	[ $suite = piglit ] && extra=$piglit_env
	# shellcheck disable=SC2086 # extra: assignments
	env OCL_ICD_VENDORS="$vendors" CMX_COMPAT_DAEMON_ARGS="--device oclgrind" srcdir="$srcdir" \
		$extra "$srcdir/tools/compat-$suite.sh"
	rc=$?
	case $rc in
	0) ;;
	77) echo "(skipped: tool missing)" ;;
	*) fail=1 ;;
	esac
done
[ $fail = 0 ] && echo "PASS: clinfo, piglit and PyOpenCL on Oclgrind: every test passing natively passes through clmux"
exit $fail
