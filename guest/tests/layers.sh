#!/bin/sh
# SPDX-License-Identifier: MIT
# The ICD's files in layers, bottom first: each may use (call, or name) only
# what the files below it define, so no two call each other, however
# indirectly. A new file takes its place in LAYERS. Reads the objects of
# libclmux in the build tree (make check runs it there).
set -eu
LAYERS="env copy area ivshmem tls dial lane session timer
	object context track queue event command
	mapping mem transfer rect notify icd image map
	include program kernel cmdbuf dispatch"
# The dispatch table each object points to (cl_khr_icd): named from below
# as data, never called.
EXEMPT="cmx_dispatch"

dir=guest/.libs
[ -d "$dir" ] || dir=guest
objs=""
rc=0
for l in $LAYERS; do
	objs="$objs $dir/libclmux_la-$l.o"
	[ -f "$dir/libclmux_la-$l.o" ] || { echo "FAIL: no guest/$l.c in libclmux"; rc=1; }
done
for o in "$dir"/libclmux_la-*.o; do
	case " $(echo $objs) " in
	*" $o "*) ;;
	*) echo "FAIL: $o is in no layer (guest/tests/layers.sh)"; rc=1 ;;
	esac
done
{
	nm -A -g --defined-only $objs | sed 's/^/D /'
	nm -A -u $objs | sed 's/^/U /'
} | awk -v layers="$(echo $LAYERS)" -v exempt="$EXEMPT" '
BEGIN {
	n = split(layers, l, " ")
	for (i = 1; i <= n; i++)
		rank[l[i]] = i
	split(exempt, e, " ")
	for (i in e)
		ex[e[i]] = 1
}
{
	f = $2
	sub(/:.*/, "", f)
	sub(/.*libclmux_la-/, "", f)
	sub(/\.o$/, "", f)
	if ($1 == "D")
		def[$NF] = f
	else
		use[++nu] = f " " $NF
}
END {
	bad = 0
	for (i = 1; i <= nu; i++) {
		split(use[i], u, " ")
		d = def[u[2]]
		if (d == "" || (u[2] in ex))
			continue
		if (rank[d] >= rank[u[1]]) {
			printf "FAIL: guest/%s.c uses %s of guest/%s.c, which is not below it\n", u[1], u[2], d
			bad = 1
		}
	}
	exit bad
}' || rc=1
[ $rc = 0 ] && echo "PASS: every file of guest/ uses only the layers below it"
exit $rc
