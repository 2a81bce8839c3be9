#!/bin/sh
# SPDX-License-Identifier: MIT
# The generator: golden outputs, schema errors refused, and the ABI lock
# failing when a locked opcode or layout changes.
set -u
srcdir=${srcdir:-.}
gen="${PYTHON:-python3} $srcdir/tools/cmxgen.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok - $1"; }
bad() { echo "not ok - $1"; fail=1; }

$gen --schema "$srcdir/tools/tests/golden.schema" --out-proto-h "$tmp/proto.gen.h" \
	--out-proto-c "$tmp/proto.gen.c" --out-guest-h "$tmp/stubs.gen.h" \
	--out-host-h "$tmp/handlers.gen.h" --out-host-c "$tmp/handlers.gen.c" || bad "generator ran"
for f in proto.gen.h proto.gen.c stubs.gen.h handlers.gen.h handlers.gen.c; do
	if cmp -s "$tmp/$f" "$srcdir/tools/tests/golden/$f.expected"; then ok "golden $f"
	else diff -u "$srcdir/tools/tests/golden/$f.expected" "$tmp/$f" | head -40; bad "golden $f"; fi
done

# Malformed schemas are refused with a message naming the line.
printf 'call 0x0030 A async\n  in x u65\n' >"$tmp/bad1.schema"
printf 'call 0x0030 A async\ncall 0x0030 B async\n' >"$tmp/bad2.schema"
printf 'call 0x0030 A async\n  out x u64\n' >"$tmp/bad3.schema"
printf 'call 0x0030 A sync\n  in x id:gizmo\n' >"$tmp/bad4.schema"
# Attributes: a queue that does not say what the call does there, an
# answer that is no (tag, status) notification, an unknown enum, poisoned
# on a number.
printf 'call 0x0030 A async\n  in q id:queue\n' >"$tmp/bad5.schema"
printf 'call 0x0030 A async\n  in t u64 answer=B\nnotify 0x0800 B async\n  in t u64\n' >"$tmp/bad6.schema"
printf 'call 0x0030 A async\n  in k u64 enum=nope\n' >"$tmp/bad7.schema"
printf 'call 0x0030 A async\n  in k u64 poisoned\n' >"$tmp/bad8.schema"
# Records: one naming a record defined after it (no cycles), one holding
# an id, one empty, and a call naming no record.
printf 'record A\n  b rec[]:B\nrecord B\n  x u64\n' >"$tmp/bad9.schema"
printf 'record A\n  q id:queue\n' >"$tmp/bad10.schema"
printf 'record A\ncall 0x0030 B async\n  in x u64\n' >"$tmp/bad11.schema"
printf 'call 0x0030 A sync\n  out x rec[]:Nope\n' >"$tmp/bad12.schema"
printf 'record R\n  x u64\nnotify 0x0800 N async\n  in r rec[]:R\n' >"$tmp/bad13.schema"
# changes: on a number, twice in a call, beside a newid; slot without it.
printf 'call 0x0030 A async\n  in k u64 changes\n' >"$tmp/bad14.schema"
printf 'call 0x0030 A async\n  in k id:kernel changes\n  in p id:program changes\n' >"$tmp/bad15.schema"
printf 'call 0x0030 A async\n  in n newid:kernel\n  in k id:kernel changes\n' >"$tmp/bad16.schema"
printf 'call 0x0030 A async\n  in k id:kernel\n  in i u64 slot\n' >"$tmp/bad17.schema"
for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17; do
	if $gen --schema "$tmp/bad$i.schema" 2>"$tmp/err" ; then bad "bad schema $i refused"
	elif grep -q "bad$i.schema:" "$tmp/err"; then ok "bad schema $i refused"
	else bad "bad schema $i names its line"; fi
done

# The real schema matches its lock.
if $gen --schema "$srcdir"/schema/*.schema --lock "$srcdir/schema/abi.lock"; then ok "abi.lock matches"
else bad "abi.lock matches"; fi
# A changed layout, a renumbered opcode and a removed call all fail it.
# So do a dropped attribute, a call attribute and a renumbered enum value.
for edit in 's/^  in  offset    u64$/  in  offset    i64/' 's/^call 0x0318 CopyBuffer/call 0x0398 CopyBuffer/' \
	'/^call 0x031a FillBuffer/,/^$/d' 's/^  in  mem       id:mem  poisoned$/  in  mem       id:mem/' \
	's/^  bulk area$//' 's/^  local   2$/  local   5/' 's/^  access    u64$/  access    i64/' \
	's/^  out info      rec\[\]:DeviceInfo/  out info      bytes/'; do
	mkdir -p "$tmp/s"; rm -f "$tmp"/s/*
	cp "$srcdir"/schema/*.schema "$tmp/s/"
	sed -i "$edit" "$tmp"/s/*.schema
	cp "$srcdir/schema/abi.lock" "$tmp/lock"
	if $gen --schema "$tmp"/s/*.schema --lock "$tmp/lock" 2>/dev/null; then bad "lock catches: $edit"
	else ok "lock catches: $edit"; fi
done
# changes and slot are the daemon's bookkeeping, nothing a guest sees: not
# locked.
rm -f "$tmp"/s/*
cp "$srcdir"/schema/*.schema "$tmp/s/"
sed -i 's/  changes$//; s/  slot$//' "$tmp"/s/*.schema
if $gen --schema "$tmp"/s/*.schema --lock "$srcdir/schema/abi.lock"; then ok "changes not locked"
else bad "changes not locked"; fi
# An appended call is refused until the lock is updated, then accepted.
cp "$srcdir"/schema/*.schema "$tmp/s/"
printf 'call 0x7f00 Appended async\n  in x u64\n' >>"$tmp/s/session.schema"
cp "$srcdir/schema/abi.lock" "$tmp/lock"
if $gen --schema "$tmp"/s/*.schema --lock "$tmp/lock" 2>/dev/null; then bad "new call needs --update-lock"
else ok "new call needs --update-lock"; fi
if $gen --schema "$tmp"/s/*.schema --lock "$tmp/lock" --update-lock &&
   $gen --schema "$tmp"/s/*.schema --lock "$tmp/lock"; then ok "appended call locked"
else bad "appended call locked"; fi
# A locked line changes only with a new protocol version, whose lock
# `make update-abi-lock` then writes afresh.
sed -i 's/^  in  offset    u64$/  in  offset    i64/' "$tmp/s/mem.schema"
version=$(sed -n 's/^version //p' "$srcdir/schema/session.schema")
sed -i "s/^version $version\$/version $((version + 1))/" "$tmp/s/session.schema"
cp "$srcdir/schema/abi.lock" "$tmp/lock"
if $gen --schema "$tmp"/s/*.schema --lock "$tmp/lock" 2>/dev/null; then bad "new version needs --update-lock"
else ok "new version needs --update-lock"; fi
if $gen --schema "$tmp"/s/*.schema --lock "$tmp/lock" --update-lock &&
   $gen --schema "$tmp"/s/*.schema --lock "$tmp/lock" &&
   grep -qx "version $((version + 1))" "$tmp/lock"; then ok "new version locked afresh"
else bad "new version locked afresh"; fi
exit $fail
