#!/bin/sh
# SPDX-License-Identifier: MIT
# No include circles among the headers of a folder (host/, guest/ and
# transport/ when none is named): a header includes only headers below it,
# so each can be read, and changed, knowing what it stands on. Prints each
# circle found and fails.
set -eu
srcdir=${srcdir:-.}
[ $# -gt 0 ] || set -- host guest transport
exec "${PYTHON:-python3}" - "$srcdir" "$@" <<'PY'
import os, re, sys

top, dirs = sys.argv[1], sys.argv[2:]
inc = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
bad = 0
for d in dirs:
    path = os.path.join(top, d)
    heads = sorted(f for f in os.listdir(path) if f.endswith(".h"))
    edges = {}
    for h in heads:
        with open(os.path.join(path, h)) as f:
            edges[h] = [i for i in inc.findall(f.read()) if i in heads and i != h]
    # Depth-first, colouring: a header reached again while still on the
    # stack closes a circle.
    state, stack, seen = {}, [], set()

    def visit(h):
        global bad
        state[h] = 1
        stack.append(h)
        for n in edges[h]:
            if state.get(n) == 1:
                ring = stack[stack.index(n):] + [n]
                key = frozenset(ring)
                if key not in seen:
                    seen.add(key)
                    print("FAIL: %s: %s" % (d, " -> ".join(ring)))
                    bad = 1
            elif not state.get(n):
                visit(n)
        stack.pop()
        state[h] = 2

    for h in heads:
        if not state.get(h):
            visit(h)
    if not seen:
        print("PASS: no include circle among %s/*.h (%d headers)" % (d, len(heads)))
sys.exit(bad)
PY
