#!/bin/sh
# SPDX-License-Identifier: MIT
# Which modules (one .c file each) use which, from the built objects: a
# module uses another when its object leaves undefined a symbol the other's
# defines. Prints the circles (strongly connected components) of host/,
# guest/ and transport/ and the layers below them, and fails on a circle the
# allow-list (call-cycles.allow) does not name: each listed circle may stay
# or shrink, none may grow or appear.
#   call-cycles.sh                  check (run by make check in the build tree)
#   call-cycles.sh --why host A B   the symbols through which A uses B
#   call-cycles.sh --layers host    every module with its layer
#   call-cycles.sh --edges host     the uses inside each circle
set -eu
srcdir=${srcdir:-.}
exec "${PYTHON:-python3}" - "$srcdir" "${NM:-nm}" "$@" <<'PY'
import glob, os, subprocess, sys

top, nm, args = sys.argv[1], sys.argv[2], sys.argv[3:]

# Where each folder's objects are in the build tree, and the prefix
# Automake gives them: the daemon's, the ICD's (PIC objects under .libs
# when the library is shared) and the transport library's.
FOLDERS = {
    "host": ["host/clmuxd-*.o"],
    "guest": ["guest/.libs/libclmux_la-*.o", "guest/libclmux_la-*.o"],
    "transport": ["transport/.libs/libcmxtransport_la-*.o",
                  "transport/libcmxtransport_la-*.o"],
}


def objects(folder):
    for pat in FOLDERS[folder]:
        found = sorted(glob.glob(pat))
        if found:
            return found
    return []


def module(path):
    base = os.path.basename(path)[:-2]
    return base.split("-", 1)[1] if "-" in base else base


def graph(folder):
    """Module -> {module it uses: [symbols]}."""
    defs, undefs = {}, {}
    for o in objects(folder):
        m = module(o)
        out = subprocess.run([nm, "-P", "-g", o], check=True, text=True,
                             stdout=subprocess.PIPE).stdout
        d, u = defs.setdefault(m, set()), undefs.setdefault(m, set())
        for line in out.splitlines():
            f = line.split()
            if len(f) < 2:
                continue
            (u if f[1] in "Uw" else d).add(f[0])
    owner = {}
    for m, syms in defs.items():
        for s in syms:
            owner[s] = m
    edges = {m: {} for m in defs}
    for m, syms in undefs.items():
        for s in sorted(syms):
            o = owner.get(s)
            if o and o != m:
                edges[m].setdefault(o, []).append(s)
    return edges


def sccs(edges):
    """Tarjan's algorithm, iterative; components in reverse topological
    order (a component comes after every one it uses)."""
    index, low, on, stack, out, n = {}, {}, set(), [], [], [0]
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    out.append(sorted(comp))
    return out


def layers(edges, comps):
    """Layer of each component: 0 uses nothing of the folder, otherwise one
    above the highest it uses."""
    of = {m: i for i, c in enumerate(comps) for m in c}
    lay = {}
    for i, c in enumerate(comps):
        below = {of[w] for m in c for w in edges[m]} - {i}
        lay[i] = 1 + max((lay[j] for j in below), default=-1)
    return of, lay


def allowed():
    path = os.path.join(top, "tools/tests/call-cycles.allow")
    out = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                folder = line[0].rstrip(":")
                out.setdefault(folder, []).append(set(line[1:]))
    return out


if args and args[0] == "--why":
    folder, a, b = args[1:4]
    for s in graph(folder)[a].get(b, []):
        print(s)
    sys.exit(0)

if args and args[0] == "--layers":
    edges = graph(args[1])
    comps = sccs(edges)
    of, lay = layers(edges, comps)
    for i in sorted(lay, key=lambda i: (lay[i], comps[i])):
        print("%d: %s" % (lay[i], " ".join(comps[i])))
    sys.exit(0)

def inside(edges, c):
    for m in c:
        for w in sorted(edges[m]):
            if w in c:
                print("    %s -> %s (%s)" % (m, w, ", ".join(edges[m][w][:3])))


if args and args[0] == "--edges":
    edges = graph(args[1])
    for c in sccs(edges):
        if len(c) > 1:
            print("circle of %d: %s" % (len(c), " ".join(c)))
            inside(edges, c)
    sys.exit(0)

allow, bad = allowed(), 0
for folder in FOLDERS:
    fail = 0
    edges = graph(folder)
    if not edges:
        print("SKIP: %s: no objects in %s" % (folder, os.getcwd()))
        continue
    comps = sccs(edges)
    of, lay = layers(edges, comps)
    circles = [c for c in comps if len(c) > 1]
    for c in circles:
        ok = any(set(c) <= a for a in allow.get(folder, []))
        print("%s: %s: circle of %d: %s" % ("ok" if ok else "FAIL", folder,
                                           len(c), " ".join(c)))
        if not ok:
            fail = bad = 1
            # The uses inside the circle, so the one that closed it shows.
            inside(edges, c)
    for a in allow.get(folder, []):
        if not any(set(c) <= a for c in circles) or \
                len(a) > sum(len(c) for c in circles if set(c) <= a):
            print("note: %s: the allowed circle %s is larger than what is "
                  "left: shrink call-cycles.allow" % (folder, " ".join(sorted(a))))
    print("%s: %s: %d modules, %d layers, %d circles (largest %d)" % (
        "FAIL" if fail else "PASS", folder, len(edges), 1 + max(lay.values()),
        len(circles), max((len(c) for c in circles), default=1)))
sys.exit(bad)
PY
