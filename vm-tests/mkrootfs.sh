#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds a container root filesystem from Debian packages (downloaded,
# unpacked, never installed): the C library, ocl-icd's loader, clinfo and
# busybox, plus the given programs. No clmux in it, and no OpenSSL or LZ4:
# the CDI spec (clmuxctl cdi generate) brings the ICD and what it needs.
#
#   vm-tests/mkrootfs.sh OUTDIR [PROGRAM...]
#
# OUTDIR/rootfs is the result (podman run --rootfs); OUTDIR/cache keeps the
# downloaded packages between runs. Programs land in /usr/local/bin; they
# may need only libc and libOpenCL.
set -eu
out=$1
shift
mkdir -p "$out/cache"
out=$(cd "$out" && pwd)
cache=$out/cache
PACKAGES="libc6 libgcc-s1 ocl-icd-libopencl1 clinfo busybox-static"

fetch() { # package -> its unpacked tree under $cache/$1
	[ -d "$cache/$1" ] && return 0
	(cd "$cache" && rm -f "$1"_*.deb && apt-get download "$1" >/dev/null 2>&1) ||
		{ echo "mkrootfs: apt-get download $1 failed" >&2; exit 1; }
	dpkg-deb -x "$cache/$1"_*.deb "$cache/$1.tmp"
	mv "$cache/$1.tmp" "$cache/$1"
}

root=$out/rootfs
rm -rf "$root"
mkdir -p "$root"
for p in $PACKAGES; do
	fetch "$p"
	cp -a "$cache/$p/." "$root/"
done
# Debian's merged /usr: /bin, /lib and /lib64 are links into /usr.
for d in bin sbin lib lib64; do
	if [ -d "$root/$d" ] && [ ! -L "$root/$d" ]; then
		mkdir -p "$root/usr/$d"
		cp -a "$root/$d/." "$root/usr/$d/"
		rm -rf "${root:?}/$d"
	fi
	mkdir -p "$root/usr/$d"
	ln -s "usr/$d" "$root/$d"
done
for t in sh ls cat find grep sleep kill ps true stat env; do
	ln -sf busybox "$root/usr/bin/$t"
done
mkdir -p "$root/usr/local/bin" "$root/etc/OpenCL/vendors" "$root/proc" "$root/sys" \
	"$root/dev" "$root/tmp" "$root/run"
for p in "$@"; do
	case $p in */.libs/*) ;; *) [ -x "$(dirname "$p")/.libs/$(basename "$p")" ] &&
		p=$(dirname "$p")/.libs/$(basename "$p") ;; esac
	cp -L "$p" "$root/usr/local/bin/"
done
echo "mkrootfs: $root ($(du -sk "$root" | cut -f1) KiB)"
