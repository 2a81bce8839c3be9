#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Reads `strace -f` logs of clmuxd and lists the system calls each kind of
# process made (front end, worker, build pre-flight), after the worker's
# sandbox was in place where the log shows that moment.
#
# usage: seccomp-trace.py [--after-filter] [--allowlist FILE] LOG...
#   --after-filter  count a worker's calls only once its filter is loaded
#                   (the seccomp(2) call that installs it), not its set-up
#   --allowlist F   names one per line (clmuxd --sandbox-list): also print
#                   what the logs show that F lacks
import re
import sys

LINE = re.compile(r"^(\d+)\s+(?:<\.\.\. (\w+) resumed>|(\w+)\()(.*)$")


def role_of_exec(args):
    if "--worker" in args:
        return "worker"
    if "--build-check" in args:
        return "buildcheck"
    m = re.match(r'"([^"]*)"', args)
    path = m.group(1) if m else "?"
    if path.endswith("clmuxd") or path.endswith("clmuxd.real"):
        return "front"
    return "exec:" + path


def scan(path, after_filter, counts, details):
    role = {}  # pid (thread id) -> role
    proc = {}  # tid -> tgid-ish key (the process it belongs to)
    filtered = set()  # process keys whose filter is in place
    first = None
    pending = {}  # tid -> (name, args) of an unfinished call
    with open(path, errors="replace") as f:
        for raw in f:
            m = LINE.match(raw)
            if not m:
                continue
            tid = int(m.group(1))
            if first is None:
                first = tid
                role[tid] = "front"
                proc[tid] = tid
            name = m.group(2) or m.group(3)
            rest = m.group(4)
            if m.group(3) and rest.endswith("<unfinished ...>"):
                pending[tid] = (name, rest)
                continue
            if m.group(2):
                name0, args0 = pending.pop(tid, (name, ""))
                rest = args0.replace("<unfinished ...>", "") + rest
            r = role.get(tid, "front")
            key = proc.get(tid, tid)
            ret = rest.rsplit("= ", 1)[-1].split()[0] if "= " in rest else "?"
            if name == "execve" and ret == "0":
                # A filter outlives exec: the linker PoCL runs, a build
                # child, keep the worker's.
                r = role_of_exec(rest)
                role[tid] = r
            if name in ("clone", "clone3", "fork", "vfork") and ret.isdigit():
                child = int(ret)
                role[child] = r
                thread = "CLONE_THREAD" in rest
                proc[child] = key if thread else child
                if key in filtered:
                    filtered.add(proc[child])
            if name == "seccomp" and "SECCOMP_SET_MODE_FILTER" in rest and ret == "0":
                filtered.add(key)
                continue
            if after_filter and r != "front" and key not in filtered:
                continue
            counts.setdefault(r, {}).setdefault(name, 0)
            counts[r][name] += 1
            d = details.setdefault(r, {}).setdefault(name, set())
            if name in ("socket", "prctl", "ioctl", "fcntl", "clone", "mmap", "mprotect",
                        "madvise", "setsockopt", "getsockopt", "sched_setaffinity", "kill",
                        "tgkill", "futex", "openat", "execve", "personality",
                        "rt_sigaction"):
                first_arg = rest.split(", ")
                if name in ("openat",):
                    d.add(first_arg[1][:60] if len(first_arg) > 1 else rest[:60])
                elif name == "mmap" or name == "mprotect":
                    d.add(first_arg[2] if len(first_arg) > 2 else "")
                elif name in ("fcntl", "setsockopt", "getsockopt", "ioctl"):
                    d.add(", ".join(first_arg[1:3])[:60])
                elif name == "clone":
                    fl = re.search(r"flags=([A-Z_|0-9x]+)", rest)
                    d.add(fl.group(1) if fl else "?")
                else:
                    d.add(first_arg[0][:60])


def main(argv):
    after = False
    allow = None
    logs = []
    it = iter(argv)
    for a in it:
        if a == "--after-filter":
            after = True
        elif a == "--allowlist":
            allow = set(x.strip() for x in open(next(it)) if x.strip())
        else:
            logs.append(a)
    counts, details = {}, {}
    for p in logs:
        scan(p, after, counts, details)
    for r in sorted(counts):
        names = sorted(counts[r])
        print("== %s: %d system calls" % (r, len(names)))
        for n in names:
            d = details.get(r, {}).get(n)
            extra = ""
            if d:
                extra = "  [" + "; ".join(sorted(d)[:8]) + (" ..." if len(d) > 8 else "") + "]"
            print("  %-24s %9d%s" % (n, counts[r][n], extra))
    if allow is not None:
        missing = sorted(set(n for r in counts if r != "front" for n in counts[r]) - allow)
        print("== used under the filter, not in the allowlist: %s" %
              (" ".join(missing) if missing else "none"))
        return 1 if missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
