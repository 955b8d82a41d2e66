#!/usr/bin/env python3
"""Generates src/commands/redis_defs.rs from Redis's command definitions.

Usage: tools/gen_command_defs.py REDIS_SOURCE_DIR [OUTPUT]

Reads REDIS_SOURCE_DIR/src/commands/*.json, the files redis-server
compiles into its commands.c (utils/generate-command-code.py), and writes
one Rust data module holding, for every command and subcommand, what
COMMAND INFO and COMMAND DOCS report: flags, ACL categories, tips, key
specs, the legacy (first, last, step) key range, and the docs. Each field
is derived as redis-server derives it at startup:

- ACL categories: the JSON's, plus the implicit ones of
  `setImplicitACLCategories` (write, read, admin+dangerous, pubsub, fast,
  blocking, slow when not fast), listed in `ACLCommandCategories` order.
- The `movablekeys` flag and the legacy key range: as
  `populateCommandLegacyRangeSpec` computes them from the key specs.
- The group: as `COMMAND_GROUP_STR` spells it (`sorted-set`).
- Argument names lowercased, tokens uppercased, tips lowercased; an empty
  or missing string field is not listed.

Standard library only, so that it runs wherever Python 3 does.
"""

import glob
import json
import os
import re
import sys

# Redis command flag (JSON spelling) -> keylock's `table::flag` constant.
FLAGS = {
    "WRITE": "WRITE",
    "READONLY": "READONLY",
    "DENYOOM": "DENYOOM",
    "ADMIN": "ADMIN",
    "PUBSUB": "PUBSUB",
    "NOSCRIPT": "NOSCRIPT",
    "BLOCKING": "BLOCKING",
    "LOADING": "LOADING",
    "STALE": "STALE",
    "SKIP_MONITOR": "SKIP_MONITOR",
    "SKIP_SLOWLOG": "SKIP_SLOWLOG",
    "ASKING": "ASKING",
    "FAST": "FAST",
    "NO_AUTH": "NO_AUTH",
    "MAY_REPLICATE": "MAY_REPLICATE",
    "SENTINEL": "SENTINEL",
    "ONLY_SENTINEL": "ONLY_SENTINEL",
    "NO_MANDATORY_KEYS": "NO_MANDATORY_KEYS",
    "PROTECTED": "PROTECTED",
    "NO_ASYNC_LOADING": "NO_ASYNC_LOADING",
    "NO_MULTI": "NO_MULTI",
    "ALLOW_BUSY": "ALLOW_BUSY",
    "TOUCHES_ARBITRARY_KEYS": "TOUCHES_ARBITRARY_KEYS",
}

# acl.c's ACLCommandCategories, in order.
ACL_ORDER = [
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
    "bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
    "blocking", "dangerous", "connection", "transaction", "scripting",
]

KEY_FLAGS = ["RO", "RW", "OW", "RM", "ACCESS", "UPDATE", "INSERT", "DELETE",
             "NOT_KEY", "INCOMPLETE", "VARIABLE_FLAGS"]

ARG_KINDS = {
    "string": "String",
    "integer": "Integer",
    "double": "Double",
    "key": "Key",
    "pattern": "Pattern",
    "unix-time": "UnixTime",
    "pure-token": "PureToken",
    "oneof": "OneOf",
    "block": "Block",
}

DOC_FLAGS = ["deprecated", "syscmd"]  # addReplyDocFlagsForCommand's order


def rust_str(s):
    """A Rust string literal holding `s` (empty for None)."""
    if s is None:
        s = ""
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return '"%s"' % s


def opt(desc, field, upper=False):
    """A string field as generate-command-code.py reads it: a missing or
    empty one is not listed (NULL there, "" here)."""
    v = desc.get(field)
    if not v:
        return ""
    return v.upper() if upper else v


def acl_categories(desc):
    cats = {c.lower() for c in desc.get("acl_categories", [])}
    flags = set(desc.get("command_flags", []))
    if "WRITE" in flags:
        cats.add("write")
    if "READONLY" in flags and "scripting" not in cats:
        cats.add("read")
    if "ADMIN" in flags:
        cats |= {"admin", "dangerous"}
    if "PUBSUB" in flags:
        cats.add("pubsub")
    if "FAST" in flags:
        cats.add("fast")
    if "BLOCKING" in flags:
        cats.add("blocking")
    if "fast" not in cats:
        cats.add("slow")
    unknown = cats - set(ACL_ORDER)
    assert not unknown, unknown
    return ["@" + c for c in ACL_ORDER if c in cats]


def legacy_range(specs):
    """populateCommandLegacyRangeSpec: ((first, last, step), movablekeys)."""
    if not specs:
        return (0, 0, 0), False

    def kind(spec):
        bs = "index" if spec["begin_search"].get("index") else "other"
        fk = "range" if spec["find_keys"].get("range") else "other"
        return bs, fk

    def u32(v):
        return v & 0xFFFFFFFF

    def s32(v):
        return v - (1 << 32) if v >= (1 << 31) else v

    if len(specs) == 1 and kind(specs[0]) == ("index", "range"):
        s = specs[0]
        first = s["begin_search"]["index"]["pos"]
        rng = s["find_keys"]["range"]
        last = rng["lastkey"]
        if last >= 0:
            last += first
        return (first, last, rng["step"]), "INCOMPLETE" in s.get("flags", [])

    movable = False
    first, last, prev_last = None, 0, 0
    for s in specs:
        if kind(s) != ("index", "range"):
            movable = True
            continue
        pos = s["begin_search"]["index"]["pos"]
        rng = s["find_keys"]["range"]
        if rng["step"] != 1 or (prev_last and prev_last != pos - 1):
            movable = True
            continue
        if "INCOMPLETE" in s.get("flags", []):
            movable = True
        first = pos if first is None else min(first, pos)
        abs_last = rng["lastkey"]
        if abs_last >= 0:
            abs_last += pos
        last = s32(max(u32(last), u32(abs_last)))
        prev_last = last
    if first is None:
        return (0, 0, 0), True
    # COMMAND INFO prints lastkey absolute when it is not negative.
    return (first, last, 1), movable


def key_spec_code(spec):
    flags = spec.get("flags", [])
    for f in flags:
        assert f in KEY_FLAGS, f
    flag_code = " | ".join("key_flag::" + f for f in KEY_FLAGS if f in flags) or "0"
    bs = spec["begin_search"]
    if bs.get("index"):
        bs_code = "BeginSearch::Index(%d)" % bs["index"]["pos"]
    elif bs.get("keyword"):
        bs_code = "BeginSearch::Keyword { keyword: %s, startfrom: %d }" % (
            rust_str(bs["keyword"]["keyword"]), bs["keyword"]["startfrom"])
    elif "unknown" in bs:
        bs_code = "BeginSearch::Unknown"
    else:
        raise ValueError("begin_search %r" % bs)
    fk = spec["find_keys"]
    if fk.get("range"):
        r = fk["range"]
        fk_code = "FindKeys::Range { lastkey: %d, keystep: %d, limit: %d }" % (r["lastkey"], r["step"], r["limit"])
    elif fk.get("keynum"):
        k = fk["keynum"]
        fk_code = "FindKeys::Keynum { keynumidx: %d, firstkey: %d, keystep: %d }" % (
            k["keynumidx"], k["firstkey"], k["step"])
    elif "unknown" in fk:
        fk_code = "FindKeys::Unknown"
    else:
        raise ValueError("find_keys %r" % fk)
    return "KeySpec { notes: %s, flags: %s, begin_search: %s, find_keys: %s }" % (
        rust_str(opt(spec, "notes")), flag_code, bs_code, fk_code)


def args_code(args, indent):
    if not args:
        return "&[]"
    pad = " " * indent
    out = ["&["]
    for a in args:
        flags = []
        if a.get("optional"):
            flags.append("arg_flag::OPTIONAL")
        if a.get("multiple"):
            flags.append("arg_flag::MULTIPLE")
        if a.get("multiple_token"):
            flags.append("arg_flag::MULTIPLE_TOKEN")
        sub = args_code(a.get("arguments", []), indent + 4) if a["type"] in ("oneof", "block") else "&[]"
        out.append(
            "%s    Arg { name: %s, kind: ArgKind::%s, key_spec_index: %d, token: %s, since: %s, "
            "deprecated_since: %s, flags: %s, args: %s },"
            % (pad, rust_str(a["name"].lower()), ARG_KINDS[a["type"]], a.get("key_spec_index", -1),
               rust_str(opt(a, "token", upper=True)), rust_str(opt(a, "since")),
               rust_str(opt(a, "deprecated_since")), " | ".join(flags) or "0", sub))
    out.append(pad + "]")
    return "\n".join(out)


def command_code(full_name, desc, group):
    flags = desc.get("command_flags", [])
    for f in flags:
        assert f in FLAGS, (full_name, f)
    specs = desc.get("key_specs", [])
    (first, last, step), movable = legacy_range(specs)
    flag_names = [FLAGS[f] for f in flags]
    if movable:
        flag_names.append("MOVABLE_KEYS")
    doc_flags = [d.lower() for d in desc.get("doc_flags", [])]
    for d in doc_flags:
        assert d in DOC_FLAGS, d
    lines = [
        "    CommandDef {",
        "        name: %s," % rust_str(full_name),
        "        summary: %s," % rust_str(opt(desc, "summary")),
        "        since: %s," % rust_str(opt(desc, "since")),
        "        group: %s," % rust_str(group.replace("_", "-")),
        "        complexity: %s," % rust_str(opt(desc, "complexity")),
        "        doc_flags: &[%s]," % ", ".join(rust_str(d) for d in DOC_FLAGS if d in doc_flags),
        "        deprecated_since: %s," % rust_str(opt(desc, "deprecated_since")),
        "        replaced_by: %s," % rust_str(opt(desc, "replaced_by")),
        "        history: &[%s]," % ", ".join("(%s, %s)" % (rust_str(v), rust_str(c)) for v, c in desc.get("history") or []),
        "        tips: &[%s]," % ", ".join(rust_str(t.lower()) for t in desc.get("command_tips") or []),
        "        arity: %d," % desc["arity"],
        "        flags: %s," % (" | ".join("flag::" + f for f in flag_names) or "0"),
        "        acl_categories: &[%s]," % ", ".join(rust_str(c) for c in acl_categories(desc)),
        "        legacy_keys: (%d, %d, %d)," % (first, last, step),
        "        key_specs: &[%s\n        ]," % "".join("\n            %s," % key_spec_code(s) for s in specs),
        "        getkeys_proc: %s," % ("true" if desc.get("get_keys_function") else "false"),
        "        arguments: %s," % args_code(desc.get("arguments", []), 8),
        "    },",
    ]
    # An empty key-spec list is printed on one line.
    if not specs:
        lines[15] = "        key_specs: &[],"
    return "\n".join(lines)


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    out_path = sys.argv[2] if len(sys.argv) == 3 else os.path.join(here, "..", "src", "commands", "redis_defs.rs")
    with open(os.path.join(src, "src", "version.h")) as f:
        version = re.search(r'REDIS_VERSION "([^"]+)"', f.read()).group(1)

    commands, subcommands = {}, {}
    for path in sorted(glob.glob(os.path.join(src, "src", "commands", "*.json"))):
        with open(path) as f:
            for name, desc in json.load(f).items():
                if desc.get("container"):
                    subcommands.setdefault(desc["container"].lower(), {})[name.lower()] = desc
                else:
                    commands[name.lower()] = desc
    defs = []
    for name, desc in commands.items():
        defs.append((name, desc, desc["group"]))
        for sub, sdesc in subcommands.get(name, {}).items():
            defs.append(("%s|%s" % (name, sub), sdesc, desc["group"]))
    defs.sort(key=lambda d: d[0].encode())

    body = "\n".join(command_code(*d) for d in defs)
    text = """//! Redis {version}'s command definitions: for every command and
//! subcommand, what COMMAND INFO and COMMAND DOCS report (flags, ACL
//! categories, tips, key specs, docs).
//!
//! GENERATED by `tools/gen_command_defs.py` from Redis {version}'s
//! `src/commands/*.json`; do not edit by hand, run
//! `python3 tools/gen_command_defs.py /path/to/redis-{version}` instead.

use super::defs::CommandDef;
use super::table::{{Arg, ArgKind, BeginSearch, FindKeys, KeySpec, arg_flag, flag, key_flag}};

/// The Redis version these definitions come from.
pub const REDIS_VERSION: &str = "{version}";

/// Every command and subcommand (`container|sub`), sorted by full name.
pub static DEFS: &[CommandDef] = &[
{body}
];
""".format(version=version, body=body)
    with open(out_path, "w") as f:
        f.write(text)
    print("wrote %d definitions to %s" % (len(defs), out_path))


if __name__ == "__main__":
    main()
