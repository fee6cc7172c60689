"""Cores of Rubies that cannot be built here, opened with nothing but the core.

    test_foreign_cores.py VERSION

../shared/testdata/rbspy-cores/ (or $RBPEEK_FOREIGN_CORES) holds gzip'd cores
of small Ruby programs made on other machines by rbspy's test suite, without
their binaries or libraries; its README gives, per core, the address of the
VM pointer and the program. One function per core below checks what rbpeek
makes of it: the stack exactly as that Ruby's own Thread#backtrace_locations
reports it (the truth being the program's source and the Ruby's backtrace
rules, not rbspy's output, whose line numbers differ), found both by
rbpeek's own discovery and with the README's VM address given, and a heap
census that adds up. Without that folder (a clone away from ../shared) the
test skips, exit 77; with it, a core that is missing fails: CI must not
pass by having nothing to test.
"""

import gzip
import json
import os
import re
import shutil
import struct
import subprocess
import sys

import harness
from harness import Failure

CORES = os.environ.get("RBPEEK_FOREIGN_CORES") or os.path.join(
    os.path.dirname(harness.REPO), "shared", "testdata", "rbspy-cores")


def unpack_core(version, workdir):
    # The cores are public test data kept beside the checkout, not in it (as
    # tools/test_factsgen.py's facts are): a clone elsewhere has none, and
    # skips. Where the folder is, a missing core is a failure.
    if not os.path.isdir(CORES):
        raise harness.SkipTest("no rbspy cores at %s (they sit beside the checkout, in ../shared; "
                               "or set RBPEEK_FOREIGN_CORES)" % CORES)
    gz = os.path.join(CORES, "ruby-coredump-%s.gz" % version)
    if not os.path.exists(gz):
        raise Failure("no core of Ruby %s at %s" % (version, gz))
    core = os.path.join(workdir, "core-%s" % version)
    with gzip.open(gz, "rb") as src, open(core, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return core


def readme_vm_pointer(version):
    """The README's address of ruby_current_vm_ptr for this core."""
    with open(os.path.join(CORES, "README.md")) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0] == "ruby-coredump-%s.gz" % version:
                return int(cells[2], 16)
    raise Failure("the cores' README lists no VM pointer for Ruby %s" % version)


def read_u64(core, addr):
    """8 bytes of the core's memory at addr (the VM pointer's value)."""
    with open(core, "rb") as f:
        for vaddr, offset, size in harness.core_segments(core):
            if vaddr <= addr and addr + 8 <= vaddr + size:
                f.seek(offset + addr - vaddr)
                return struct.unpack("<Q", f.read(8))[0]
    raise Failure("the core holds no memory at 0x%x" % addr)


def rbpeek_bt(core, *options):
    """`rbpeek bt -a --json` on the core alone (the command line, no debugger)."""
    argv = [sys.executable, harness.RBPEEK_CLI, "bt", "-a", "--json", "--core", core] + list(options)
    r = subprocess.run(argv, capture_output=True, timeout=300)
    if r.returncode != 0:
        raise Failure("rbpeek bt %s failed (%d): %s" % (" ".join(options), r.returncode,
                                                       r.stderr.decode("utf-8", "replace").strip()))
    return harness.strict_json(r.stdout)


def debugger_json(debugger, core, workdir, command):
    """Runs `command -o FILE` (a --json command) in gdb or lldb on the core
    alone and returns the document."""
    out = os.path.join(workdir, debugger + "_" + re.sub(r"\W+", "_", command) + ".json")
    rc, text = harness.run_debugger(debugger, ["%s -o %s" % (command, out)], core=core)
    harness.assert_no_traceback(text)
    errors = [l for l in text.splitlines() if "rbpeek:" in l and "rbpeek: wrote " not in l]
    if errors or not os.path.exists(out):
        raise Failure("%s `%s` on the core failed:\n%s" % (debugger, command, text[-2000:]))
    return harness.read_json(out)


def check_stack(doc, version, expected, how):
    if doc.get("ruby_version") != version:
        raise Failure("%s: version %r, not %s" % (how, doc.get("ruby_version"), version))
    threads = doc["threads"]
    if len(threads) != 1 or not threads[0]["main"]:
        raise Failure("%s: expected the main thread alone, got %d threads" % (how, len(threads)))
    got = [(f["label"], f["path"], f["lineno"], f["kind"]) for f in threads[0]["frames"]]
    if got != expected:
        raise Failure("%s: the stack differs from Ruby's own\n  got:      %s\n  expected: %s" % (how, got, expected))
    harness.log("%s: %d frames, as Ruby %s reports them" % (how, len(got), version))


def check_census(doc, version):
    """A census whose parts add up to its totals, with real class names."""
    h = doc["heap"]
    if doc.get("ruby_version") != version:
        raise Failure("heap: version %r, not %s" % (doc.get("ruby_version"), version))
    if h["rejected_pages"] or h["unreadable"] or not h["pages"]:
        raise Failure("heap: %d pages, %d rejected, %d unreadable slots" % (h["pages"], h["rejected_pages"],
                                                                            h["unreadable"]))
    sums = {
        "slots": (h["slots"], h["live"] + h["free"]),
        "slots by slot size": (h["slots"], sum(s["slots"] for s in h["slot_sizes"])),
        "live by slot size": (h["live"], sum(s["live"] for s in h["slot_sizes"])),
        "pages by slot size": (h["pages"], sum(s["pages"] for s in h["slot_sizes"])),
        "count_objects TOTAL": (doc["count_objects"]["TOTAL"], h["slots"]),
        "count_objects FREE": (doc["count_objects"]["FREE"], h["free"]),
        "live by type": (h["live"], sum(t["count"] for t in doc["types"])),
        "live by class": (h["live"], sum(c["count"] for c in doc["classes"])),
        "bytes by type": (doc["bytes"]["total"], sum(t["bytes"] for t in doc["types"])),
        "bytes by class": (doc["bytes"]["total"], sum(c["bytes"] for c in doc["classes"])),
        "class rows": (doc["classes_total"], len(doc["classes"])),
    }
    for what, (total, parts) in sums.items():
        if total != parts:
            raise Failure("heap: %s: total %d, parts add up to %d" % (what, total, parts))
    names = {c["name"]: c for c in doc["classes"]}
    bad = [n for n in names if n.startswith("(unknown") or n.startswith("(not a class")]
    if bad:
        raise Failure("heap: rows without a real class: %s" % bad)
    return names


def check_stacks(version, expected, workdir):
    """Unpacks the core and checks its one stack every way rbpeek can be
    asked: the rbpeek command line with nothing given and with the README's VM and the
    version, and both debuggers with --vm and with nothing given (lldb has
    no module to go by: it lists none for a core whose binaries are
    elsewhere). Returns the core's path."""
    core = unpack_core(version, workdir)
    vm = read_u64(core, readme_vm_pointer(version))
    check_stack(rbpeek_bt(core), version, expected, "rbpeek bt, nothing given")
    check_stack(rbpeek_bt(core, "--vm", "0x%x" % vm, "--ruby-version", version), version, expected,
                "rbpeek bt --vm 0x%x --ruby-version %s" % (vm, version))
    for debugger in ("gdb", "lldb"):
        check_stack(debugger_json(debugger, core, workdir, "ruby bt --json --vm 0x%x" % vm), version, expected,
                    debugger + " ruby bt --vm")
        check_stack(debugger_json(debugger, core, workdir, "ruby bt --json"), version, expected,
                    debugger + " ruby bt, nothing given")
    return core


def check_census_both(core, version, workdir):
    """The census in gdb, which must add up (check_census), and the same
    census in lldb. Returns gdb's document and its classes by name."""
    doc = debugger_json("gdb", core, workdir, "ruby heap --json")
    names = check_census(doc, version)
    if check_census(debugger_json("lldb", core, workdir, "ruby heap --json"), version) != names:
        raise Failure("heap: lldb's census differs from gdb's on the same core")
    return doc, names


def check_timed_sleep(core, workdir):
    """Both programs sleep with a duration in Kernel#sleep, which can't deadlock."""
    locks = debugger_json("gdb", core, workdir, "ruby locks --json")
    waits = [(t["waiting_on"]["kind"], t["waiting_on"]["timeout"]) for t in locks["threads"]]
    if waits != [("sleep", True)] or locks["deadlocks"] or locks["never_released"]:
        raise Failure("locks: expected one thread in a timed sleep, got %s" % json.dumps(locks)[:1000])
    harness.log("locks: the main thread sleeps with a duration; no deadlock")


def core_3_0_0(workdir):
    """rbspy's ci/ruby-programs/infinite.rb under Ruby 3.0.0 (rbenv's build),
    stopped in sleep. Its source, by line:

        1  def aaa()
        2      sleep(0.5)
        5  def bbb()
        6      aaa()
        9  def ccc()
       10      bbb()
       13  loop do
       14      ccc()

    Before 3.4 labels are bare method names; a C method (sleep, loop) is
    reported at its caller's path and line; a block's label is "block in"
    its method's. rbspy's own expectations read one past these lines."""
    path = "ci/ruby-programs/infinite.rb"
    expected = [
        ("sleep", path, 2, "cfunc"),
        ("aaa", path, 2, "ruby"),
        ("bbb", path, 6, "ruby"),
        ("ccc", path, 10, "ruby"),
        ("block in <main>", path, 14, "ruby"),
        ("loop", path, 13, "cfunc"),
        ("<main>", path, 13, "ruby"),
    ]
    core = check_stacks("3.0.0", expected, workdir)

    doc, names = check_census_both(core, "3.0.0", workdir)
    # Ruby 3.0 keeps one slot size (40-byte RVALUEs) on 16 KiB pages.
    sizes = [s["slot_size"] for s in doc["heap"]["slot_sizes"]]
    if sizes != [40]:
        raise Failure("heap: slot sizes %s; Ruby 3.0 has only 40-byte slots" % sizes)
    # A Ruby that booted RubyGems and runs one thread: its classes are named
    # (before 3.3 from each class's __classpath__ ivar), one Thread, the
    # main Ractor, STDIN/OUT/ERR's IO.
    for cls in ("String", "Array", "Hash", "Class", "Module", "Encoding", "Gem::Specification", "Thread::Mutex",
                "Monitor", "IO", "Ractor"):
        if cls not in names:
            raise Failure("heap: no %s among the classes: %s" % (cls, sorted(names)))
    for cls, count in (("Thread", 1), ("Ractor", 1), ("IO", 3)):
        if names[cls]["count"] != count:
            raise Failure("heap: %d %s objects, expected %d" % (names[cls]["count"], cls, count))
    harness.log("heap: the census adds up, over %d named classes" % len(names))

    check_timed_sleep(core, workdir)  # sleep(0.5)


def core_4_0_0(workdir):
    """rbspy's ci/ruby-programs/infinite_on_cpu.rb under Ruby 4.0.0, stopped in
    sleep. Its source, by line:

        7  def aaa()
        8      sleep($sleep_time)
       11  def bbb()
       12      aaa()
       15  def ccc()
       16      bbb()
       19  loop do
       20      ccc()

    Ruby 4.0 labels methods by owner (Object#aaa), reports a C method at its
    caller's line, and hides <internal:...> frames: Kernel#loop, written in
    Ruby in <internal:kernel>, is reported like a C method at its caller's
    line, 19 (ruby/ruby#13238)."""
    path = "ci/ruby-programs/infinite_on_cpu.rb"
    expected = [
        ("Kernel#sleep", path, 8, "cfunc"),
        ("Object#aaa", path, 8, "ruby"),
        ("Object#bbb", path, 12, "ruby"),
        ("Object#ccc", path, 16, "ruby"),
        ("block in <main>", path, 20, "ruby"),
        ("Kernel#loop", path, 19, "cfunc"),
        ("<main>", path, 19, "ruby"),
    ]
    core = check_stacks("4.0.0", expected, workdir)

    _doc, names = check_census_both(core, "4.0.0", workdir)
    # A Ruby that booted RubyGems and runs one thread: its classes are named,
    # classes and modules counted under Class and Module (a singleton's real
    # class is found through 4.0's classext), one Thread, STDIN/OUT/ERR's IO.
    for cls in ("String", "Array", "Hash", "Class", "Module", "Encoding", "Gem::Specification", "Thread::Mutex",
                "Monitor", "IO"):
        if cls not in names:
            raise Failure("heap: no %s among the classes: %s" % (cls, sorted(names)))
    if names["Thread"]["count"] != 1:
        raise Failure("heap: %d Thread objects in a one-thread program" % names["Thread"]["count"])
    if names["IO"]["count"] < 3:
        raise Failure("heap: %d IO objects; STDIN, STDOUT and STDERR are three" % names["IO"]["count"])
    harness.log("heap: the census adds up, over %d named classes" % len(names))

    check_timed_sleep(core, workdir)  # sleep($sleep_time)


CORE_TESTS = {
    "3.0.0": core_3_0_0,
    "4.0.0": core_4_0_0,
}


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CORE_TESTS:
        sys.exit("usage: test_foreign_cores.py (%s)" % "|".join(sorted(CORE_TESTS)))
    harness.main(CORE_TESTS[sys.argv[1]])
