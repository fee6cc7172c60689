"""A Ruby in another PID and mount namespace, as in a container (issue 26).

    test_container.py RUBY          it.container.<ruby>

programs/container.rb is started under `unshare --pid --mount --fork` from
a copy of the Ruby (its executable and libruby) on a tmpfs mounted in the
new mount namespace only, so its files are visible only inside; outside,
the same directory holds another Ruby release's executable and libruby
under the same names (what a host's own Ruby is to a container's). Its
pid inside is not its pid outside. From outside, the command line must:

- `bt -a --json --pid PID` (the outside pid): every thread, the parked
  one's frames as the program's own backtrace_locations, the main thread's
  native_tid the outside pid (Ruby records the inside one: then
  ruby_native_tid says so), the version the program reports;
- `info`: ruby_current_vm_ptr, found in the .symtab of the image on disk,
  at the address the target's own file gives (read through
  /proc/PID/root), not the decoy's (a stripped Ruby has no .symtab);
- `threads`, and `sample --duration 1` with work_inside in the stacks;
all leaving the target running and untraced.
"""

import glob
import json
import os
import shutil
import subprocess
import sys
import time

import harness
from harness import Failure


def ruby_files(ruby):
    """The executable and its libruby files (none for a static Ruby)."""
    exe = os.path.realpath(ruby)
    out = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        if "libruby" in line and "=>" in line:
            path = line.split("=>")[1].split("(")[0].strip()
            libs.append(os.path.realpath(path))
    return exe, libs


def decoy_spec(spec):
    for other in ("3.3.8", "3.4.5", "3.1.2", "2.7.4"):
        if other != spec and os.path.exists(harness.ruby_binary(other)):
            return other
    return None


def start(spec, workdir):
    ruby = harness.ruby_binary(spec)
    exe, libs = ruby_files(ruby)
    inside = os.path.join(workdir, "inside")
    out = os.path.join(workdir, "out")
    os.makedirs(inside)
    os.makedirs(out)
    # The decoys: another release's files under the names the target uses.
    other = decoy_spec(spec)
    if other:
        oexe, olibs = ruby_files(harness.ruby_binary(other))
        shutil.copy(oexe, os.path.join(inside, "ruby"))
        for lib in libs:
            if olibs:
                shutil.copy(olibs[0], os.path.join(inside, os.path.basename(lib)))
    # Inside: a tmpfs over the same directory, with the target's own files.
    names = " ".join("%s" % l for l in libs)
    script = ("set -e; mount --make-rprivate /; mount -t tmpfs rbpeek-inside {inside}; "
              "cp {exe} {inside}/ruby; for l in {libs}; do cp $l {inside}/; "
              "s=$(objdump -p $l | awk '/SONAME/{{print $2}}'); [ -n \"$s\" ] && [ ! -e {inside}/$s ] && "
              "ln -s $(basename $l) {inside}/$s || true; done; "
              "mount -t proc proc /proc; "
              "LD_LIBRARY_PATH={inside} exec {inside}/ruby {prog} {out}").format(
        inside=inside, exe=exe, libs=names or "", prog=os.path.join(harness.PROGRAMS, "container.rb"), out=out)
    log = open(os.path.join(workdir, "target.log"), "w")
    proc = subprocess.Popen(["unshare", "--pid", "--mount", "--fork", "sh", "-c", script], stdout=log,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(out, "ready")):
        if proc.poll() is not None or time.time() > deadline:
            log.close()
            raise Failure("the target did not start in its namespaces: %s"
                          % open(os.path.join(workdir, "target.log")).read()[-2000:])
        time.sleep(0.05)
    exp = harness.read_json(os.path.join(out, "expected.json"))
    # Its pid outside: unshare's child's child (the exec'd shell is the ruby).
    pid = None
    for _ in range(50):
        kids = [int(x) for x in open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)).read().split()]
        if kids:
            pid = kids[0]
            break
        time.sleep(0.05)
    if pid is None:
        raise Failure("the target's outside pid was not found")
    return proc, pid, exp, inside, bool(other)


def state_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def check_left(pid):
    if state_of(pid) in ("t", "T"):
        raise Failure("the target was left stopped")
    with open("/proc/%d/status" % pid) as f:
        tracer = [l for l in f if l.startswith("TracerPid:")][0].split()[1]
    if tracer != "0":
        raise Failure("the target was left traced by %s" % tracer)


def nm_value(path, name):
    out = subprocess.run(["nm", path], capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            return int(parts[0], 16)
    return None


def check_symbol(pid, inside, decoyed):
    """info's ruby_current_vm_ptr, found in the .symtab of the image on
    disk, is the target's own file's (read through /proc/PID/root), not
    the decoy's of the same name outside."""
    image, base = None, None
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith(inside) and int(parts[2], 16) == 0:
                name = os.path.basename(parts[5])
                if name.startswith("libruby") or (image is None and name == "ruby"):
                    image, base = parts[5], int(parts[0].split("-")[0], 16)
    own = nm_value("/proc/%d/root%s" % (pid, image), "ruby_current_vm_ptr")
    if own is None:   # a stripped Ruby (Debian's): its symbols come from memory, no file is read
        harness.log("the Ruby image is stripped: no .symtab to read through /proc/%d/root" % pid)
        return
    info = harness.cli(["info", "--pid", str(pid)])[0]
    line = next((l for l in info.splitlines() if l.startswith("Symbol:") and "ruby_current_vm_ptr" in l), "")
    got = int(line.split()[2], 16) if line else None
    want = own if own > base else base + own
    if got != want:
        decoy = nm_value(image, "ruby_current_vm_ptr") if decoyed else None
        raise Failure("info: ruby_current_vm_ptr at %s, the target's own file puts it at 0x%x%s:\n%s"
                      % (got and hex(got), want, " (the decoy's: 0x%x)" % (base + decoy) if decoy else "", info))


def test(spec, workdir):
    if not shutil.which("unshare"):
        raise harness.SkipTest("unshare is not installed")
    proc, pid, exp, inside, decoyed = start(spec, workdir)
    try:
        if exp["pid"] == pid:
            raise Failure("the target's pid is the same inside (%d): not another PID namespace" % pid)
        with open("/proc/%d/maps" % pid) as f:
            mapped = {l.split()[-1] for l in f if inside in l}
        if not any(p.endswith("/ruby") for p in mapped):
            raise Failure("the target does not run its copy under %s: %s" % (inside, sorted(mapped)))
        doc = harness.strict_json(harness.cli(["bt", "-a", "--json", "--pid", str(pid)], raw=True)[0])
        if doc["ruby_version"] != exp["ruby_version"]:
            raise Failure("bt: Ruby %s, the target is %s" % (doc["ruby_version"], exp["ruby_version"]))
        main = [t for t in doc["threads"] if t["main"]]
        if len(main) != 1 or main[0]["native_tid"] != pid:
            raise Failure("bt: main thread native_tid %s, its pid outside is %d" % ([t["native_tid"] for t in main], pid))
        if exp["main_native_tid"] is not None and main[0].get("ruby_native_tid") != exp["main_native_tid"]:
            raise Failure("bt: Ruby records %s for the main thread, ruby_native_tid says %s"
                          % (exp["main_native_tid"], main[0].get("ruby_native_tid")))
        parked = [t for t in doc["threads"] if t["name"] == "parked-inside"]
        want = next(t for t in exp["threads"] if t["name"] == "parked-inside")["frames"]
        got = [{"label": f["label"], "lineno": f["lineno"]} for f in parked[0]["frames"]] if parked else None
        if got != want:
            raise Failure("bt: the parked thread's frames\n  rbpeek: %s\n  ruby:   %s" % (got, want))
        check_symbol(pid, inside, decoyed)
        threads = harness.cli(["threads", "--pid", str(pid)])[0]
        if "parked-inside" not in threads or "tid %d " % pid not in threads:
            raise Failure("threads:\n%s" % threads)
        folded = os.path.join(workdir, "s.folded")
        harness.cli(["sample", "--pid", str(pid), "--duration", "1", "--per-thread", "--folded", folded])
        text = open(folded).read()
        if "work_inside" not in text or "(tid %d)" % pid not in text:
            raise Failure("sample: no work_inside under the main thread (tid %d):\n%s" % (pid, text[:2000]))
        check_left(pid)
        harness.log("pid %d outside, %d inside; bt, info (images through /proc/%d/root%s), threads and sample agree"
                    % (pid, exp["pid"], pid, ", decoys beside them" if decoyed else ""))
    finally:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
        proc.wait(timeout=30)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], wd))
