#!/bin/sh
# SPDX-License-Identifier: MIT
# Real applications through clmux next to native: clpeak (global memory
# and transfer bandwidth, kernel launch latency) and hashcat's benchmark
# of one hash type (-b -m 0, MD5). Each must complete through clmux; the
# figures are printed side by side with their ratio to native. Not in
# tools/check (about 3 minutes on 2 cores): `make bench-apps`, or
#   OCL_ICD_VENDORS=build/icd CLMUXD=build/host/clmuxd tools/compat-apps.sh
# Exit 0: both complete on both sides; 1: one did not; 77: neither tool
# is installed (apt-get install clpeak hashcat).
#
# CMX_APPS_DEVICE=oclgrind runs them on Oclgrind (natively, and clmuxd with
# --device oclgrind): clpeak's transfer bandwidth and kernel latency only
# (its first global-bandwidth kernel did not finish in 7 minutes natively:
# Oclgrind simulates every work-item), and no hashcat: natively and
# through clmux alike it stops at "Not enough allocatable device memory"
# (Oclgrind's 128 MiB device leaves hashcat 64 MiB, no more than the room
# it keeps spare; docs/compatibility.md).
set -u
command -v clpeak >/dev/null 2>&1 || command -v hashcat >/dev/null 2>&1 ||
	{ echo "SKIP: neither clpeak nor hashcat installed"; exit 77; }
clpeak_args="--global-bandwidth --transfer-bandwidth --kernel-latency"
hashcat=hashcat vendors=""
if [ "${CMX_APPS_DEVICE:-}" = oclgrind ]; then
	rt=${OCLGRIND_ICD:-/usr/lib/oclgrind/liboclgrind-rt-icd.so}
	[ -f "$rt" ] || { echo "SKIP: Oclgrind not installed ($rt)"; exit 77; }
	vendors=$(mktemp -d)
	echo "$rt" >"$vendors/oclgrind.icd"
	cp "${OCL_ICD_VENDORS:-icd}/clmux.icd" "$vendors/"
	export OCL_ICD_VENDORS="$vendors" CMX_COMPAT_DAEMON_ARGS="--device oclgrind"
	clpeak_args="--transfer-bandwidth --kernel-latency"
	hashcat=no-hashcat-on-oclgrind
fi
. "${srcdir:-$(dirname "$0")/..}/tools/tests/compat-env.sh"
[ -n "$vendors" ] && rm -rf "$vendors"
export CLMUX_SERVER="unix:$tmp/s.sock"
fail=0

# side VENDORS OUT COMMAND...: runs it, 0 when it completed.
side() {
	v=$1 out=$2
	shift 2
	(cd "$tmp" && HOME="$tmp/home" OCL_ICD_VENDORS="$v" timeout 600 "$@") >"$out" 2>&1
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
		side "$tmp/$s" "$tmp/clpeak.$s" clpeak $clpeak_args ||
			{ echo "FAIL: clpeak ($s)"; tail -5 "$tmp/clpeak.$s"; fail=1; }
		clpeak_figures "$tmp/clpeak.$s" | sort >"$tmp/clpeak.$s.n"
	done
	echo "clpeak (GBPS; latency in us)          native        clmux  ratio"
	compare "$tmp/clpeak.native.n" "$tmp/clpeak.clmux.n"
fi
if command -v $hashcat >/dev/null 2>&1; then
	for s in native clmux; do
		side "$tmp/$s" "$tmp/hashcat.$s" hashcat -b -m 0 --force -D 1,2 --quiet ||
			{ echo "FAIL: hashcat ($s)"; tail -5 "$tmp/hashcat.$s"; fail=1; }
		sed -n 's/^Speed\.#1\.*: *\([0-9.]*\) \([kMG]*H\/s\).*/MD5_\2 \1/p' "$tmp/hashcat.$s" >"$tmp/hashcat.$s.n"
		[ -s "$tmp/hashcat.$s.n" ] || { echo "FAIL: hashcat ($s) gave no speed"; fail=1; }
	done
	echo "hashcat -b -m 0                       native        clmux  ratio"
	compare "$tmp/hashcat.native.n" "$tmp/hashcat.clmux.n"
fi
apps="clpeak and hashcat"
[ "$hashcat" = hashcat ] || apps=clpeak
[ $fail = 0 ] && echo "PASS: $apps: completed through clmux ($device)"
exit $fail
