"""`ruby bt -a --json` against the target's own backtrace_locations.

    test_bt.py RUBY [COMBO...]      e.g. test_bt.py 3.4.5, test_bt.py 3.4.5 lldb.core

RUBY is a matrix name (see harness.ruby_binary). programs/bt_scenarios.rb
is started once and gcore'd once (matrix.py), and read in every
combination: gdb and lldb, live (attached to the parked process) and on
the core, and the command line (`rbpeek bt --pid`, `--core` with and
without `--exe`). Every recorded thread must be found, and every frame's
label, path, absolute_path and line number must be equal, in order.
Live, the debuggers also walk with the version's built-in table and show
the selected thread alone, and lldb also runs with the plugin imported
before the attach (its symbols then loaded lazily); gdb also opens the core with no binaries (ELF
symbols only); the command line also runs threads, locks and info. The
target must be left running.
"""

import os
import sys

import harness
from harness import Failure
import matrix


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


def check_selected_thread(c, name="deep"):
    """`ruby bt` without -a shows the debugger's selected thread: select the
    Ruby thread NAME by the number `ruby threads` gives it, then compare."""
    threads_json = c.path("threads.json")
    rc, output = c.run_debugger(["ruby threads --json -o " + threads_json])
    harness.assert_no_traceback(output)
    listed = harness.read_json(threads_json)["threads"]
    num = next((t["debugger_thread"] for t in listed if t["name"] == name), None)
    if num is None:
        raise Failure("ruby threads gives no debugger thread number for %r:\n%s" % (name, listed))
    one_json = c.path("one.json")
    select = "thread %d" % num if c.debugger == "gdb" else "thread select %d" % num
    rc, output = c.run_debugger([select, "ruby bt --json -o " + one_json])
    harness.assert_no_traceback(output)
    if not os.path.exists(one_json):
        raise Failure("ruby bt on the selected thread %d wrote nothing:\n%s" % (num, output[-2000:]))
    one = harness.read_json(one_json)
    if len(one["threads"]) != 1 or one["threads"][0]["name"] != name:
        raise Failure("ruby bt on thread %d showed %s, not %r" % (num, [t["name"] for t in one["threads"]], name))
    expected = dict(c.target.expected())
    expected["threads"] = [t for t in expected["threads"] if t["name"] == name]
    compare(expected, one)
    harness.log("ruby bt on the selected thread (%d, %r): identical" % (num, name))


def check_plugin_first(c, expected):
    """lldb with the plugin imported before the attach (~/.lldbinit, -O):
    the plugin has turned target.preload-symbols off, so lldb attached
    without loading every module's symbols (docs/performance.md); the
    backtraces must be the same."""
    if c.debugger != "lldb":
        return
    out_json = c.path("rbpeek-plugin-first.json")
    rc, output = harness.run_debugger(c.debugger, ["settings show target.preload-symbols",
                                                   "ruby bt -a --json -o " + out_json],
                                      pid=c.target.pid, plugin_first=True)
    harness.assert_no_traceback(output)
    if "target.preload-symbols (boolean) = false" not in output:
        raise Failure("lldb still preloads symbols after the plugin's import:\n" + output[-2000:])
    if not os.path.exists(out_json):
        raise Failure("plugin imported before the attach: no JSON written:\n" + output[-3000:])
    compare(expected, harness.read_json(out_json))
    harness.log("plugin imported before the attach (lldb's symbols loaded lazily): identical too")


def check_debugger(c):
    expected = c.target.expected()
    out_json = c.path("rbpeek.json")
    cmd = "ruby bt -a --json -o " + out_json
    # Live, also walk with the built-in table of this version (a Ruby with
    # DWARF would otherwise never exercise it): it must give the same.
    version = expected["ruby_version"]
    table = os.path.join(harness.REPO, "layouts", version + ".layout")
    table_json = c.path("rbpeek-table.json")
    if c.live:
        cmds = [cmd] + (["ruby bt -a --json -o %s --layout %s" % (table_json, table)] if os.path.exists(table) else [])
        rc, output = c.run_debugger(cmds)
    else:
        rc, output = c.run_debugger([cmd])
        # gdb given the core alone has no symbols for libruby: rbpeek must
        # fall back to the ELF symbol tables of the mapped images.
        if c.debugger == "gdb":
            bare_json = c.path("rbpeek-bare.json")
            rc2, out2 = harness.run_debugger(c.debugger, ["ruby bt -a --json -o " + bare_json], core=c.core)
            harness.assert_no_traceback(out2)
            if not os.path.exists(bare_json):
                raise Failure("core without binaries: no JSON written:\n" + out2[-3000:])
            compare(expected, harness.read_json(bare_json))
            harness.log("core opened without its binaries: identical too")
    harness.assert_no_traceback(output)
    if not os.path.exists(out_json):
        raise Failure("no JSON written; debugger output:\n" + output[-3000:])
    actual = harness.read_json(out_json)
    n = compare(expected, actual)
    if c.live:
        check_selected_thread(c)
        check_plugin_first(c, expected)
    if os.path.exists(table_json):
        compare(expected, harness.read_json(table_json))
        harness.log("built-in table layouts/%s.layout: identical too" % version)
    elif c.live and os.path.exists(table):
        raise Failure("no output with --layout %s:\n%s" % (table, output[-2000:]))
    harness.log("%d threads, %d frames identical" % (len(actual["threads"]), n))


def check_cli(c):
    """rbpeek bt (and threads, locks, info) from the command line."""
    expected = c.target.expected()
    cli = harness.cli
    if c.live:
        pid = str(c.target.pid)
        n = compare(expected, harness.strict_json(cli(["bt", "-a", "--json", "--pid", pid], raw=True)[0]))
        harness.log("rbpeek bt --pid: %d frames identical" % n)
        # Without -a: the main thread, as gdb -p selects it; text as Ruby prints it.
        out, _ = cli(["bt", "--pid", pid])
        main = next(t for t in expected["threads"] if t["main"])
        if not out.startswith("Thread 1 (main") or "%s:%d:in " % (main["frames"][0]["path"],
                                                                  main["frames"][0]["lineno"]) not in out:
            raise Failure("rbpeek bt (no -a) did not show the main thread's stack:\n" + out[-2000:])
        harness.strict_json(cli(["locks", "--json", "--pid", pid], raw=True)[0])
        info, _ = cli(["info", "--pid", pid])
        if "Ruby version:  %s" % expected["ruby_version"] not in info or "/proc/%s/mem" % pid not in info:
            raise Failure("rbpeek info --pid:\n" + info)
        return
    path = c.path("bt.json")
    out, err = cli(["bt", "-a", "--json", "-o", path] + c.where())
    if "rbpeek: wrote " + path not in err + out:
        raise Failure("rbpeek bt -o did not say it wrote %s" % path)
    n = compare(expected, harness.read_json(path))
    out, _ = cli(["bt", "-a", "--json", "--core", c.core], raw=True)   # the core alone: ELF symbols only
    compare(expected, harness.strict_json(out))
    harness.log("rbpeek bt --core (with and without --exe): %d frames identical" % n)
    # threads runs too, and names the same threads as bt.
    doc = harness.strict_json(cli(["threads", "--json", "--core", c.core], raw=True)[0])
    names = sorted(t["name"] or "<main>" for t in doc["threads"] if t["name"] != "rbpeek-recorder")
    want = sorted(t["name"] if not t["main"] else "<main>" for t in expected["threads"])
    if names != want:
        raise Failure("rbpeek threads --core: threads %s, Ruby has %s" % (names, want))


def check(c):
    (check_cli if c.debugger == "cli" else check_debugger)(c)


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    m.run("bt_scenarios.rb", check, combos=matrix.WITH_CLI, parallel=True)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
