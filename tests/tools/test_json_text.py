#!/usr/bin/env python3
"""The JSON the Python side writes (rbpeeklib.commands.base.json_text: the
documents of threads, locks, frame, heap, sample, allocs and the command
line's several processes) against the core's one JSON writer
(core/src/base/json.c), so that every command writes one style:

  same      for each document, json_text's output is byte for byte what
            the C writer gives for the same document in the commands'
            style (RBP_JSON_INDENT1), driven call by call through
            json_writer_ops: every kind of value, empty and nested
            containers, every escape (controls, DEL, quotes), non-ASCII
            kept as UTF-8, and strings of random bytes (decoded as the
            binding would with surrogateescape, the C writer given the
            bytes themselves: each byte that is not UTF-8 is \\ufffd)
  strict    each output is read by the integration tests' strict parser
            (harness.strict_json: UTF-8 decoded strictly, no lone
            surrogate) and gives the document back

usage: test_json_text.py JSON_WRITER_OPS
Exit status: 0 pass, 1 fail.
"""
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import harness  # noqa: E402
from rbpeeklib.commands.base import json_text  # noqa: E402


def c_bytes(s):
    """A string's bytes as the core holds them: surrogateescape gives back
    the bytes that were not UTF-8."""
    return s.encode("utf-8", "surrogateescape")


def calls(v, out):
    """The writer calls that build v, as json_writer_ops reads them."""
    if isinstance(v, dict):
        out.append("{")
        for k, x in v.items():
            out.append("k " + c_bytes(k).hex())
            calls(x, out)
        out.append("}")
    elif isinstance(v, (list, tuple)):
        out.append("[")
        for x in v:
            calls(x, out)
        out.append("]")
    elif isinstance(v, str):
        out.append("s " + c_bytes(v).hex())
    elif v is True or v is False:
        out.append("t" if v else "F")
    elif v is None:
        out.append("z")
    elif isinstance(v, int):
        out.append(("u %d" if v >= 0 else "i %d") % v)
    elif isinstance(v, float):
        out.append("f " + repr(v))   # a float as the caller formats it: Python's repr, as json does
    else:
        raise TypeError("no JSON for %r" % (v,))
    return out


def read_back(v):
    """The document a parser reads from v's JSON: each byte that was not
    UTF-8 is U+FFFD."""
    if isinstance(v, dict):
        return {read_back(k): read_back(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [read_back(x) for x in v]
    if isinstance(v, str):
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in v)
    return v


def c_writer(ops, doc):
    r = subprocess.run([ops], input=("\n".join(calls(doc, [])) + "\n").encode(), capture_output=True, timeout=60)
    if r.returncode:
        raise SystemExit("FAIL: json_writer_ops: %s" % r.stderr.decode(errors="replace").strip())
    return r.stdout + b"\n"   # the commands end a document with one newline


def random_string(rng):
    """Mostly UTF-8, with bytes that are not (a stray continuation, a cut
    sequence, an overlong form, an encoded surrogate), as a target holds."""
    pieces = []
    for _ in range(rng.randrange(0, 12)):
        pick = rng.randrange(6)
        if pick == 0:
            pieces.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6))))
        elif pick == 1:
            pieces.append(rng.choice([b"\x80", b"\xc3", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                                      b"\xff", b"\x7f", b"\x00", b"\x1b[0m"]))
        else:
            pieces.append(rng.choice(["plain", "q\"b\\s", "\b\f\n\r\t", "caf\u00e9", "\u65e5\u672c", "\U0001f600",
                                      "\u2028\u2029", "\ufffd", "/path/to/app.rb", "<main>", "Object#w\u00f6rk"])
                          .encode("utf-8"))
    return b"".join(pieces).decode("utf-8", "surrogateescape")


def random_value(rng, depth):
    pick = rng.randrange(9 if depth < 6 else 6)
    if pick == 0:
        return random_string(rng)
    if pick == 1:
        return rng.choice([0, 1, -1, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, rng.randrange(-10 ** 9, 10 ** 9)])
    if pick == 2:
        return rng.choice([0.0, 0.5, 1e-05, 123456.789, -2.5e+300, 1 / 3.0, rng.random()])
    if pick == 3:
        return rng.choice([True, False, None])
    if pick in (4, 5):
        return "tid %d" % rng.randrange(1 << 20)
    if pick in (6, 7):
        return {random_string(rng).replace("\0", "") or "k": random_value(rng, depth + 1)
                for _ in range(rng.randrange(0, 5))}
    return [random_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]


# Documents in the commands' shapes, with what their strings may hold.
FIXED = [
    {},
    [],
    {"a": [], "b": {}, "c": [[], [{}]]},
    "a lone string",
    {"processes": [{"pid": 4242, "command": "puma: cluster worker 0: 4242 [app]",
                    "result": {"threads": [{"index": 1, "name": "main", "main": True, "native_tid": 4242,
                                            "frames": [{"label": "<main>", "path": "app.rb", "lineno": 3}]}]}},
                   {"pid": 4243, "command": "?", "error": "not a Ruby process"}]},
    {"samples": 1500, "rate_hz": 99.8, "elapsed_s": 15.0312, "threads": [
        {"pid": 0, "tid": -1, "name": None, "samples": 0, "states": {"running": 0.0, "gvl_wait": 1e-05}}]},
    {"total": 2 ** 64 - 1, "min": -2 ** 63, "per_heap": [1, 2, 3], "started_at": 1795000000.123456},
    {"escapes": "\"\\/\b\f\n\r\t\x00\x01\x1f\x7f", "utf8": "caf\u00e9 \u65e5\u672c \U0001f600 \u2028",
     "replacement": "\ufffd", "del key \x7f": "x", "tab\tkey": 1},
    {"bad bytes": b"ok \x80 \xc3( \xe2\x82 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xff end".decode("utf-8",
                                                                                             "surrogateescape")},
    {"deep": [[[[[[[[[[{"x": [1, {"y": None}]}]]]]]]]]]]},
]


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ops = sys.argv[1]
    rng = random.Random(38)
    docs = FIXED + [random_value(rng, 0) for _ in range(300)]
    problems = 0
    for i, doc in enumerate(docs):
        want = c_writer(ops, doc)
        got = json_text(doc).encode("utf-8", "surrogatepass")   # an unescaped surrogate shows as a difference
        if got != want:
            problems += 1
            at = next((k for k in range(min(len(got), len(want))) if got[k] != want[k]), min(len(got), len(want)))
            print("FAIL: document %d: json_text differs from the C writer at byte %d:\n  python %r\n  C      %r"
                  % (i, at, got[max(0, at - 40):at + 40], want[max(0, at - 40):at + 40]))
            continue
        try:
            again = harness.strict_json(got)
        except ValueError as e:
            problems += 1
            print("FAIL: document %d: the strict parser refuses json_text's output: %s" % (i, e))
            continue
        if again != read_back(doc):
            problems += 1
            print("FAIL: document %d: read back, the output is not the document" % i)
    if problems:
        print("%d of %d documents differ" % (problems, len(docs)))
        return 1
    print("%d documents: json_text writes each as the C writer does, and the strict parser reads it" % len(docs))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
