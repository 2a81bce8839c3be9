#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# cmxgen: turns the wire schema (schema/*.schema) into C codec tables, guest
# stubs and host dispatch shells, and guards the locked opcode list.
"""usage: cmxgen.py --schema DIR|FILE... --out-proto-h F --out-proto-c F
                  --out-guest-h F --out-host-h F --out-host-c F
                  [--lock schema/abi.lock [--update-lock]]
       cmxgen.py --check-lock schema/abi.lock --schema ...
"""
import argparse
import os
import re
import sys

KINDS = ["none", "platform", "device", "context", "queue", "mem", "program",
         "kernel", "event", "sampler"]

# OpenCL error codes the schema may name (their values are part of the
# OpenCL ABI and never change).
CL_ERRORS = {
    "CL_INVALID_VALUE": -30, "CL_INVALID_DEVICE": -33,
    "CL_INVALID_CONTEXT": -34, "CL_INVALID_COMMAND_QUEUE": -36,
    "CL_INVALID_MEM_OBJECT": -38, "CL_INVALID_SAMPLER": -41,
    "CL_INVALID_PROGRAM": -44, "CL_INVALID_KERNEL": -48,
    "CL_INVALID_EVENT_WAIT_LIST": -57, "CL_INVALID_EVENT": -58,
}

GEN_NOTE = "/* generated from schema/ by tools/cmxgen.py: do not edit */\n"


class Field:
    def __init__(self, direction, name, spec, opts, where):
        self.direction = direction
        self.name = name
        self.flags = []
        self.kind = "none"
        self.max = 0
        self.err = 0
        m = re.fullmatch(r"(u64|i64|bytes|str\??|u64\[\]|(new)?id(\?)?:(\w+)|id\[\]:(\w+))", spec)
        if not m:
            raise SyntaxError(f"{where}: bad type '{spec}'")
        if spec.startswith("newid"):
            self.type, self.kind = "NEWID", m.group(4)
            if m.group(3):
                self.flags.append("CMX_F_NULLOK")
        elif spec.startswith("id[]:"):
            self.type, self.kind = "IDS", m.group(5)
        elif spec.startswith("id"):
            self.type, self.kind = "ID", m.group(4)
            if m.group(3):
                self.flags.append("CMX_F_NULLOK")
        elif spec.startswith("str"):
            self.type = "STR"
            if spec.endswith("?"):
                self.flags.append("CMX_F_NULLOK")
        else:
            self.type = {"u64": "U64", "i64": "I64", "bytes": "BYTES",
                         "u64[]": "U64S"}[spec]
        if self.kind not in KINDS:
            raise SyntaxError(f"{where}: unknown handle kind '{self.kind}'")
        for o in opts:
            k, _, v = o.partition("=")
            if k == "max":
                self.max = int(v, 0)
            elif k == "err" and v in CL_ERRORS:
                self.err = CL_ERRORS[v]
            else:
                raise SyntaxError(f"{where}: bad option '{o}'")
        self.spec = spec

    def ctype(self):
        return {"U64": "uint64_t", "I64": "int64_t", "ID": "struct cmx_ref",
                "NEWID": "struct cmx_ref", "BYTES": "struct cmx_blob",
                "STR": "struct cmx_blob", "U64S": "struct cmx_u64s",
                "IDS": "struct cmx_refs"}[self.type]


class Call:
    def __init__(self, kind, op, name, mode, where):
        self.kind = kind          # "call" or "notify"
        self.op = op
        self.name = name
        self.mode = mode          # async | sync (notify: async)
        self.ins = []
        self.outs = []
        self.bulk_in = False
        self.bulk_out = False
        self.where = where

    def lock_line(self):
        ins = ",".join(f.spec for f in self.ins) or "-"
        outs = ",".join(f.spec for f in self.outs) or "-"
        bulk = ("I" if self.bulk_in else "") + ("O" if self.bulk_out else "") or "-"
        return f"0x{self.op:04x} {self.kind} {self.name} {self.mode} bulk={bulk} in={ins} out={outs}"


def parse(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".schema"))
        else:
            files.append(p)
    calls, byop, byname = [], {}, {}
    for path in files:
        cur = None
        with open(path, encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, 1):
                where = f"{os.path.basename(path)}:{lineno}"
                line = raw.split("#", 1)[0].strip()
                if not line:
                    continue
                words = line.split()
                if words[0] in ("call", "notify"):
                    if len(words) != 4 or words[3] not in ("async", "sync"):
                        raise SyntaxError(f"{where}: expected '{words[0]} OPCODE Name async|sync'")
                    op = int(words[1], 0)
                    if not 0x10 <= op < 0x8000:
                        raise SyntaxError(f"{where}: opcode out of range")
                    if op in byop or words[2] in byname:
                        raise SyntaxError(f"{where}: duplicate opcode or name")
                    cur = Call(words[0], op, words[2], words[3], where)
                    if cur.kind == "notify" and cur.mode != "async":
                        raise SyntaxError(f"{where}: notifications are async")
                    calls.append(cur)
                    byop[op] = byname[cur.name] = cur
                elif cur is None:
                    raise SyntaxError(f"{where}: field outside a call")
                elif words[0] == "bulk" and len(words) == 2 and words[1] in ("in", "out"):
                    setattr(cur, "bulk_" + words[1], True)
                elif words[0] in ("in", "out") and len(words) >= 3:
                    f = Field(words[0], words[1], words[2], words[3:], where)
                    (cur.ins if words[0] == "in" else cur.outs).append(f)
                else:
                    raise SyntaxError(f"{where}: cannot parse '{line}'")
    for c in calls:
        if c.mode == "async" and (c.outs or c.bulk_out):
            raise SyntaxError(f"{c.where}: async call {c.name} cannot have outputs")
        if any(f.type == "NEWID" for f in c.outs):
            raise SyntaxError(f"{c.where}: newid is an input")
    calls.sort(key=lambda c: c.op)
    return calls


def struct(name, fields):
    body = "".join(f"\t{f.ctype()} {f.name};\n" for f in fields) or "\tchar unused_;\n"
    return f"struct {name} {{\n{body}}};\n"


def fieldtab(cname, fields):
    if not fields:
        return f"#define cmx_fields_{cname} NULL\n"
    rows = []
    for f in fields:
        flags = "|".join(f.flags) or "0"
        rows.append(f'\t{{ "{f.name}", CMX_T_{f.type}, CMX_K_{f.kind.upper()}, {flags}, '
                    f"offsetof(struct {cname}, {f.name}), {f.max}, {f.err} }},\n")
    return f"static const struct cmx_field cmx_fields_{cname}[] = {{\n{''.join(rows)}}};\n"


def gen_proto_h(calls):
    out = [GEN_NOTE, "#ifndef CMX_PROTO_GEN_H\n#define CMX_PROTO_GEN_H\n\n",
           '#include "codec.h"\n#include "wire.h"\n\n', "enum cmx_op {\n",
           "\tCMX_OP_REPLY = 0x0001,\n"]
    out += [f"\tCMX_OP_{c.name} = 0x{c.op:04x},\n" for c in calls]
    out.append("};\n\n")
    out.append(f"#define CMX_OP_LIMIT 0x{(max(c.op for c in calls) + 1):04x}\n\n")
    for c in calls:
        out.append(struct(f"cmx_{c.name}_in", c.ins))
        if c.mode == "sync":
            out.append(struct(f"cmx_{c.name}_out", c.outs))
        out.append(f"extern const struct cmx_msgdesc cmx_desc_{c.name}_in;\n")
        if c.mode == "sync":
            out.append(f"extern const struct cmx_msgdesc cmx_desc_{c.name}_out;\n")
        out.append("\n")
    out.append("""#define CMX_OPF_SYNC 0x1u
#define CMX_OPF_BULK_IN 0x2u
#define CMX_OPF_BULK_OUT 0x4u
#define CMX_OPF_NOTIFY 0x8u

struct cmx_opinfo {
	const struct cmx_msgdesc *in;
	const struct cmx_msgdesc *out; /* sync calls */
	uint32_t flags;		       /* CMX_OPF_* */
};

/* Indexed by opcode; in == NULL for opcodes nobody defined. */
extern const struct cmx_opinfo cmx_ops[CMX_OP_LIMIT];

static inline const struct cmx_opinfo *cmx_op_info(unsigned op)
{
	return op < CMX_OP_LIMIT && cmx_ops[op].in ? &cmx_ops[op] : 0;
}

#endif
""")
    return "".join(out)


def gen_proto_c(calls):
    out = [GEN_NOTE, '#include "proto.gen.h"\n\n#include <stddef.h>\n\n']
    for c in calls:
        dirs = [("in", c.ins)] + ([("out", c.outs)] if c.mode == "sync" else [])
        for d, fields in dirs:
            cname = f"cmx_{c.name}_{d}"
            out.append(fieldtab(cname, fields))
            out.append(f"const struct cmx_msgdesc cmx_desc_{c.name}_{d} = {{ \"{c.name}\", "
                       f"0x{c.op:04x}, {len(fields)}, sizeof(struct {cname}), cmx_fields_{cname} }};\n\n")
    out.append("const struct cmx_opinfo cmx_ops[CMX_OP_LIMIT] = {\n")
    for c in calls:
        flags = []
        if c.mode == "sync":
            flags.append("CMX_OPF_SYNC")
        if c.bulk_in:
            flags.append("CMX_OPF_BULK_IN")
        if c.bulk_out:
            flags.append("CMX_OPF_BULK_OUT")
        if c.kind == "notify":
            flags.append("CMX_OPF_NOTIFY")
        outd = f"&cmx_desc_{c.name}_out" if c.mode == "sync" else "NULL"
        out.append(f"\t[CMX_OP_{c.name}] = {{ &cmx_desc_{c.name}_in, {outd}, "
                   f"{'|'.join(flags) or '0'} }},\n")
    out.append("};\n")
    return "".join(out)


def gen_guest_h(calls):
    """Typed senders: async calls are queued in the session's batch; sync calls
    flush the batch and wait for the reply."""
    out = [GEN_NOTE, "#ifndef CMX_STUBS_GEN_H\n#define CMX_STUBS_GEN_H\n\n",
           '#include "proto.gen.h"\n#include "session.h"\n\n']
    for c in calls:
        if c.kind == "notify":
            continue
        bulk = ", const void *bulk, uint64_t bulk_len" if c.bulk_in else ""
        bargs = "bulk, bulk_len" if c.bulk_in else "NULL, 0"
        if c.mode == "async":
            out.append(f"static inline int cmx_send_{c.name}(struct cmx_session *s, "
                       f"const struct cmx_{c.name}_in *in{bulk})\n{{\n"
                       f"\treturn cmx_session_send(s, &cmx_desc_{c.name}_in, in, {bargs});\n}}\n\n")
        else:
            dst = ", void *dst, uint64_t dst_len" if c.bulk_out else ""
            dargs = "dst, dst_len" if c.bulk_out else "NULL, 0"
            out.append(f"static inline int cmx_rpc_{c.name}(struct cmx_session *s, "
                       f"const struct cmx_{c.name}_in *in{bulk}, struct cmx_{c.name}_out *out, "
                       f"struct cmx_reply *r{dst})\n{{\n"
                       f"\treturn cmx_session_call(s, &cmx_desc_{c.name}_in, in, {bargs}, "
                       f"&cmx_desc_{c.name}_out, out, r, {dargs});\n}}\n\n")
    out.append("#endif\n")
    return "".join(out)


def gen_host_h(calls):
    out = [GEN_NOTE, "#ifndef CMX_HANDLERS_GEN_H\n#define CMX_HANDLERS_GEN_H\n\n",
           '#include "proto.gen.h"\n\nstruct cmx_call;\n\n',
           "/* One hand-written handler per call (host/exec_*.c). It returns a cl_int,\n"
           " * or CMX_DEFER when it will finish the call later with cmx_call_done(). */\n"]
    for c in calls:
        if c.kind == "notify":
            continue
        outp = f", struct cmx_{c.name}_out *out" if c.mode == "sync" else ""
        out.append(f"int cmx_h_{c.name}(struct cmx_call *c, struct cmx_{c.name}_in *in{outp});\n")
    out.append("\ntypedef int (*cmx_handler_fn)(struct cmx_call *c, void *in, void *out);\n"
               "extern const cmx_handler_fn cmx_handlers[CMX_OP_LIMIT];\n\n#endif\n")
    return "".join(out)


def gen_host_c(calls):
    out = [GEN_NOTE, '#include "handlers.gen.h"\n\n#include <stddef.h>\n\n']
    for c in calls:
        if c.kind == "notify":
            continue
        outa = ", out" if c.mode == "sync" else ""
        out.append(f"static int shell_{c.name}(struct cmx_call *c, void *in, void *out)\n{{\n"
                   f"\t(void)out;\n\treturn cmx_h_{c.name}(c, in{outa});\n}}\n\n")
    out.append("const cmx_handler_fn cmx_handlers[CMX_OP_LIMIT] = {\n")
    out += [f"\t[CMX_OP_{c.name}] = shell_{c.name},\n" for c in calls if c.kind != "notify"]
    out.append("};\n")
    return "".join(out)


def check_lock(calls, lockpath, update):
    """Opcodes and layouts are append-only: every locked line must still be
    generated exactly; new calls are appended with --update-lock."""
    have = {}
    if os.path.exists(lockpath):
        with open(lockpath, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line and not line.startswith("#"):
                    have[line.split()[0]] = line
    now = {c.lock_line().split()[0]: c.lock_line() for c in calls}
    bad = [f"locked: {v}\n   now: {now.get(k, '(removed)')}" for k, v in have.items() if now.get(k) != v]
    if bad:
        sys.stderr.write("cmxgen: the locked ABI changed (opcodes are append-only):\n" +
                         "\n".join(bad) + "\n")
        return 1
    new = [v for k, v in now.items() if k not in have]
    if new and not update:
        sys.stderr.write("cmxgen: calls missing from %s (run 'make update-abi-lock'):\n%s\n" %
                         (lockpath, "\n".join(new)))
        return 1
    if new:
        with open(lockpath, "a", encoding="utf-8") as fh:
            if not have:
                fh.write("# clmux wire ABI: append-only, checked by make check\n")
            fh.write("".join(v + "\n" for v in new))
    return 0


def write(path, text):
    # Write only on change, so a schema edit rebuilds only what it touches.
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            if fh.read() == text:
                return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--schema", nargs="+", required=True)
    for o in ("proto-h", "proto-c", "guest-h", "host-h", "host-c"):
        ap.add_argument("--out-" + o)
    ap.add_argument("--lock")
    ap.add_argument("--update-lock", action="store_true")
    a = ap.parse_args()
    try:
        calls = parse(a.schema)
    except (SyntaxError, ValueError) as e:
        sys.stderr.write(f"cmxgen: {e}\n")
        return 1
    if a.lock and check_lock(calls, a.lock, a.update_lock):
        return 1
    gens = {"proto_h": gen_proto_h, "proto_c": gen_proto_c, "guest_h": gen_guest_h,
            "host_h": gen_host_h, "host_c": gen_host_c}
    for key, fn in gens.items():
        path = getattr(a, "out_" + key)
        if path:
            write(path, fn(calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
