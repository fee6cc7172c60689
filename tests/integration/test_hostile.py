"""A damaged live heap must never kill the debugger (issue 24).

    test_hostile.py RUBY          e.g. test_hostile.py 3.4.5

programs/hostile_scenarios.rb makes, in a live Ruby, a Rational whose
numerator is itself, a Complex whose real part is itself, one whose
imaginary part is itself, a Rational and a Complex that contain each
other, and an Array holding two of them (written through Fiddle into the
objects' slots, as a crashed process's heap can hold them), and parks in
a method whose locals hold them. Such values used to make `ruby p` and
`ruby bt --locals` recurse without end and kill gdb and lldb with SIGSEGV.

In gdb and in lldb-16, attached to the live process: `ruby p` of each (to
the console and as JSON), `ruby bt -a --locals` (console and JSON), then
`ruby p` of a healthy value. Each must print exactly rbpeek's marker where
the loop closes (`#<rbpeek: a Rational that contains itself (0x...)>`)
and flag the value not exact; each command must be followed by the next
(the debugger is alive and usable); the healthy value must print exactly
as Ruby printed it; and the target must be left running, not stopped and
not traced.
"""

import json
import os
import sys

import harness
from harness import Failure


def marker_cmd(debugger, n):
    return "echo after-%d\\n" % n if debugger == "gdb" else "script print('after-%d')" % n


def then_marker(debugger, cmd, n):
    """cmd, then a marker the debugger must print after it. lldb's batch
    mode abandons its -o list after a failing command, so there both run
    in one script line."""
    if debugger == "gdb":
        return [cmd, marker_cmd(debugger, n)]
    return ["script lldb.debugger.HandleCommand(%r); print('after-%d')" % (cmd, n)]


def wanted(exp):
    def loop(kind, key):
        return "#<rbpeek: a %s that contains itself (%s)>" % (kind, exp[key])
    rat = "(%s/3)" % loop("Rational", "rat")
    cpx = "(%s+2i)" % loop("Complex", "cpx")
    return {
        "rat": rat,
        "cpx": cpx,
        "cpx_imag": "(4+%si)" % loop("Complex", "cpx_imag"),
        "mutual": "((%s+1i)/7)" % loop("Rational", "mutual"),
        "list": '[%s, %s, "ok"]' % (rat, cpx),
    }


def tracer_pid(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    return -1


def load(path, what):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        raise Failure("%s: cannot read %s: %s" % (what, path, e))


def run(target, debugger):
    exp = target.expected()
    want = wanted(exp)
    out = os.path.join(target.workdir, debugger)
    os.makedirs(out, exist_ok=True)
    cmds, n = [], 0
    for key in want:
        cmds += then_marker(debugger, "ruby p %s" % exp[key], n)
        cmds += then_marker(debugger, "ruby p %s --json -o %s" % (exp[key], os.path.join(out, key + ".json")), n + 1)
        n += 2
    bt_json = os.path.join(out, "bt.json")
    cmds += then_marker(debugger, "ruby bt -a --locals", n)
    cmds += then_marker(debugger, "ruby bt -a --locals --json -o " + bt_json, n + 1)
    healthy_json = os.path.join(out, "healthy.json")
    cmds += then_marker(debugger, "ruby p %s --json -o %s" % (exp["healthy"], healthy_json), n + 2)
    n += 3
    rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
    harness.assert_no_traceback(output)
    missing = [i for i in range(n) if "after-%d" % i not in output]
    if missing:
        raise Failure("%s: the debugger did not run the command after #%d (exit %s; it died?):\n%s"
                      % (debugger, missing[0], rc, output[-3000:]))
    problems = []
    for key, text in want.items():
        if text not in output:
            problems.append("ruby p %s (%s) did not print %r" % (exp[key], key, text))
        doc = load(os.path.join(out, key + ".json"), "ruby p --json of " + key)
        if doc.get("inspect") != text or doc.get("exact") is not False or \
                "contains itself" not in doc.get("not_exact_because", ""):
            problems.append("ruby p --json %s (%s): %r, want inspect %r, not exact because it contains itself"
                            % (exp[key], key, doc, text))
    if output.count("contains itself") < 2 * len(want):
        problems.append("ruby bt -a --locals printed no markers:\n" + output[-3000:])
    bt = load(bt_json, "ruby bt -a --locals --json")
    frames = [f for t in bt["threads"] if t["main"] for f in t["frames"] if f["label"].endswith("park")]
    if len(frames) != 1 or "locals" not in frames[0]:
        problems.append("ruby bt --locals: no frame of park with locals: %s"
                        % [f["label"] for t in bt["threads"] for f in t["frames"]])
    else:
        locals_ = frames[0]["locals"]
        for key, text in want.items():
            if key != "list" and key in locals_ and locals_[key] != text:
                problems.append("bt --locals: local %s is %r, want %r" % (key, locals_[key], text))
        if locals_.get("list") != want["list"] or locals_.get("healthy") != exp["healthy_inspect"]:
            problems.append("bt --locals: list %r, healthy %r" % (locals_.get("list"), locals_.get("healthy")))
    healthy = load(healthy_json, "ruby p --json of the healthy value")
    if healthy.get("inspect") != exp["healthy_inspect"] or healthy.get("exact") is not True:
        problems.append("the healthy value after them: %r, Ruby says %r" % (healthy, exp["healthy_inspect"]))
    if problems:
        raise Failure("%s: %s" % (debugger, "; ".join(problems)))
    target.assert_left_running()
    if tracer_pid(target.pid) != 0:
        raise Failure("%s: the target is still traced (TracerPid %d)" % (debugger, tracer_pid(target.pid)))
    harness.log("  %s: %d damaged values printed with their markers, bt --locals too, the healthy one exactly; "
                "the debugger ran every next command; the target runs, untraced" % (debugger, len(want)))


def test(ruby_spec, workdir):
    ruby = harness.ruby_binary(ruby_spec)
    if not os.path.exists(ruby):
        raise Failure("no Ruby at %s (build the matrix: scripts/build-rubies.sh)" % ruby)
    target = harness.Target(ruby, "hostile_scenarios.rb", workdir)
    try:
        for debugger in ("gdb", "lldb"):
            run(target, debugger)
        harness.log("%s: a self-containing Rational and Complex kill neither gdb nor lldb" % ruby_spec)
    finally:
        target.close()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    harness.main(lambda wd: test(sys.argv[1], wd))
