"""`ruby bt -a --json` against the target's own backtrace_locations.

    test_bt.py RUBY DEBUGGER MODE      e.g. test_bt.py 3.4.5 lldb core

RUBY is a matrix name (see harness.ruby_binary), DEBUGGER gdb or lldb,
MODE live (attach to the parked process) or core (gcore it, then open the
core). Every recorded thread must be found, and every frame's label, path,
absolute_path and line number must be equal, in order. The target must be
left running.
"""

import os
import sys

import harness
from harness import Failure


def compare(expected, actual):
    exp_threads = expected["threads"]
    act_threads = [t for t in actual["threads"] if t["name"] != "rbpeek-recorder"]
    if actual["ruby_version"] != expected["ruby_version"]:
        raise Failure("version: rbpeek says %s, Ruby says %s" % (actual["ruby_version"], expected["ruby_version"]))

    def key(t):
        return "<main>" if t["main"] else t["name"]

    exp_by = {key(t): t for t in exp_threads}
    act_by = {key(t): t for t in act_threads}
    if set(exp_by) != set(act_by):
        raise Failure("thread sets differ: missing %s, extra %s"
                      % (sorted(set(exp_by) - set(act_by)), sorted(set(act_by) - set(exp_by))))
    problems = []
    frames_checked = 0
    for name, exp in exp_by.items():
        act = act_by[name]
        if act.get("error"):
            problems.append("%s: walk error: %s" % (name, act["error"]))
        if act["status"] != exp["status"]:
            problems.append("%s: status %s, Ruby says %s" % (name, act["status"], exp["status"]))
        ef, af = exp["frames"], act["frames"]
        for i in range(max(len(ef), len(af))):
            e = ef[i] if i < len(ef) else None
            a = af[i] if i < len(af) else None
            fields = ("label", "path", "absolute_path", "lineno")
            ev = tuple(e.get(k) for k in fields) if e else None
            av = tuple(a.get(k) for k in fields) if a else None
            if ev != av:
                problems.append("%s frame %d:\n      ruby:   %s\n      rbpeek: %s" % (name, i, ev, av))
                if len(problems) > 30:
                    break
            frames_checked += 1
    if problems:
        raise Failure("%d mismatches:\n  " % len(problems) + "\n  ".join(problems[:30]))
    return frames_checked


def check_selected_thread(debugger, target, workdir, name="deep"):
    """`ruby bt` without -a shows the debugger's selected thread: select the
    Ruby thread NAME by the number `ruby threads` gives it, then compare."""
    threads_json = os.path.join(workdir, "threads.json")
    rc, output = harness.run_debugger(debugger, ["ruby threads --json -o " + threads_json], pid=target.pid)
    harness.assert_no_traceback(output)
    listed = harness.read_json(threads_json)["threads"]
    num = next((t["debugger_thread"] for t in listed if t["name"] == name), None)
    if num is None:
        raise Failure("ruby threads gives no debugger thread number for %r:\n%s" % (name, listed))
    one_json = os.path.join(workdir, "one.json")
    select = "thread %d" % num if debugger == "gdb" else "thread select %d" % num
    rc, output = harness.run_debugger(debugger, [select, "ruby bt --json -o " + one_json], pid=target.pid)
    harness.assert_no_traceback(output)
    if not os.path.exists(one_json):
        raise Failure("ruby bt on the selected thread %d wrote nothing:\n%s" % (num, output[-2000:]))
    one = harness.read_json(one_json)
    if len(one["threads"]) != 1 or one["threads"][0]["name"] != name:
        raise Failure("ruby bt on thread %d showed %s, not %r" % (num, [t["name"] for t in one["threads"]], name))
    expected = dict(target.expected())
    expected["threads"] = [t for t in expected["threads"] if t["name"] == name]
    compare(expected, one)
    harness.log("ruby bt on the selected thread (%d, %r): identical" % (num, name))


def test(ruby_spec, debugger, mode, workdir):
    ruby = harness.ruby_binary(ruby_spec)
    if not os.path.exists(ruby):
        raise Failure("Ruby %s is not built (%s); run scripts/build-rubies.sh" % (ruby_spec, ruby))
    target = harness.Target(ruby, "bt_scenarios.rb", workdir)
    try:
        out_json = os.path.join(workdir, "rbpeek.json")
        cmd = "ruby bt -a --json -o " + out_json
        # Live, also walk with the built-in table of this version (a Ruby with
        # DWARF would otherwise never exercise it): it must give the same.
        version = target.expected()["ruby_version"]
        table = os.path.join(harness.REPO, "layouts", version + ".layout")
        table_json = os.path.join(workdir, "rbpeek-table.json")
        if mode == "live":
            cmds = [cmd] + (["ruby bt -a --json -o %s --layout %s" % (table_json, table)]
                            if os.path.exists(table) else [])
            rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
        else:
            core = target.gcore()
            rc, output = harness.run_debugger(debugger, [cmd], exe=ruby, core=core)
            # gdb given the core alone has no symbols for libruby: rbpeek must
            # fall back to the ELF symbol tables of the mapped images.
            if debugger == "gdb":
                bare_json = os.path.join(workdir, "rbpeek-bare.json")
                rc2, out2 = harness.run_debugger(debugger, ["ruby bt -a --json -o " + bare_json], core=core)
                harness.assert_no_traceback(out2)
                if not os.path.exists(bare_json):
                    raise Failure("core without binaries: no JSON written:\n" + out2[-3000:])
                compare(target.expected(), harness.read_json(bare_json))
                harness.log("core opened without its binaries: identical too")
        harness.assert_no_traceback(output)
        if not os.path.exists(out_json):
            raise Failure("no JSON written; debugger output:\n" + output[-3000:])
        actual = harness.read_json(out_json)
        n = compare(target.expected(), actual)
        if mode == "live":
            check_selected_thread(debugger, target, workdir)
        if os.path.exists(table_json):
            compare(target.expected(), harness.read_json(table_json))
            harness.log("built-in table layouts/%s.layout: identical too" % version)
        elif mode == "live" and os.path.exists(table):
            raise Failure("no output with --layout %s:\n%s" % (table, output[-2000:]))
        target.assert_left_running()
        harness.log("%s %s %s: %d threads, %d frames identical" % (ruby_spec, debugger, mode,
                                                                   len(actual["threads"]), n))
    finally:
        target.close()


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[2] not in ("gdb", "lldb") or sys.argv[3] not in ("live", "core"):
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2], sys.argv[3], wd))
