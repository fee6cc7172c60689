#!/usr/bin/env python3
"""Every user-visible output of rbpeek, captured from two checkouts on the
same cores, compared byte for byte: the check that a refactoring changed no
output (issue 29's "byte-identical before and after").

    compare_outputs.py cores DIR [RUBY ...]         start each test program on
        each built Ruby (default: the whole matrix), gcore it, keep the core
        and what the program wrote (expected.json, objects.txt) under DIR
    compare_outputs.py capture CHECKOUT CORES OUT [--debuggers]
        run CHECKOUT's rbpeek (its tools/rbpeek and build/lib/librbpeek.so)
        on every core of CORES, one file per output under OUT; with
        --debuggers also `ruby bt`/`threads`/`frame` through gdb and lldb-16
    compare_outputs.py diff OUT_A OUT_B               list the files that differ
    compare_outputs.py all CHECKOUT_A CHECKOUT_B OUT [--programs=a,b] [--debuggers] [RUBY ...]
        the three above one Ruby at a time, deleting each Ruby's cores once
        both checkouts have read them (a gcore of a test program is 1 to
        2 GB: the whole matrix's would be over 50 GB); captures in OUT/A
        and OUT/B, what the programs recorded in OUT/recorded

COMPARE_MAX_VALUES=N caps the `p` outputs per core (default 150).

What is captured, per core: bt -a (text, JSON, --locals), threads, locks,
info, heap (text, JSON, --dump), gc, `p` of the addresses the program
recorded, `page` of some of its objects, `frame 0`; and the profile writers
(folded, SVG, speedscope, pprof, top) fed by one snapshot of the core
through rbpeek_profile_add_snapshot, with and without per-thread roots;
once per capture, a fixed folded profile (FIXED_FOLDED) read back and
written by every writer, and made into SVGs by rbpeek-flamegraph.
A core stands still, so two runs of one checkout give the same bytes; the
capture of a checkout is therefore comparable with another's.

Every JSON output is also read strictly (tests/integration/harness.py's
strict_json: UTF-8 decoded strictly, no lone surrogate escapes); a file that
fails is listed as such by capture.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import harness  # noqa: E402

PROGRAMS = ["bt_scenarios.rb", "locks_scenarios.rb", "inspect_scenarios.rb", "heap_population.rb",
            "page_scenarios.rb", "parked_server.rb", "cpu_split.rb"]
# cpu_split.rb with a second CPU-bound thread: the core holds two running stacks
PROGRAM_ENV = {"cpu_split.rb": {"RBPEEK_CPU_SPLIT_ARGS": "--burner"}}
MATRIX = ["2.7.4", "3.1.2", "3.3.8", "3.4.5", "3.3.8-static", "debian-3.1"]
# `p` of at most this many recorded addresses per core (COMPARE_MAX_VALUES: fewer, for a quick run)
MAX_VALUES = int(os.environ.get("COMPARE_MAX_VALUES", "150"))
MAX_PAGES = 8           # `page` of at most this many objects per core


def make_cores(out, rubies, programs=None):
    """Runs every test program on every built Ruby, keeps a gcore of each
    (1 to 2 GB each: see `all` for a run that keeps few at a time)."""
    os.makedirs(out, exist_ok=True)
    manifest = []
    for spec in rubies or MATRIX:
        ruby = harness.ruby_binary(spec)
        if not os.path.exists(ruby) or (spec != "debian-3.1" and not os.path.exists(
                os.path.join(os.path.dirname(os.path.dirname(ruby)), ".rbpeek-complete"))):
            print("skip %s: not built" % spec)
            continue
        for prog in programs or PROGRAMS:
            name = "%s.%s" % (spec, prog[:-3])
            work = os.path.join(out, name)
            shutil.rmtree(work, ignore_errors=True)
            os.makedirs(work)
            target = harness.Target(ruby, prog, work, env=PROGRAM_ENV.get(prog))
            try:
                time.sleep(1.0)   # threads settle into their waits
                core = target.gcore()
            finally:
                target.close()
            manifest.append({"name": name, "ruby": spec, "exe": ruby, "core": os.path.relpath(core, out),
                             "workdir": name})
            print("core %s" % name, flush=True)
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def recorded_addresses(work):
    """Object addresses the program recorded about itself."""
    found = []

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
        elif isinstance(v, str) and re.fullmatch(r"0x[0-9a-f]{6,16}", v) and v not in found:
            found.append(v)

    path = os.path.join(work, "expected.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            walk(json.load(f))
    return found[:MAX_VALUES]


def page_objects(work):
    path = os.path.join(work, "objects.txt")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        addrs = re.findall(r"\b0x[0-9a-f]{6,16}\b", f.read())
    return addrs[:: max(1, len(addrs) // MAX_PAGES)][:MAX_PAGES]


PROFILE_DRIVER = r"""
import ctypes, sys
from rbpeeklib.core import Profile, SampleOptions, Session
core, out = sys.argv[1], sys.argv[2]
s = Session()
s.use_core(core)
s.attach()
for variant, per_thread in (("plain", 0), ("per_thread", 1)):
    p = Profile()
    p.set_meta("title", "compare_outputs " + variant)
    opt = SampleOptions()
    opt.per_thread = per_thread
    for i in range(3):
        with s.snapshot(0) as snap:
            from rbpeeklib.core import lib
            lib().rbpeek_profile_add_snapshot(p._h, snap._h, ctypes.byref(opt), None)
    base = "%s/profile.%s" % (out, variant)
    facts = {"title": None, "period_s": 0.01, "start": 1.0, "duration": 2.0}
    if hasattr(p, "write"):   # the formats table (core/formats.py)
        for fmt, ext in (("folded", ".folded"), ("svg", ".svg"), ("speedscope", ".speedscope.json"),
                         ("pprof", ".pprof.gz")):
            p.write(fmt, base + ext, facts)
    else:                     # one method per format, as before it
        p.write_folded(base + ".folded")
        p.write_svg(base + ".svg")
        p.write_speedscope(base + ".speedscope.json")
        p.write_pprof(base + ".pprof.gz", 0.01, start=1.0, duration=2.0)
    with open(base + ".top.txt", "w") as f:
        f.write(p.top(True, 0))
        f.write(p.top(False, 0))
"""


# A fixed profile, read back through rbpeek_profile_read_folded and written
# by every writer, and turned into SVG by rbpeek-flamegraph: sampling is not
# deterministic, a folded file is. Its stacks have what the writers must
# keep apart: Ruby frames with a location, C frames, per-thread roots, 3.4's
# quoting, names with spaces, parentheses, ';'-free punctuation, quotes, '<'
# and '&' (SVG, JSON), non-ASCII and invalid UTF-8, a deep stack, and counts
# from 1 to past 2^32.
FIXED_FOLDED = (
    b'<main> (/app/main.rb:1);Object#run (/app/main.rb:10);Integer#times;block in Object#run (/app/main.rb:11);'
    b'Object#alpha (/app/main.rb:20) 412\n'
    b'<main> (/app/main.rb:1);Object#run (/app/main.rb:10);Integer#times;block in Object#run (/app/main.rb:11);'
    b'Object#beta (/app/main.rb:30);Kernel#sleep 98\n'
    b'Thread "worker 1" (tid 4242);block in <main> (/app/main.rb:5);Thread::Queue#pop 1000\n'
    b'Thread "main" (tid 4241);<main> (/app/main.rb:1);Object#run (/app/main.rb:10) 3\n'
    b"<main> (/app/main.rb:1);'Foo::Bar#baz' (/app/lib/foo bar.rb:7);Array#each;"
    b"block in 'Foo::Bar#baz' (/app/lib/foo bar.rb:8) 17\n"
    b'<main> (/app/main.rb:1);Hash#[]= & <q> "quoted" (x) (<internal:kernel>:45) 5\n'
    b'<main> (/app/main.rb:1);M\xc3\xa9thode#\xe6\x97\xa5\xe6\x9c\xac (/app/\xc3\xa9t\xc3\xa9.rb:3);'
    b'bad\xff\xfebytes (/app/x.rb:1) 2\n'
    b'<main> (/app/main.rb:1);<unknown C method> 1\n'
    + b";".join(b"Object#deep%d (/app/deep.rb:%d)" % (i, i + 1) for i in range(300)) + b" 7\n"
    b'<main> (/app/main.rb:1);Object#huge (/app/main.rb:99) 5000000000\n'
)

FOLDED_DRIVER = r"""
import ctypes, sys
from rbpeeklib.core import Profile, lib
src, out = sys.argv[1], sys.argv[2]
p = Profile()
read = lib().rbpeek_profile_read_folded
read.argtypes, read.restype = [ctypes.c_void_p, ctypes.c_char_p], ctypes.c_int
if read(p._h, src.encode()) != 0:
    sys.exit("read_folded failed")
p.set_meta("title", "compare_outputs fixed")
base = out + "/fixed"
facts = {"title": "fixed <profile> & co", "period_s": 0.005, "start": 1700000000.25, "duration": 12.5}
if hasattr(p, "write"):
    for fmt, ext in (("folded", ".folded"), ("svg", ".svg"), ("speedscope", ".speedscope.json"),
                     ("pprof", ".pprof.gz")):
        p.write(fmt, base + ext, facts)
else:
    p.write_folded(base + ".folded")
    p.write_svg(base + ".svg", facts["title"])
    p.write_speedscope(base + ".speedscope.json")
    p.write_pprof(base + ".pprof.gz", 0.005, start=1700000000.25, duration=12.5)
with open(base + ".top.txt", "w") as f:
    f.write(p.top(True, 0))
    f.write(p.top(False, 0))
"""


def capture_fixed(checkout, env, out):
    """The fixed profile through the writers and rbpeek-flamegraph."""
    dest = os.path.join(out, "fixed-profile")
    os.makedirs(dest, exist_ok=True)
    src = os.path.join(dest, "input.folded")
    with open(src, "wb") as f:
        f.write(FIXED_FOLDED)
    r = subprocess.run([sys.executable, "-c", FOLDED_DRIVER, src, dest], capture_output=True, env=env,
                       timeout=300)
    if r.returncode:
        with open(os.path.join(dest, "fixed.error"), "wb") as f:
            f.write(r.stdout + r.stderr)
    tool = os.path.join(checkout, "build", "bin", "rbpeek-flamegraph")
    for name, args in (("flamegraph.svg", []), ("flamegraph.inverted.svg", ["--inverted", "--title", "a & <b>"]),
                       ("flamegraph.narrow.svg", ["--width", "300", "--min-width", "2"]),
                       ("flamegraph.all.svg", ["--min-width", "0"])):
        r = subprocess.run([tool] + args + ["-o", os.path.join(dest, name), src], capture_output=True,
                           timeout=300)
        if r.returncode:
            with open(os.path.join(dest, name + ".error"), "wb") as f:
                f.write(r.stdout + r.stderr)


def capture(checkout, cores, out, debuggers):
    checkout = os.path.abspath(checkout)
    lib = os.path.join(checkout, "build", "lib", "librbpeek.so")
    cli = os.path.join(checkout, "tools", "rbpeek")
    env = dict(os.environ, RBPEEK_LIBRARY=lib, PYTHONPATH=os.path.join(checkout, "python"))
    # The debuggers load CHECKOUT's plugins, which find its library.
    harness.GDB_PLUGIN = os.path.join(checkout, "gdb-plugin", "rbpeek.py")
    harness.LLDB_PLUGIN = os.path.join(checkout, "lldb-plugin", "rbpeek.py")
    os.environ["RBPEEK_LIBRARY"] = lib
    with open(os.path.join(cores, "manifest.json")) as f:
        manifest = json.load(f)
    os.makedirs(out, exist_ok=True)
    capture_fixed(checkout, env, out)
    bad_json = []
    for entry in manifest:
        core = os.path.join(cores, entry["core"])
        work = os.path.join(cores, entry["workdir"])
        dest = os.path.join(out, entry["name"])
        os.makedirs(dest, exist_ok=True)
        target = ["--core", core, "--exe", entry["exe"]]

        def run(fname, args):
            r = subprocess.run([sys.executable, cli] + args + target, capture_output=True, env=env, timeout=900,
                               stdin=subprocess.DEVNULL, cwd=dest)
            with open(os.path.join(dest, fname), "wb") as f:
                # `info` names the library, whose path differs between the checkouts
                out = r.stdout
                if fname == "info.txt":
                    out = out.replace(checkout.encode() + b"/build/lib/", b"<checkout>/build/lib/")
                f.write(out)
                if r.returncode:
                    f.write(b"\n[exit %d]\n" % r.returncode + r.stderr)
            return r

        run("bt.txt", ["bt", "-a"])
        run("bt.json", ["bt", "-a", "--json"])
        run("bt_locals.txt", ["bt", "-a", "--locals"])
        run("bt_locals.json", ["bt", "-a", "--locals", "--json"])
        run("bt_selected.txt", ["bt"])
        run("frame0.txt", ["frame", "0"])
        run("frame0.json", ["frame", "0", "--json"])
        run("threads.txt", ["threads"])
        run("threads.json", ["threads", "--json"])
        run("locks.txt", ["locks"])
        run("locks.json", ["locks", "--json"])
        run("info.txt", ["info"])
        run("gc.txt", ["gc"])
        run("gc.json", ["gc", "--json"])
        if "heap_population" in entry["name"] or "inspect" in entry["name"]:
            run("heap.txt", ["heap"])
            run("heap.json", ["heap", "--json"])
            run("heap_dump.log", ["heap", "--dump", "heap_dump.jsonl"])   # relative: the message names it
        for i, addr in enumerate(recorded_addresses(work)):
            run("p.%03d.txt" % i, ["p", addr])
            run("p.%03d.json" % i, ["p", addr, "--json", "--raw"])
        for i, addr in enumerate(page_objects(work)):
            run("page.%d.txt" % i, ["page", addr])
            run("page.%d.json" % i, ["page", addr, "--json"])
        r = subprocess.run([sys.executable, "-c", PROFILE_DRIVER, core, dest], capture_output=True, env=env,
                           timeout=900)
        if r.returncode:
            with open(os.path.join(dest, "profile.error"), "wb") as f:
                f.write(r.stdout + r.stderr)
        if debuggers:
            for dbg in ("gdb", "lldb"):
                files = {"bt": "%s.bt.txt" % dbg, "btj": "%s.bt.json" % dbg, "th": "%s.threads.txt" % dbg,
                         "thj": "%s.threads.json" % dbg, "fr": "%s.frame0.txt" % dbg}
                paths = {k: os.path.join(dest, v) for k, v in files.items()}
                harness.run_debugger(dbg, ["ruby bt -a -o " + paths["bt"], "ruby bt -a --json -o " + paths["btj"],
                                           "ruby threads -o " + paths["th"],
                                           "ruby threads --json -o " + paths["thj"],
                                           "ruby frame 0 -o " + paths["fr"]],
                                     exe=entry["exe"], core=core)
        for name in sorted(os.listdir(dest)):
            if name.endswith(".json") or name.endswith(".jsonl"):
                with open(os.path.join(dest, name), "rb") as f:
                    data = f.read()
                try:
                    if data.startswith(b"rbpeek:") or b"\n[exit " in data:
                        continue
                    if name.endswith(".jsonl"):
                        for line in data.splitlines():
                            harness.strict_json(line)
                    else:
                        harness.strict_json(data)
                except ValueError as e:
                    bad_json.append("%s/%s: %s" % (entry["name"], name, e))
        print("captured %s" % entry["name"], flush=True)
    with open(os.path.join(out, "strict_json_failures.txt"), "a") as f:
        f.write("".join(x + "\n" for x in bad_json))
    print("%d JSON outputs failed the strict reading" % len(bad_json))
    for x in bad_json[:20]:
        print("  " + x)


def diff(a, b):
    same, differ, only = 0, [], []
    for root, _dirs, files in os.walk(a):
        for name in files:
            pa = os.path.join(root, name)
            rel = os.path.relpath(pa, a)
            pb = os.path.join(b, rel)
            if not os.path.exists(pb):
                only.append(rel + " (only in A)")
                continue
            with open(pa, "rb") as fa, open(pb, "rb") as fb:
                if fa.read() == fb.read():
                    same += 1
                else:
                    differ.append(rel)
    for root, _dirs, files in os.walk(b):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), b)
            if not os.path.exists(os.path.join(a, rel)):
                only.append(rel + " (only in B)")
    print("%d files identical, %d differ, %d in one capture only" % (same, len(differ), len(only)))
    for rel in differ + only:
        print("  " + rel)
    return 0 if not differ and not only else 1


def run_all(a, b, out, rubies, programs, debuggers):
    """One Ruby at a time: its cores, both captures, then its cores go
    (a core is 1 to 2 GB); then the diff of the two captures."""
    shutil.rmtree(out, ignore_errors=True)
    for spec in rubies or MATRIX:
        cores = os.path.join(out, "cores")
        shutil.rmtree(cores, ignore_errors=True)
        make_cores(cores, [spec], programs)
        for checkout, dest in ((a, "A"), (b, "B")):
            capture(checkout, cores, os.path.join(out, dest), debuggers)
        # keep what the programs recorded (their own view) beside the captures, not the cores
        for name in os.listdir(cores):
            for f in os.listdir(os.path.join(cores, name)) if os.path.isdir(os.path.join(cores, name)) else []:
                if f.startswith("core."):
                    os.unlink(os.path.join(cores, name, f))
        shutil.rmtree(os.path.join(out, "recorded", spec), ignore_errors=True)
        shutil.move(cores, os.path.join(out, "recorded", spec))
    return diff(os.path.join(out, "A"), os.path.join(out, "B"))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "cores":
        make_cores(sys.argv[2], sys.argv[3:])
        return 0
    if len(sys.argv) >= 5 and sys.argv[1] == "all":
        rest = sys.argv[5:]
        debuggers = "--debuggers" in rest
        programs = None
        for x in rest:
            if x.startswith("--programs="):
                programs = [p if p.endswith(".rb") else p + ".rb" for p in x.split("=", 1)[1].split(",")]
        rubies = [x for x in rest if not x.startswith("--")]
        return run_all(sys.argv[2], sys.argv[3], sys.argv[4], rubies, programs, debuggers)
    if len(sys.argv) in (5, 6) and sys.argv[1] == "capture":
        capture(sys.argv[2], sys.argv[3], sys.argv[4], "--debuggers" in sys.argv[5:])
        return 0
    if len(sys.argv) == 4 and sys.argv[1] == "diff":
        return diff(sys.argv[2], sys.argv[3])
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
