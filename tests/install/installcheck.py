"""Shared checks of an installed rbpeek tree (test_install_prefix.py and
test_install_deb.py): its file list against this configuration's layout
(layout.json, written by CMakeLists.txt), and `ruby bt -a --json` from the
installed plugins compared with what Debian's ruby3.1 says of itself, in a
debugger that is given no path into the source tree; the installed command
line's `bt --native`, with the installed unwinder.
"""

import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))

import harness  # noqa: E402
import test_bt  # noqa: E402
from harness import Failure, SkipTest  # noqa: E402

RUBY = "/usr/bin/ruby3.1"


def load_layout(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def clean_env(**extra):
    """The environment of an installed tool: nothing that points into the
    source or build tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RBPEEK_") and k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(extra)
    return env


def expected_files(layout):
    """Paths (relative to the prefix) an install must hold."""
    d, lib = layout["datadir"], layout["libdir"]
    files = [os.path.join(lib, "librbpeek.so." + layout["soversion"]), os.path.join(lib, layout["unwinder"]),
             os.path.join(lib, "librbpeek.a"),
             os.path.join(lib, "pkgconfig", "rbpeek.pc"), os.path.join(layout["includedir"], "rbpeek.h"),
             os.path.join(d, "gdb-plugin", "rbpeek.py"), os.path.join(d, "lldb-plugin", "rbpeek.py"),
             os.path.join(d, "python", "rbpeeklib", "core", "install_paths.py")]
    for tool in layout["tools"]:
        files += [os.path.join(layout["bindir"], tool), os.path.join(layout["mandir"], "man1", tool + ".1")]
    # Every module of the Python package, as the source tree has them now.
    src = os.path.join(REPO, "python")
    for py in glob.glob(os.path.join(src, "rbpeeklib", "**", "*.py"), recursive=True):
        files.append(os.path.join(d, "python", os.path.relpath(py, src)))
    if layout["pymodules"]:
        files.append(os.path.join(layout["pymodules"], "rbpeek.py"))
    if layout["autoload"] and os.path.exists(RUBY):
        # This machine's ruby3.1 and its libruby, by the real names gdb looks up.
        libruby = subprocess.run(["ldd", RUBY], capture_output=True, text=True).stdout
        paths = [RUBY] + [os.path.realpath(w) for w in libruby.split() if "/libruby" in w]
        files += [layout["autoload"] + os.path.realpath(p) + "-gdb.py" for p in paths]
    return files


def check_tree(prefix, layout):
    """Fails unless every expected file is under prefix, executables are
    executable, and no byte-compiled or build-tree leftovers came along."""
    missing = [f for f in expected_files(layout) if not os.path.exists(os.path.join(prefix, f))]
    if missing:
        raise Failure("missing from %s:\n  %s" % (prefix, "\n  ".join(missing)))
    for tool in layout["tools"]:
        if not os.access(os.path.join(prefix, layout["bindir"], tool), os.X_OK):
            raise Failure("%s is not executable" % tool)
    stray = []
    for root, dirs, names in os.walk(prefix):
        for n in dirs + names:
            if n == "__pycache__" or n.endswith(".pyc") or n == "CMakeFiles":
                stray.append(os.path.join(root, n))
    if stray:
        raise Failure("stray files installed:\n  %s" % "\n  ".join(stray))
    harness.log("file list: all %d expected files present, nothing stray" % len(expected_files(layout)))


def start_target(workdir):
    if not os.path.exists(RUBY):
        raise SkipTest("%s is not installed (scripts/install-deps.sh installs it)" % RUBY)
    return harness.Target(RUBY, "bt_scenarios.rb", workdir)


def run(argv, env, cwd, timeout=300):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL, env=env,
                       cwd=cwd, errors="replace")
    return r.returncode, r.stdout + r.stderr


def check_bt(target, out_json, output, what):
    """`ruby bt -a --json -o out_json` must equal the target's own record."""
    harness.assert_no_traceback(output)
    if not os.path.exists(out_json):
        raise Failure("%s: no JSON written; output:\n%s" % (what, output[-3000:]))
    n = test_bt.compare(target.expected(), harness.read_json(out_json))
    harness.log("%s: ruby bt -a identical to the target's backtrace_locations (%d frames)" % (what, n))


def check_cli(prefix, layout, target, workdir):
    """The installed `rbpeek bt -a --json --pid` must equal the target's record."""
    out_json = os.path.join(workdir, "cli.json")
    cli = os.path.join(prefix, layout["bindir"], "rbpeek")
    rc, out = run([cli, "bt", "-a", "--json", "-o", out_json, "--pid", str(target.pid)], clean_env(), workdir)
    if rc != 0:
        raise Failure("%s bt failed (exit %d):\n%s" % (cli, rc, out[-2000:]))
    check_bt(target, out_json, out, "the installed rbpeek command line")
    rc, out = run([cli, "info", "--pid", str(target.pid)], clean_env(), workdir)
    check_library(out, prefix, "rbpeek info")
    check_unwinder(cli, prefix, layout, target, workdir)


def check_unwinder(cli, prefix, layout, target, workdir):
    """`rbpeek bt --native` must load the installed unwinder, by its soname,
    from beside the installed librbpeek (the dynamic loader's own account:
    LD_DEBUG=files), and show machine frames with it."""
    out_json = os.path.join(workdir, "native.json")
    rc, out = run([cli, "bt", "--native", "--json", "-o", out_json, "--pid", str(target.pid)],
                  clean_env(LD_DEBUG="files"), workdir)
    want = os.path.join(prefix, layout["libdir"], layout["unwinder"])
    loaded = re.findall(r"file=(.*librbpeek-unwind[^/\n]*) \[0\];\s+dynamically loaded by", out)
    if rc != 0 or [os.path.realpath(p) for p in loaded] != [os.path.realpath(want)]:
        raise Failure("%s bt --native (exit %d) loaded the unwinder from %s, want %s:\n%s"
                      % (cli, rc, loaded or "nowhere", want, out[-2000:]))
    frames = [f for t in harness.read_json(out_json)["threads"] for f in t["frames"] if f["kind"] == "native"]
    if not frames:
        raise Failure("%s bt --native: no machine frame with the installed unwinder" % cli)
    harness.log("the installed rbpeek bt --native: %s loaded, %d machine frames" % (layout["unwinder"], len(frames)))


def check_man_pages(prefix, layout):
    """Each installed tool's man page names every option its --help lists
    (and, for rbpeek, every command), so the pages cannot silently fall
    behind the tools."""
    problems = []
    for tool in layout["tools"]:
        rc, help_text = run([os.path.join(prefix, layout["bindir"], tool), "--help"], clean_env(), prefix)
        if rc != 0:
            problems.append("%s --help exited %d" % (tool, rc))
            continue
        with open(os.path.join(prefix, layout["mandir"], "man1", tool + ".1"), encoding="utf-8") as f:
            page = f.read().replace("\\-", "-")
        words = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text))
        if tool == "rbpeek":  # the command list: "  NAME  summary" lines
            words |= {m for m in re.findall(r"^  ([a-z]+)  ", help_text, re.M)}
        missing = sorted(w for w in words if not re.search(r"(?<![\w-])%s(?![\w-])" % re.escape(w), page))
        if missing:
            problems.append("%s.1 lacks %s" % (tool, ", ".join(missing)))
    if problems:
        raise Failure("man pages behind their tools: " + "; ".join(problems))
    harness.log("man pages: every option (and command) of %s is in its page" % ", ".join(layout["tools"]))


def check_library(output, prefix, what):
    """`ruby info` must name the installed librbpeek under prefix."""
    lines = [ln for ln in output.splitlines() if ln.startswith("Library:")]
    if not lines:
        raise Failure("%s: ruby info printed no Library line:\n%s" % (what, output[-2000:]))
    path = lines[0].split(None, 1)[1].strip()
    if not os.path.realpath(path).startswith(os.path.realpath(prefix) + os.sep):
        raise Failure("%s: the plugin loaded %s, not the library installed under %s" % (what, path, prefix))
    harness.log("%s: librbpeek loaded from the install (%s)" % (what, path))
