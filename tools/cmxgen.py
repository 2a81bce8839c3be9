#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# cmxgen: turns the wire schema (schema/*.schema) into C codec tables (calls
# and the records they carry), guest stubs and host dispatch shells, and
# guards the locked ABI.
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
         "kernel", "event", "sampler", "cmdbuf"]

# OpenCL error codes the schema may name (their values are part of the
# OpenCL ABI and never change).
CL_ERRORS = {
    "CL_INVALID_VALUE": -30, "CL_INVALID_DEVICE": -33,
    "CL_INVALID_CONTEXT": -34, "CL_INVALID_COMMAND_QUEUE": -36,
    "CL_INVALID_MEM_OBJECT": -38, "CL_INVALID_SAMPLER": -41,
    "CL_INVALID_PROGRAM": -44, "CL_INVALID_KERNEL": -48,
    "CL_INVALID_EVENT_WAIT_LIST": -57, "CL_INVALID_EVENT": -58,
}

# What a call does on the queue its queue= field names (enum cmx_queue_use).
QUEUE_USES = ["enqueue", "control", "finish"]

# Call attributes (CMX_OPF_*): holdable: the scheduler may hold the
# command back (a kernel launch); keepouts: a failed reply still carries its
# outputs; lane: a notification that travels on bulk lanes only, never on
# the notification channel.
CALL_ATTRS = {"holdable": "CMX_OPF_HOLDABLE", "keepouts": "CMX_OPF_KEEPOUTS",
              "lane": "CMX_OPF_LANE"}

# Kinds whose changes a checkpoint keeps (`changes`, host/record.c).
CHANGED_KINDS = ["context", "queue", "mem", "program", "kernel", "sampler"]

GEN_NOTE = "/* generated from schema/ by tools/cmxgen.py: do not edit */\n"


class Field:
    def __init__(self, direction, name, spec, opts, where):
        self.direction = direction
        self.name = name
        self.flags = []
        self.kind = "none"
        self.max = 0
        self.err = 0
        self.enum = None      # enum=NAME: the values a u64 may take
        self.queue = None     # queue=USE: the call's queue, and what it does there
        self.answer = None    # answer=Notify: the tag that notification answers
        self.attrs = []       # what abi.lock records beside the type
        self.rec = None       # rec[]:NAME: the record's name
        m = re.fullmatch(r"(u64|i64|bytes|str\??|u64\[\]|(new)?id(\?)?:(\w+)|id\[\]:(\w+)|"
                         r"rec\[\]:([A-Z]\w*))", spec)
        if not m:
            raise SyntaxError(f"{where}: bad type '{spec}'")
        if spec.startswith("rec[]:"):
            self.type, self.rec = "RECS", m.group(6)
        elif spec.startswith("newid"):
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
                if not 0 < self.max < 2**32:
                    raise SyntaxError(f"{where}: bad max '{v}'")
            elif k == "err" and v in CL_ERRORS:
                self.err = CL_ERRORS[v]
            elif k == "enum" and v and self.type == "U64":
                self.enum = v
                self.attrs.append(o)
            elif k == "queue" and v in QUEUE_USES and spec == "id:queue":
                self.queue = v
                self.attrs.append(o)
            elif k == "answer" and v and self.type == "U64":
                self.answer = v
                self.attrs.append(o)
            elif o == "poisoned" and self.type == "ID":
                self.flags.append("CMX_F_POISONED")
                self.attrs.append(o)
            elif o == "waitlist" and spec == "id[]:event":
                self.flags.append("CMX_F_WAITLIST")
                self.attrs.append(o)
            elif o == "peek" and spec == "id:event":
                self.flags.append("CMX_F_PEEK")
                self.attrs.append(o)
            # The daemon's own bookkeeping, nothing on the wire or that a
            # guest sees: not locked (docs/protocol.md, The ABI lock).
            elif o == "changes" and self.type == "ID" and self.kind in CHANGED_KINDS:
                self.flags.append("CMX_F_CHANGES")
            elif o == "slot" and self.type == "U64":
                self.flags.append("CMX_F_SLOT")
            else:
                raise SyntaxError(f"{where}: bad option '{o}' for {spec}")
        self.spec = spec

    def lock_spec(self):
        return "/".join([self.spec] + self.attrs)

    def ctype(self):
        if self.type == "RECS":
            return f"struct cmx_{self.rec}_array"
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
        self.bulk_area = False    # an async read whose data may land in the area
        self.bulk_rec = None      # bulk in NAME rec[]:R: the payload is records
        self.attrs = []
        self.where = where

    def lock_line(self):
        ins = ",".join(f.lock_spec() for f in self.ins) or "-"
        outs = ",".join(f.lock_spec() for f in self.outs) or "-"
        bulk = ("I" if self.bulk_in else "") + ("O" if self.bulk_out else "") + \
            ("A" if self.bulk_area else "") or "-"
        if self.bulk_rec:
            bulk += ":" + self.bulk_rec.spec
        mode = ",".join([self.mode] + self.attrs)
        return f"0x{self.op:04x} {self.kind} {self.name} {mode} bulk={bulk} in={ins} out={outs}"

    def can_sync(self):
        return self.mode in ("sync", "both")

    def can_async(self):
        return self.mode in ("async", "both")

    def field_with(self, pred):
        hits = [f for f in self.ins if pred(f)]
        if len(hits) > 1:
            raise SyntaxError(f"{self.where}: {self.name}: more than one such field")
        return hits[0] if hits else None


class Schema:
    def __init__(self):
        self.version = None       # the protocol version (`version N`)
        self.enums = {}
        self.records = {}         # in the order defined: a record names earlier ones
        self.calls = []


class Record:
    """A named list of typed fields, carried in rec[]:NAME arrays."""
    def __init__(self, name, where):
        self.name = name
        self.fields = []
        self.where = where

    def owns(self, sch):
        return any(f.type == "RECS" for f in self.fields)

    def lock_line(self):
        return f"record {self.name} " + ",".join(f"{f.name}={f.lock_spec()}" for f in self.fields)


class Enum:
    def __init__(self, name, where):
        self.name = name
        self.values = []          # (name, number)
        self.where = where

    def lock_line(self):
        return f"enum {self.name} " + ",".join(f"{n}={v}" for n, v in self.values)


def parse(paths):
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += sorted(os.path.join(p, f) for f in os.listdir(p) if f.endswith(".schema"))
        else:
            files.append(p)
    sch = Schema()
    calls, byop, byname, enums, records = sch.calls, {}, {}, sch.enums, sch.records
    for path in files:
        cur = None
        with open(path, encoding="utf-8") as fh:
            for lineno, raw in enumerate(fh, 1):
                where = f"{os.path.basename(path)}:{lineno}"
                line = raw.split("#", 1)[0].strip()
                if not line:
                    continue
                words = line.split()
                if words[0] == "version" and len(words) == 2:
                    if sch.version is not None:
                        raise SyntaxError(f"{where}: a second protocol version")
                    sch.version = int(words[1], 0)
                    cur = None
                elif words[0] == "enum" and len(words) == 2:
                    if words[1] in enums or not re.fullmatch(r"[a-z][a-z0-9_]*", words[1]):
                        raise SyntaxError(f"{where}: bad or duplicate enum '{words[1]}'")
                    cur = enums[words[1]] = Enum(words[1], where)
                elif words[0] == "record" and len(words) == 2 and not raw[0].isspace():
                    if words[1] in records or words[1] in byname or \
                            not re.fullmatch(r"[A-Z][A-Za-z0-9]*", words[1]):
                        raise SyntaxError(f"{where}: bad or duplicate record '{words[1]}'")
                    cur = records[words[1]] = Record(words[1], where)
                elif isinstance(cur, Record) and raw[0].isspace():
                    if len(words) < 2 or any(f.name == words[0] for f in cur.fields):
                        raise SyntaxError(f"{where}: expected 'NAME TYPE' in record {cur.name}")
                    f = Field("rec", words[0], words[1], words[2:], where)
                    if f.type not in ("U64", "I64", "BYTES", "STR", "U64S", "RECS") or \
                            f.attrs:
                        raise SyntaxError(f"{where}: a record holds no ids or attributes")
                    # Only an earlier record: no cycles, so decoding ends.
                    if f.rec and f.rec not in records:
                        raise SyntaxError(f"{where}: no record '{f.rec}' defined before")
                    cur.fields.append(f)
                elif words[0] in ("call", "notify") and not raw[0].isspace():
                    if len(words) < 4 or words[3] not in ("async", "sync", "both"):
                        raise SyntaxError(f"{where}: expected '{words[0]} OPCODE Name "
                                          "async|sync|both'")
                    op = int(words[1], 0)
                    if not 0x10 <= op < 0x8000:
                        raise SyntaxError(f"{where}: opcode out of range")
                    if op in byop or words[2] in byname or words[2] in records:
                        raise SyntaxError(f"{where}: duplicate opcode or name")
                    cur = Call(words[0], op, words[2], words[3], where)
                    if cur.kind == "notify" and cur.mode != "async":
                        raise SyntaxError(f"{where}: notifications are async")
                    for a in words[4:]:
                        if a not in CALL_ATTRS or a in cur.attrs or \
                                (a == "lane" and cur.kind != "notify"):
                            raise SyntaxError(f"{where}: bad call attribute '{a}'")
                        cur.attrs.append(a)
                    calls.append(cur)
                    byop[op] = byname[cur.name] = cur
                elif isinstance(cur, Enum) and raw[0].isspace():
                    if len(words) != 2 or not re.fullmatch(r"[a-z][a-z0-9_]*", words[0]) or \
                            words[0] in dict(cur.values):
                        raise SyntaxError(f"{where}: expected 'NAME NUMBER' in enum {cur.name}")
                    cur.values.append((words[0], int(words[1], 0)))
                elif cur is None or isinstance(cur, (Enum, Record)):
                    raise SyntaxError(f"{where}: field outside a call")
                elif words[0] == "bulk" and len(words) == 2 and words[1] in ("in", "out", "area"):
                    setattr(cur, "bulk_" + words[1], True)
                elif words[0] == "bulk" and len(words) >= 4 and words[1] == "in" and \
                        words[3].startswith("rec[]:"):
                    # A payload of records: encoded as an argument would be.
                    cur.bulk_in = True
                    cur.bulk_rec = Field("in", words[2], words[3], words[4:], where)
                elif words[0] in ("in", "out") and len(words) >= 3:
                    f = Field(words[0], words[1], words[2], words[3:], where)
                    (cur.ins if words[0] == "in" else cur.outs).append(f)
                else:
                    raise SyntaxError(f"{where}: cannot parse '{line}'")
    for r in records.values():
        if not r.fields:
            raise SyntaxError(f"{r.where}: record {r.name} has no fields")
    for c in calls:
        for f in c.ins + c.outs + ([c.bulk_rec] if c.bulk_rec else []):
            if f.rec and f.rec not in records:
                raise SyntaxError(f"{c.where}: {c.name}.{f.name}: no record '{f.rec}'")
            # A notification's decoder allocates nothing (guest/session.c).
            if f.rec and c.kind == "notify":
                raise SyntaxError(f"{c.where}: {c.name}: a notification carries no records")
        if c.mode == "async" and (c.outs or c.bulk_out):
            raise SyntaxError(f"{c.where}: async call {c.name} cannot have outputs")
        if any(f.type == "NEWID" for f in c.outs):
            raise SyntaxError(f"{c.where}: newid is an input")
        if c.bulk_area and (not c.can_async() or c.kind != "call"):
            raise SyntaxError(f"{c.where}: 'bulk area' is for async calls")
        for f in c.ins + c.outs:
            if f.enum and f.enum not in enums:
                raise SyntaxError(f"{c.where}: {c.name}.{f.name}: no enum '{f.enum}'")
            if (f.queue or f.answer or f.flags) and f.direction == "out":
                raise SyntaxError(f"{c.where}: {c.name}.{f.name}: attributes are for inputs")
            if f.spec == "id:queue" and f.direction == "in" and not f.queue:
                raise SyntaxError(f"{c.where}: {c.name}.{f.name}: an id:queue input says "
                                  "what the call does there (queue=" + "|".join(QUEUE_USES) + ")")
        changes = [f for f in c.ins if "CMX_F_CHANGES" in f.flags]
        if len(changes) > 1 or (changes and (c.kind != "call" or
                                             any(f.type == "NEWID" for f in c.ins))):
            raise SyntaxError(f"{c.where}: {c.name}: 'changes' marks the one object a call "
                              "makes no other of")
        if sum("CMX_F_SLOT" in f.flags for f in c.ins) > (1 if changes else 0):
            raise SyntaxError(f"{c.where}: {c.name}: 'slot' goes with one 'changes'")
        c.queue = c.field_with(lambda f: f.queue)
        c.tag = c.field_with(lambda f: f.answer)
        if c.tag:
            n = byname.get(c.tag.answer)
            # A failed call answers with (tag, status) and no payload.
            if not n or n.kind != "notify" or [(f.name, f.type) for f in n.ins] != \
                    [("tag", "U64"), ("status", "I64")]:
                raise SyntaxError(f"{c.where}: {c.name}: answer={c.tag.answer} is not a "
                                  "notification of (tag u64, status i64)")
    if sch.version is None:
        sch.version = 0
    calls.sort(key=lambda c: c.op)
    return sch


def struct(name, fields):
    body = "".join(f"\t{f.ctype()} {f.name};\n" for f in fields) or "\tchar unused_;\n"
    return f"struct {name} {{\n{body}}};\n"


def fieldtab(cname, fields):
    if not fields:
        return f"#define cmx_fields_{cname} NULL\n"
    rows = []
    for f in fields:
        flags = "|".join(f.flags) or "0"
        rec = f"&cmx_desc_{f.rec}" if f.rec else "NULL"
        rows.append(f'\t{{ "{f.name}", CMX_T_{f.type}, CMX_K_{f.kind.upper()}, {flags}, '
                    f"offsetof(struct {cname}, {f.name}), {f.max}, {f.err}, {rec} }},\n")
    return f"static const struct cmx_field cmx_fields_{cname}[] = {{\n{''.join(rows)}}};\n"


def msgdesc(dname, label, op, cname, fields):
    """The descriptor of a message's arguments or of a record."""
    owns = "CMX_D_OWNS" if any(f.type == "RECS" for f in fields) else "0"
    return (fieldtab(cname, fields) +
            f"const struct cmx_msgdesc cmx_desc_{dname} = {{ \"{label}\", 0x{op:04x}, "
            f"{len(fields)}, sizeof(struct {cname}), cmx_fields_{cname}, {owns} }};\n\n")


def gen_record_h(r):
    return (f"struct cmx_{r.name} {{\n" +
            "".join(f"\t{f.ctype()} {f.name};\n" for f in r.fields) + "};\n\n"
            f"/* rec[]:{r.name} in C structs: the typed twin of struct cmx_recs. */\n"
            f"struct cmx_{r.name}_array {{\n\tconst struct cmx_{r.name} *v;\n\tuint64_t n;\n}};\n"
            f"extern const struct cmx_msgdesc cmx_desc_{r.name};\n\n")


def gen_enum(e):
    up = e.name.upper()
    out = [f"enum cmx_{e.name} {{\n"]
    out += [f"\tCMX_{up}_{n.upper()} = {v},\n" for n, v in e.values]
    out.append("};\n\n")
    conds = " || ".join(f"v == {v}" for _, v in e.values)
    out.append(f"static inline int cmx_{e.name}_valid(uint64_t v)\n{{\n\treturn {conds};\n}}\n\n")
    return "".join(out)


def gen_proto_h(sch):
    calls = sch.calls
    out = [GEN_NOTE, "#ifndef CMX_PROTO_GEN_H\n#define CMX_PROTO_GEN_H\n\n",
           '#include "codec.h"\n#include "wire.h"\n\n']
    if sch.version:
        out.append(f"#define CMX_PROTO_VERSION {sch.version}u\n\n")
    out += [gen_enum(e) for e in sch.enums.values()]
    out += [gen_record_h(r) for r in sch.records.values()]
    out += ["enum cmx_op {\n", "\tCMX_OP_REPLY = 0x0001,\n"]
    out += [f"\tCMX_OP_{c.name} = 0x{c.op:04x},\n" for c in calls]
    out.append("};\n\n")
    out.append(f"#define CMX_OP_LIMIT 0x{(max(c.op for c in calls) + 1):04x}\n\n")
    for c in calls:
        out.append(struct(f"cmx_{c.name}_in", c.ins))
        if c.can_sync():
            out.append(struct(f"cmx_{c.name}_out", c.outs))
        out.append(f"extern const struct cmx_msgdesc cmx_desc_{c.name}_in;\n")
        if c.can_sync():
            out.append(f"extern const struct cmx_msgdesc cmx_desc_{c.name}_out;\n")
        if c.bulk_rec:
            out.append(f"/* The payload: cmx_codec_*(&cmx_desc_{c.name}_bulk, ...). */\n")
            out.append(struct(f"cmx_{c.name}_bulk", [c.bulk_rec]))
            out.append(f"extern const struct cmx_msgdesc cmx_desc_{c.name}_bulk;\n")
        out.append("\n")
    out.append("""#define CMX_OPF_SYNC 0x1u	/* may be sent sync (CMX_HDR_SYNC): it has a reply */
#define CMX_OPF_ASYNC 0x80u	/* may be sent async: no reply */
#define CMX_OPF_BULK_IN 0x2u
#define CMX_OPF_BULK_OUT 0x4u
#define CMX_OPF_NOTIFY 0x8u
#define CMX_OPF_BULK_AREA 0x10u /* an async read whose data may land in an area block */
#define CMX_OPF_HOLDABLE 0x20u	/* the scheduler may hold the command back */
#define CMX_OPF_KEEPOUTS 0x40u	/* a failed reply still carries the outputs */
#define CMX_OPF_LANE 0x100u	/* a notification of bulk lanes only */

/* What a call does on its queue (the field with the queue= attribute). */
enum cmx_queue_use {
	CMX_QUEUE_NONE,
	CMX_QUEUE_ENQUEUE, /* enqueues a command there */
	CMX_QUEUE_CONTROL, /* flushes, queries or releases it: no command */
	CMX_QUEUE_FINISH,  /* waits for every command on it: no command */
};

/* The notification that answers a failed call's tag (answer=), in place of
 * the data or the callback it promised. */
struct cmx_answer {
	uint64_t tag;
	int64_t status;
};

struct cmx_opinfo {
	const struct cmx_msgdesc *in;
	const struct cmx_msgdesc *out;	  /* sync calls */
	const struct cmx_msgdesc *answer; /* answers the tag when the call fails */
	uint32_t flags;			  /* CMX_OPF_* */
	int32_t queue;			  /* offset of the queue's struct cmx_ref in `in`; -1: none */
	int32_t tag;			  /* offset of the answered tag (a uint64_t); -1: none */
	uint8_t queue_use;		  /* enum cmx_queue_use */
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


def gen_proto_c(sch):
    calls = sch.calls
    out = [GEN_NOTE, '#include "proto.gen.h"\n\n#include <stddef.h>\n\n']
    for name in sorted({c.tag.answer for c in calls if c.tag}):
        out.append(f"_Static_assert(sizeof(struct cmx_{name}_in) == sizeof(struct cmx_answer) &&\n"
                   f"\t       offsetof(struct cmx_{name}_in, status) == "
                   f"offsetof(struct cmx_answer, status),\n\t       \"{name} answers a tag\");\n")
    out.append("\n")
    for r in sch.records.values():
        out.append(f"_Static_assert(sizeof(struct cmx_{r.name}_array) == sizeof(struct cmx_recs) &&\n"
                   f"\t       offsetof(struct cmx_{r.name}_array, n) == offsetof(struct cmx_recs, n),\n"
                   f"\t       \"{r.name}_array is a cmx_recs\");\n")
        out.append(msgdesc(r.name, r.name, 0, f"cmx_{r.name}", r.fields))
    for c in calls:
        dirs = [("in", c.ins)] + ([("out", c.outs)] if c.can_sync() else []) + \
            ([("bulk", [c.bulk_rec])] if c.bulk_rec else [])
        for d, fields in dirs:
            out.append(msgdesc(f"{c.name}_{d}", c.name, c.op, f"cmx_{c.name}_{d}", fields))
    out.append("const struct cmx_opinfo cmx_ops[CMX_OP_LIMIT] = {\n")
    for c in calls:
        flags = []
        if c.can_sync():
            flags.append("CMX_OPF_SYNC")
        if c.can_async():
            flags.append("CMX_OPF_ASYNC")
        if c.bulk_in:
            flags.append("CMX_OPF_BULK_IN")
        if c.bulk_out:
            flags.append("CMX_OPF_BULK_OUT")
        if c.kind == "notify":
            flags.append("CMX_OPF_NOTIFY")
        if c.bulk_area:
            flags.append("CMX_OPF_BULK_AREA")
        flags += [CALL_ATTRS[a] for a in c.attrs]
        outd = f"&cmx_desc_{c.name}_out" if c.can_sync() else "NULL"
        ans = f"&cmx_desc_{c.tag.answer}_in" if c.tag else "NULL"
        q = f"offsetof(struct cmx_{c.name}_in, {c.queue.name})" if c.queue else "-1"
        t = f"offsetof(struct cmx_{c.name}_in, {c.tag.name})" if c.tag else "-1"
        use = f"CMX_QUEUE_{c.queue.queue.upper()}" if c.queue else "CMX_QUEUE_NONE"
        out.append(f"\t[CMX_OP_{c.name}] = {{ &cmx_desc_{c.name}_in, {outd}, {ans},\n"
                   f"\t\t{'|'.join(flags) or '0'}, {q}, {t}, {use} }},\n")
    out.append("};\n")
    return "".join(out)


def gen_guest_h(sch):
    """Typed senders: async calls are queued in the session's batch; sync calls
    flush the batch and wait for the reply."""
    calls = sch.calls
    out = [GEN_NOTE, "#ifndef CMX_STUBS_GEN_H\n#define CMX_STUBS_GEN_H\n\n",
           '#include <errno.h>\n#include <stdlib.h>\n\n'
           '#include "proto.gen.h"\n#include "session.h"\n\n']
    chan = [c for c in calls if c.kind == "notify" and "lane" not in c.attrs]
    if chan:
        out.append("/* The guest's handler of each notification of the notification channel\n"
                   " * (guest/notify.c), on the session's notification thread; one with a\n"
                   " * payload first says where its len bytes land (NULL: dropped). */\n")
    for c in chan:
        if c.bulk_in:
            out.append(f"void *cmx_nbulk_{c.name}(const struct cmx_{c.name}_in *in, uint64_t len);\n")
        out.append(f"void cmx_n_{c.name}(const struct cmx_{c.name}_in *in);\n")
    if chan:
        out.append("\nstatic inline void *cmx_notify_bulk_dst(unsigned op, const void *in, "
                   "uint64_t len)\n{\n\tswitch (op) {\n")
        for c in chan:
            if c.bulk_in:
                out.append(f"\tcase CMX_OP_{c.name}:\n\t\treturn cmx_nbulk_{c.name}(in, len);\n")
        out.append("\tdefault:\n\t\treturn NULL;\n\t}\n}\n\n")
        out.append("/* 0, or -1 for an opcode that is no notification of the channel. */\n"
                   "static inline int cmx_notify_dispatch(unsigned op, const void *in)\n{\n"
                   "\tswitch (op) {\n")
        for c in chan:
            out.append(f"\tcase CMX_OP_{c.name}:\n\t\tcmx_n_{c.name}(in);\n\t\treturn 0;\n")
        out.append("\tdefault:\n\t\treturn -1;\n\t}\n}\n\n")
    for c in calls:
        if c.kind == "notify":
            continue
        if c.bulk_rec:
            # A payload of records: encoded here, sent as any payload.
            if c.can_sync():
                raise SyntaxError(f"{c.where}: a payload of records is for async calls")
            out.append(f"static inline int cmx_send_{c.name}(struct cmx_session *s, "
                       f"const struct cmx_{c.name}_in *in,\n\t\t\t\t"
                       f"const struct cmx_{c.name}_bulk *bulk)\n{{\n"
                       f"\tsize_t len = cmx_codec_size(&cmx_desc_{c.name}_bulk, bulk);\n"
                       f"\tuint8_t *p = malloc(len);\n\tint e;\n\n"
                       f"\tif (!p)\n\t\treturn -ENOMEM;\n"
                       f"\tcmx_codec_encode(&cmx_desc_{c.name}_bulk, bulk, p);\n"
                       f"\te = cmx_session_send(s, &cmx_desc_{c.name}_in, in, p, len);\n"
                       f"\tfree(p);\n\treturn e;\n}}\n\n")
            continue
        bulk = ", const void *bulk, uint64_t bulk_len" if c.bulk_in else ""
        bargs = "bulk, bulk_len" if c.bulk_in else "NULL, 0"
        if c.can_async():
            out.append(f"static inline int cmx_send_{c.name}(struct cmx_session *s, "
                       f"const struct cmx_{c.name}_in *in{bulk})\n{{\n"
                       f"\treturn cmx_session_send(s, &cmx_desc_{c.name}_in, in, {bargs});\n}}\n\n")
        if c.can_sync():
            dst = ", void *dst, uint64_t dst_len" if c.bulk_out else ""
            dargs = "dst, dst_len" if c.bulk_out else "NULL, 0"
            out.append(f"static inline int cmx_rpc_{c.name}(struct cmx_session *s, "
                       f"const struct cmx_{c.name}_in *in{bulk}, struct cmx_{c.name}_out *out, "
                       f"struct cmx_reply *r{dst})\n{{\n"
                       f"\treturn cmx_session_call(s, &cmx_desc_{c.name}_in, in, {bargs}, "
                       f"&cmx_desc_{c.name}_out, out, r, {dargs});\n}}\n\n")
    out.append("#endif\n")
    return "".join(out)


def gen_host_h(sch):
    calls = sch.calls
    out = [GEN_NOTE, "#ifndef CMX_HANDLERS_GEN_H\n#define CMX_HANDLERS_GEN_H\n\n",
           '#include "proto.gen.h"\n\nstruct cmx_call;\n\n',
           "/* One hand-written handler per call (host/exec_*.c). It returns a cl_int,\n"
           " * or CMX_DEFER when it will finish the call later with cmx_call_done().\n"
           " * A call that may be sent either way has out == NULL when sent async. */\n"]
    for c in calls:
        if c.kind == "notify":
            continue
        outp = f", struct cmx_{c.name}_out *out" if c.can_sync() else ""
        out.append(f"int cmx_h_{c.name}(struct cmx_call *c, struct cmx_{c.name}_in *in{outp});\n")
    out.append("\ntypedef int (*cmx_handler_fn)(struct cmx_call *c, void *in, void *out);\n"
               "extern const cmx_handler_fn cmx_handlers[CMX_OP_LIMIT];\n\n#endif\n")
    return "".join(out)


def gen_host_c(sch):
    calls = sch.calls
    out = [GEN_NOTE, '#include "handlers.gen.h"\n\n#include <stddef.h>\n\n']
    for c in calls:
        if c.kind == "notify":
            continue
        outa = ", out" if c.can_sync() else ""
        out.append(f"static int shell_{c.name}(struct cmx_call *c, void *in, void *out)\n{{\n"
                   f"\t(void)out;\n\treturn cmx_h_{c.name}(c, in{outa});\n}}\n\n")
    out.append("const cmx_handler_fn cmx_handlers[CMX_OP_LIMIT] = {\n")
    out += [f"\t[CMX_OP_{c.name}] = shell_{c.name},\n" for c in calls if c.kind != "notify"]
    out.append("};\n")
    return "".join(out)


def lock_entries(sch):
    lines = [e.lock_line() for e in sch.enums.values()] + \
        [r.lock_line() for r in sch.records.values()] + [c.lock_line() for c in sch.calls]
    return {lock_key(v): v for v in lines}


def lock_key(line):
    w = line.split()
    return w[0] + ":" + w[1] if w[0] in ("enum", "record") else w[0]


def check_lock(sch, lockpath, update):
    """Opcodes, enums and layouts are append-only within a protocol version:
    every locked line must still be generated exactly, and new ones are
    appended with --update-lock. A schema whose `version` is above the
    lock's may change anything: --update-lock then writes a fresh lock for
    that version."""
    have, locked_version = {}, 1
    if os.path.exists(lockpath):
        with open(lockpath, encoding="utf-8") as fh:
            for line in fh:
                line = line.strip()
                if line.startswith("version "):
                    locked_version = int(line.split()[1], 0)
                elif line and not line.startswith("#"):
                    have[lock_key(line)] = line
    now = lock_entries(sch)
    header = ("# clmux wire ABI: append-only within a protocol version, checked by make check\n"
              f"version {sch.version}\n")
    if sch.version < locked_version:
        sys.stderr.write(f"cmxgen: the schema's version {sch.version} is below the locked "
                         f"{locked_version}\n")
        return 1
    if sch.version > locked_version:
        if not update:
            sys.stderr.write(f"cmxgen: protocol version {sch.version} is not locked yet (the lock "
                             f"is of {locked_version}): run 'make update-abi-lock'\n")
            return 1
        with open(lockpath, "w", encoding="utf-8") as fh:
            fh.write(header + "".join(v + "\n" for v in now.values()))
        return 0
    bad = [f"locked: {v}\n   now: {now.get(k, '(removed)')}" for k, v in have.items() if now.get(k) != v]
    if bad:
        sys.stderr.write("cmxgen: the locked ABI changed; a change needs a new protocol "
                         "version (schema `version`):\n" + "\n".join(bad) + "\n")
        return 1
    new = [v for k, v in now.items() if k not in have]
    if new and not update:
        sys.stderr.write("cmxgen: calls missing from %s (run 'make update-abi-lock'):\n%s\n" %
                         (lockpath, "\n".join(new)))
        return 1
    if new:
        with open(lockpath, "a", encoding="utf-8") as fh:
            if not os.path.getsize(lockpath):
                fh.write(header)
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
        sch = parse(a.schema)
    except (SyntaxError, ValueError) as e:
        sys.stderr.write(f"cmxgen: {e}\n")
        return 1
    if a.lock and check_lock(sch, a.lock, a.update_lock):
        return 1
    gens = {"proto_h": gen_proto_h, "proto_c": gen_proto_c, "guest_h": gen_guest_h,
            "host_h": gen_host_h, "host_c": gen_host_c}
    for key, fn in gens.items():
        path = getattr(a, "out_" + key)
        if path:
            write(path, fn(sch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
