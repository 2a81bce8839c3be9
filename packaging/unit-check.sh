#!/bin/sh
# SPDX-License-Identifier: MIT
# clmuxd.service as make install writes it passes `systemd-analyze verify`
# (its ExecStart and ExecStartPre pointed at this build's clmuxd, which is
# not installed yet).
# 77 (skip) where systemd-analyze is missing.
set -eu
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze"; exit 77; }
b=$(pwd) # the build tree: tests run at its top
unit=$b/packaging/clmuxd.service
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -q '^Type=notify$' "$unit"
sbin=$(sed -n 's|^ExecStart=\(/[^ ]*\)/clmuxd .*|\1|p' "$unit")
[ -n "$sbin" ]
sed -e "s|^ExecStart=$sbin/clmuxd|ExecStart=$b/host/clmuxd|" \
	-e "s|^ExecStartPre=$sbin/clmuxd|ExecStartPre=$b/host/clmuxd|" "$unit" >"$tmp/clmuxd.service"
# verify prints its findings and fails on an error (an unknown key, a
# missing executable); warnings are findings too: none is expected.
systemd-analyze verify --man=no "$tmp/clmuxd.service" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
if [ -s "$tmp/out" ]; then cat "$tmp/out"; exit 1; fi
systemd-analyze security --offline=yes "$tmp/clmuxd.service" 2>/dev/null | tail -1 || true
echo "PASS: clmuxd.service verifies"
