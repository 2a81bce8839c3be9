#!/bin/sh
# SPDX-License-Identifier: MIT
# clinfo parity: the device clmux offers must read, in clinfo, exactly like
# the native one, but for the differences listed below, each with its reason.
#
# Runs `clinfo --raw` (every property, one line each) and plain `clinfo`'s
# "NULL platform behavior" section (default platform, clCreateContext with
# no platform, clCreateContextFromType for every type) once with a vendors
# directory holding only the native ICD and once with only clmux.icd, in
# front of a clmuxd of its own. Exit 0: same; 1: a difference, printed;
# 77: no clinfo. From make check, OCL_ICD_VENDORS (the build tree's icd/)
# and CLMUXD come from tools/local.mk; by hand:
#   OCL_ICD_VENDORS=build/icd CLMUXD=build/host/clmuxd tools/compat-clinfo.sh
set -u
command -v clinfo >/dev/null 2>&1 || { echo "SKIP: clinfo not installed"; exit 77; }
. "${srcdir:-$(dirname "$0")/..}/tools/tests/compat-env.sh"
export CLMUX_SERVER="unix:$tmp/s.sock"

# The properties clmux reports differently on purpose. Columns: the raw
# property name; what clmux must report ("-" empty, "*" anything; a line
# clinfo leaves out because of an earlier answer also passes); why. The
# native line is dropped whatever it says.
cat >"$tmp/exceptions" <<'EOF'
CL_PLATFORM_NAME                        clmux       the platform is clmux's, not the vendor's
CL_PLATFORM_VENDOR                      *           the platform is clmux's, not the vendor's
CL_PLATFORM_VERSION                     *           clmux's own version string (the numeric version must match)
CL_PLATFORM_ICD_SUFFIX_KHR              CLMUX       the suffix names the ICD that answers
CL_DEVICE_SVM_CAPABILITIES              -           SVM pointers cannot cross the VM boundary yet (issue 3)
CL_DEVICE_HOST_UNIFIED_MEMORY           CL_FALSE    guest memory is never the device's memory
CL_DEVICE_PIPE_SUPPORT                  CL_FALSE    pipes are not forwarded (issue 3)
CL_DEVICE_MAX_PIPE_ARGS                 0           pipes are not forwarded (issue 3)
CL_DEVICE_PIPE_MAX_ACTIVE_RESERVATIONS  0           pipes are not forwarded (issue 3)
CL_DEVICE_PIPE_MAX_PACKET_SIZE          0           pipes are not forwarded (issue 3)
CL_DEVICE_DEVICE_ENQUEUE_CAPABILITIES   -           device-side enqueue is not offered (issue 3)
CL_DEVICE_QUEUE_ON_DEVICE_PROPERTIES    -           device-side enqueue is not offered (issue 3)
CL_DEVICE_QUEUE_ON_DEVICE_PREFERRED_SIZE 0          device-side enqueue is not offered (issue 3)
CL_DEVICE_QUEUE_ON_DEVICE_MAX_SIZE      0           device-side enqueue is not offered (issue 3)
CL_DEVICE_MAX_ON_DEVICE_QUEUES          0           device-side enqueue is not offered (issue 3)
CL_DEVICE_MAX_ON_DEVICE_EVENTS          0           device-side enqueue is not offered (issue 3)
CL_DEVICE_BUILT_IN_KERNELS              -           built-in kernels are vendor entry points clmux does not forward
CL_DEVICE_BUILT_IN_KERNELS_WITH_VERSION -           built-in kernels are vendor entry points clmux does not forward
CL_DEVICE_SPIR_VERSIONS                 *           cl_khr_spir is filtered (below)
EOF

# On a device whose platform is older than clmux's OpenCL 3.0 platform,
# clinfo asks clmux's platform for what only 3.0 platforms have.
if [ "$device" = oclgrind ]; then
	cat >>"$tmp/exceptions" <<'EOF'
CL_PLATFORM_NUMERIC_VERSION             0xc00000    clmux's platform is OpenCL 3.0 (its API) over Oclgrind's 1.2 platform; the device's version reads as Oclgrind's
CL_PLATFORM_EXTENSIONS_WITH_VERSION     cl_khr_icd:0x400000 an OpenCL 3.0 platform query; Oclgrind's 1.2 platform has none
CL_PLATFORM_HOST_TIMER_RESOLUTION       0           an OpenCL 3.0 platform query; 0: clGetHostTimer is not offered (guest and host clocks differ)
EOF
fi

# Items of list-valued properties clmux leaves out: taken out of the native
# list, which must then equal clmux's. Columns: item; why.
cat >"$tmp/dropped" <<'EOF'
cl_pocl_content_size            PoCL platform extension with its own entry points, not forwarded
CL_COMMAND_BUFFER_CAPABILITY_KERNEL_PRINTF_KHR a printing kernel is not recorded: its output has no launch to come back with
CL_COMMAND_BUFFER_CAPABILITY_DEVICE_SIDE_ENQUEUE_KHR device-side enqueue is not offered (issue 3)
cl_khr_spir                     SPIR binaries are not forwarded
__opencl_c_pipes                pipes are not forwarded (issue 3)
__opencl_c_device_enqueue       device-side enqueue is not offered (issue 3)
CL_EXEC_NATIVE_KERNEL           clEnqueueNativeKernel would run a guest pointer on the host
EOF

# raw FILE SIDE: one "NAME<tab>value" line per property, the platform's
# tag ([POCL/0], [CLMUX/0]) made neutral, list items in "dropped" taken out
# of the native side, exceptions checked (clmux) or dropped (native).
normalise() {
	awk -v side="$2" -v exc="$tmp/exceptions" -v drop="$tmp/dropped" -v bad="$tmp/bad" '
	BEGIN {
		while ((getline l < exc) > 0) { split(l, f, " "); want[f[1]] = f[2] }
		while ((getline l < drop) > 0) { split(l, f, " "); gone[f[1]] = 1 }
	}
	/^$/ { next }
	{
		line = $0; tag = ""
		if ($1 ~ /^\[.*\]$/) {
			tag = $1; sub(/\[[^\/]*\//, "[", tag); sub(/^ *[^ ]+/, "", line)
		}
		sub(/^ */, "", line); name = line; sub(/ .*/, "", name)
		val = substr(line, length(name) + 1); gsub(/^ +| +$/, "", val)
		if (name ~ /EXTENSIONS|FEATURES|EXECUTION_CAPABILITIES|COMMAND_BUFFER_CAPABILITIES/) {
			# Lists: space-separated items, "name:version" items, or
			# "A | B" flags; one normal form for all three.
			n = split(val, it, / \| | +/); out = ""
			for (k = 1; k <= n; k++) {
				item = it[k]; sub(/:.*/, "", item)
				if (side == "native" && item in gone) continue
				out = out (out == "" ? "" : " ") it[k]
			}
			val = out
		}
		if (name in want) {
			if (side == "clmux" && want[name] != "*" && val != (want[name] == "-" ? "" : want[name]))
				printf "clmux reports %s = \"%s\", expected \"%s\"\n", name, val, want[name] >> bad
			next
		}
		printf "%s %s\t%s\n", tag, name, val
	}' "$1"
}

fail=0
OCL_ICD_VENDORS="$tmp/native" clinfo --raw >"$tmp/native.raw" 2>&1 || { echo "FAIL: native clinfo"; fail=1; }
OCL_ICD_VENDORS="$tmp/clmux" clinfo --raw >"$tmp/clmux.raw" 2>&1 || { echo "FAIL: clmux clinfo"; fail=1; }
grep -q CL_DEVICE_NAME "$tmp/clmux.raw" || { echo "FAIL: clmux offers no device"; cat "$tmp/clmux.raw" "$tmp/clmuxd.log"; exit 1; }
normalise "$tmp/native.raw" native >"$tmp/native.n"
normalise "$tmp/clmux.raw" clmux >"$tmp/clmux.n"
if [ -s "$tmp/bad" ]; then cat "$tmp/bad"; fail=1; fi
if ! diff -u "$tmp/native.n" "$tmp/clmux.n" >"$tmp/raw.diff"; then
	echo "FAIL: clinfo --raw differs beyond the listed exceptions (- native, + clmux):"
	grep '^[-+][^-+]' "$tmp/raw.diff"
	fail=1
fi

# The NULL-platform section: only the platform's name and suffix may differ
# (a device's name may contain the platform's: Oclgrind's does).
null_section() {
	OCL_ICD_VENDORS="$1" clinfo 2>&1 | sed -n '/^NULL platform behavior/,/^$/p' |
		sed -e "/Device Name/!s/$2/PLATFORM/g" -e "s/\[$3\]/[SUFFIX]/g"
}
pname=$(sed -n 's/^  CL_PLATFORM_NAME  *//p' "$tmp/native.raw" | head -1)
psuf=$(sed -n 's/^  CL_PLATFORM_ICD_SUFFIX_KHR  *//p' "$tmp/native.raw" | head -1)
null_section "$tmp/native" "$pname" "$psuf" >"$tmp/native.null"
null_section "$tmp/clmux" clmux CLMUX >"$tmp/clmux.null"
if ! diff -u "$tmp/native.null" "$tmp/clmux.null" >"$tmp/null.diff"; then
	echo "FAIL: NULL platform behavior differs (- native, + clmux):"
	grep '^[-+][^-+]' "$tmp/null.diff"
	fail=1
fi
[ -s "$tmp/native.null" ] || { echo "FAIL: no NULL platform section from clinfo"; fail=1; }

if [ $fail = 0 ]; then
	echo "PASS: clinfo through clmux matches $(basename "$native") but for $(wc -l <"$tmp/exceptions") listed properties and $(wc -l <"$tmp/dropped") filtered items"
fi
exit $fail
