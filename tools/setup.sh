#!/bin/sh
# SPDX-License-Identifier: MIT
# Shared by tools/demo and tools/check: installs what is missing (Debian
# packages), then configures and builds clmux in ./build.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
PACKAGES="build-essential autoconf automake libtool pkg-config python3 opencl-headers
ocl-icd-opencl-dev ocl-icd-libopencl1 liburing-dev check pocl-opencl-icd clinfo clang
libclang-rt-14-dev python3-pyopencl python3-numpy oclgrind piglit
qemu-system-x86 xz-utils libssl-dev liblz4-dev openssl clpeak hashcat
libjson-c-dev libvirt-dev libxml2-dev libvirt-daemon-system libvirt-clients podman runc python3-matplotlib
debhelper lintian systemd"

missing=""
for p in $PACKAGES; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "setup: installing:$missing"
	sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

cd "$top"
[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi >/dev/null 2>&1
mkdir -p build
cd build
[ -f Makefile ] || ../configure --enable-werror ${CLMUX_CONFIGURE_FLAGS:-} >/dev/null
make -j"$(nproc)" >/dev/null
make -j"$(nproc)" icd/clmux.icd >/dev/null
echo "setup: built in $top/build"
