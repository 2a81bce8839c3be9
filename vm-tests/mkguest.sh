#!/bin/sh
# SPDX-License-Identifier: MIT
# Builds a QEMU guest from Debian packages (downloaded, unpacked, never
# installed): an uncompressed vmlinux for PVH boot and a busybox initramfs
# holding the virtio/vsock modules, clmux's guest package (ICD_DEB,
# clmux-opencl-icd, unpacked as dpkg would install it: the ICD, its vendor
# file, /etc/clmux/client.conf), ocl-icd's loader and the given programs,
# each with its shared libraries.
#
#   vm-tests/mkguest.sh OUTDIR ICD_DEB [PROGRAM...]
#
# OUTDIR/vmlinux and OUTDIR/initrd.img are the result; OUTDIR/cache keeps
# the downloaded packages between runs. Programs land in /bin of the guest.
set -eu
out=$1
icd_deb=$2
shift 2
[ -f "$icd_deb" ] || { echo "mkguest: no guest package $icd_deb (make debs builds it)" >&2; exit 1; }
mkdir -p "$out/cache"
out=$(cd "$out" && pwd)
cache=$out/cache

# Modules the guest needs for a vsock device, in load order.
MODULES="drivers/virtio/virtio_ring drivers/virtio/virtio drivers/virtio/virtio_pci_modern_dev
drivers/virtio/virtio_pci_legacy_dev drivers/virtio/virtio_pci net/vmw_vsock/vsock
net/vmw_vsock/vmw_vsock_virtio_transport_common net/vmw_vsock/vmw_vsock_virtio_transport"

fetch() { # package -> its unpacked tree under $cache/$1
	[ -d "$cache/$1" ] && return 0
	(cd "$cache" && rm -f "$1"_*.deb && apt-get download "$1" >/dev/null 2>&1) ||
		{ echo "mkguest: apt-get download $1 failed" >&2; exit 1; }
	dpkg-deb -x "$cache/$1"_*.deb "$cache/$1.tmp"
	mv "$cache/$1.tmp" "$cache/$1"
}

# The kernel: the metapackage names the image package.
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null | sed -n 's/.*Depends: \(linux-image-[0-9].*\)/\1/p' | head -n1)
[ -n "$kpkg" ] || { echo "mkguest: cannot resolve linux-image-amd64" >&2; exit 1; }
fetch "$kpkg"
fetch busybox-static
kdir=$cache/$kpkg
kver=${kpkg#linux-image-}
busybox=$cache/busybox-static/bin/busybox

# vmlinuz is a bzImage around an xz stream: PVH boots the ELF inside, which
# saves the in-guest decompression (~3 s under TCG).
if [ ! -s "$out/vmlinux" ] || [ "$out/vmlinux" -ot "$kdir/boot/vmlinuz-$kver" ]; then
	off=$(LC_ALL=C grep -abo "$(printf '\3757zXZ')" "$kdir/boot/vmlinuz-$kver" | head -n1 | cut -d: -f1)
	[ -n "$off" ] || { echo "mkguest: no xz stream in vmlinuz-$kver" >&2; exit 1; }
	tail -c +$((off + 1)) "$kdir/boot/vmlinuz-$kver" | xz -dc --single-stream >"$out/vmlinux.tmp"
	mv "$out/vmlinux.tmp" "$out/vmlinux"
fi

root=$out/root
rm -rf "$root"
mkdir -p "$root/bin" "$root/lib/modules" "$root/proc" "$root/sys" "$root/dev" "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for m in $MODULES; do
	cp "$kdir/lib/modules/$kver/kernel/$m.ko" "$root/lib/modules/"
	echo "${m##*/}" >>"$root/lib/modules/order"
done

# Copies a file with its ldd closure, keeping library paths as on the host.
closure() {
	ldd "$1" 2>/dev/null | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p' |
		while read -r lib; do
			[ -e "$root$lib" ] && continue
			mkdir -p "$root$(dirname "$lib")"
			cp -L "$lib" "$root$lib"
		done
}
# The guest package as dpkg lays it out; the loader opens the library its
# vendor file names.
dpkg-deb -x "$icd_deb" "$root"
for f in "$root"/etc/OpenCL/vendors/*.icd; do
	lib=$(cat "$f")
	[ -e "$root$lib" ] || { echo "mkguest: $f names $lib, which $icd_deb lacks" >&2; exit 1; }
	closure "$root$lib"
done
# ocl-icd's loader at its host path, in the guest's default library path.
ocl=$(ldconfig -p | sed -n 's/.*libOpenCL.so.1 (libc6,x86-64) => //p' | head -n1)
mkdir -p "$root$(dirname "$ocl")"
cp -L "$ocl" "$root$ocl"
closure "$ocl"
for p in "$@"; do
	case $p in */.libs/*) ;; *) [ -x "$(dirname "$p")/.libs/$(basename "$p")" ] &&
		p=$(dirname "$p")/.libs/$(basename "$p") ;; esac
	cp -L "$p" "$root/bin/"
	closure "$p"
done

cp "$(dirname "$0")/init" "$root/init"
chmod 755 "$root/init"
(cd "$root" && find . | "$busybox" cpio -o -H newc 2>/dev/null) >"$out/initrd.img"
echo "mkguest: $out/vmlinux $out/initrd.img ($(du -k "$out/initrd.img" | cut -f1) KiB)"
