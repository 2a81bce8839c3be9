#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds the three .debs (debian/) once per build tree (make debs):
# dpkg-buildpackage -us -uc -b in the make dist tree, the .debs, .changes
# and .buildinfo into OUTDIR. vm-check's guests and package-check take
# them from there.
#
#   packaging/debs.sh OUTDIR      (from the build directory; make sets
#                                  PACKAGE_VERSION)
#
# A second run with the same make dist tree (every file's content the
# same) keeps OUTDIR as it is: dpkg-buildpackage is a full configure and
# build (minutes on CI's 2 cores).
set -eu
out=$1
: "${PACKAGE_VERSION:?}"
for c in dpkg-buildpackage dh sha256sum; do
	command -v $c >/dev/null || {
		echo "debs: no $c: vm-check's guests and package-check install the packages (tools/setup.sh installs debhelper and dpkg-dev)" >&2
		exit 1
	}
done
mkdir -p "$out"
out=$(cd "$out" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clmux-debs-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
v=$PACKAGE_VERSION
arch=$(dpkg --print-architecture)

# What the packages are built from: the make dist tree, by content.
make distdir distdir="$tmp/clmux-$v" >/dev/null
sum=$(cd "$tmp/clmux-$v" && find . -type f | LC_ALL=C sort | xargs -d '\n' sha256sum | sha256sum | cut -d' ' -f1)
if [ "$(cat "$out/sources.sha256" 2>/dev/null)" = "$sum" ] &&
	[ -e "$out/clmux_${v}_$arch.changes" ]; then
	echo "debs: $out is up to date (clmux $v)"
	exit 0
fi

echo "debs: dpkg-buildpackage -us -uc -b in the make dist tree of clmux $v"
(cd "$tmp/clmux-$v" && DEB_BUILD_OPTIONS="parallel=$(nproc) nocheck" \
	dpkg-buildpackage -us -uc -b >"$tmp/build.log" 2>&1) || {
	tail -40 "$tmp/build.log"
	cp "$tmp/build.log" "$out/build.log"
	exit 1
}
rm -f "$out"/*.deb "$out"/*.changes "$out"/*.buildinfo "$out/sources.sha256"
mv "$tmp"/*.deb "$tmp"/*.changes "$tmp"/*.buildinfo "$out/"
mv "$tmp/build.log" "$out/build.log"
echo "$sum" >"$out/sources.sha256"
ls "$out"/*.deb
