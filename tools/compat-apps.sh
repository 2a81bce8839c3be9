#!/bin/sh
# SPDX-License-Identifier: MIT
# Real applications through clmux next to native: clpeak (global memory
# and transfer bandwidth, kernel launch latency) and hashcat's benchmark
# of one hash type (-b -m 0, MD5). Each runs natively and through clmux;
# the figures are printed side by side with their ratio to native. What
# must hold is parity of the outcome: an application that completes
# natively completes through clmux, one that stops natively stops through
# clmux with the same exit status and the same last words. Figures are
# printed, never asserted (timing here is the machine's load). `make
# check-apps` (in tools/check, about 3 minutes on 2 cores), or
#   OCL_ICD_VENDORS=build/icd CLMUXD=build/host/clmuxd tools/compat-apps.sh
# Exit 0: the outcomes match; 1: they differ; 77: neither tool is
# installed (apt-get install clpeak hashcat).
#
# CMX_APPS_DEVICE=oclgrind runs them on Oclgrind (natively, and clmuxd with
# --device oclgrind): clpeak's transfer bandwidth and kernel latency only
# (its first global-bandwidth kernel did not finish in 7 minutes natively:
# Oclgrind simulates every work-item), and hashcat, which natively and
# through clmux alike stops at "Not enough allocatable device memory"
# (Oclgrind's 128 MiB device leaves hashcat 64 MiB, no more than the room
# it keeps spare; docs/compatibility.md).
set -u
command -v clpeak >/dev/null 2>&1 || command -v hashcat >/dev/null 2>&1 ||
	{ echo "SKIP: neither clpeak nor hashcat installed"; exit 77; }
clpeak_args="--global-bandwidth --transfer-bandwidth --kernel-latency"
vendors=""
if [ "${CMX_APPS_DEVICE:-}" = oclgrind ]; then
	rt=${OCLGRIND_ICD:-/usr/lib/oclgrind/liboclgrind-rt-icd.so}
	[ -f "$rt" ] || { echo "SKIP: Oclgrind not installed ($rt)"; exit 77; }
	vendors=$(mktemp -d)
	echo "$rt" >"$vendors/oclgrind.icd"
	cp "${OCL_ICD_VENDORS:-icd}/clmux.icd" "$vendors/"
	export OCL_ICD_VENDORS="$vendors" CMX_COMPAT_DAEMON_ARGS="--device oclgrind"
	clpeak_args="--transfer-bandwidth --kernel-latency"
fi
. "${srcdir:-$(dirname "$0")/..}/tools/tests/compat-env.sh"
[ -n "$vendors" ] && rm -rf "$vendors"
export CLMUX_SERVER="unix:$tmp/s.sock"
fail=0

# side VENDORS OUT COMMAND...: runs it; OUT.end says how it ended
# ("completed", or the exit status and the last line it printed).
side() {
	v=$1 out=$2
	shift 2
	(cd "$tmp" && HOME="$tmp/home" OCL_ICD_VENDORS="$v" timeout 600 "$@") >"$out" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		echo completed >"$out.end"
	else
		echo "exit $rc: $(grep -a -v '^ *$' "$out" | tail -1)" >"$out.end"
	fi
}

# same APP: the native and clmux runs of APP ended alike (fail=1 if not).
same() {
	if cmp -s "$tmp/$1.native.end" "$tmp/$1.clmux.end"; then
		echo "$1: native and clmux alike: $(cat "$tmp/$1.native.end")"
	else
		echo "FAIL: $1: native $(cat "$tmp/$1.native.end"); clmux $(cat "$tmp/$1.clmux.end")"
		tail -5 "$tmp/$1.clmux"
		fail=1
	fi
}

# "name value" lines from clpeak's report.
clpeak_figures() {
	awk -F: '/:/ && $2 ~ /^ *[0-9.]+/ && $1 !~ /Clock|Compute units|Driver/ { n = $1; gsub(/^ +| +$/, "", n); gsub(/ +/, "_", n);
		v = $2; sub(/^ +/, "", v); sub(/ .*/, "", v); print n, v }' "$1"
}

compare() {
	join "$1" "$2" | awk '{ printf "  %-36s %12s %12s  %5.2f\n", $1, $2, $3, ($2 > 0 ? $3 / $2 : 0) }'
}

mkdir -p "$tmp/home"
if command -v clpeak >/dev/null 2>&1; then
	for s in native clmux; do
		# shellcheck disable=SC2086 # clpeak_args: words
		side "$tmp/$s" "$tmp/clpeak.$s" clpeak $clpeak_args
		clpeak_figures "$tmp/clpeak.$s" | sort >"$tmp/clpeak.$s.n"
	done
	same clpeak
	echo "clpeak (GBPS; latency in us)          native        clmux  ratio"
	compare "$tmp/clpeak.native.n" "$tmp/clpeak.clmux.n"
fi
if command -v hashcat >/dev/null 2>&1; then
	for s in native clmux; do
		side "$tmp/$s" "$tmp/hashcat.$s" hashcat -b -m 0 --force -D 1,2 --quiet
		sed -n 's/^Speed\.#1\.*: *\([0-9.]*\) \([kMG]*H\/s\).*/MD5_\2 \1/p' "$tmp/hashcat.$s" >"$tmp/hashcat.$s.n"
		# Completing without a speed is not completing.
		[ -s "$tmp/hashcat.$s.n" ] || [ "$(cat "$tmp/hashcat.$s.end")" != completed ] ||
			echo "exit 0 without a speed" >"$tmp/hashcat.$s.end"
	done
	same hashcat
	echo "hashcat -b -m 0                       native        clmux  ratio"
	compare "$tmp/hashcat.native.n" "$tmp/hashcat.clmux.n"
fi
[ $fail = 0 ] && echo "PASS: clpeak and hashcat end through clmux as natively ($device)"
exit $fail
