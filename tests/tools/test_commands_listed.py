#!/usr/bin/env python3
"""Every command and every profile output format is where the docs say a
new one goes (docs/design.md, "Where a new command or output format
goes"), so none is left out of a list:

  commands  each name of COMMANDS (python/rbpeeklib/commands/__init__.py)
            is a module with its Command (the registry builds them all),
            and is named in that package's docstring, in docs/design.md's
            list, in docs/usage.md (`ruby NAME`) and in the man page
            (docs/man/rbpeek.1); no module of the package defines a
            command COMMANDS leaves out
  formats   python/rbpeeklib/core/formats.py's table is the one list of
            formats: rbpeek_profile.h's writers, the `--NAME FILE` rows of
            docs/sampling.md's options and every list of the formats in
            the docs (between <!-- formats --> and <!-- /formats -->, or
            the man page's `.\" formats` lines: README.md, usage.md,
            flamegraph.md, rbpeek.1, one item a format in the table's
            order) are its formats, no more, no fewer; each has a section
            in docs/flamegraph.md, `ruby sample` takes its option, and the
            command line refuses it with several processes (cli_multi.py)

  placement docs/design.md says where a new command and a new output format
            go, and docs/versions.md's "Adding a release" what a new release
            needs: every file, folder and test those two sections name
            exists, and the checklist has a step for each group of release
            facts (each member of struct rbp_release in context/release.h)
  versions  release versions are compared only where versions.md says:
            context/release.c and layout/ (no ver_major/ver_minor/patch
            comparison anywhere else in core/src or tests/fuzz, no
            version tuple comparison in python/)

usage: test_commands_listed.py
Exit status: 0 pass, 1 fail.
"""
import importlib
import os
import pkgutil
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

import rbpeeklib.commands as commands  # noqa: E402
from rbpeeklib.commands import registry  # noqa: E402
from rbpeeklib.commands.base import Command  # noqa: E402
from rbpeeklib.core.formats import FORMATS  # noqa: E402


def read(*parts):
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def check_commands():
    problems = []
    classes = registry.command_classes()
    names = [c.name for c in classes]
    if list(names) != list(commands.COMMANDS):
        problems.append("the registry builds %s, COMMANDS says %s" % (names, commands.COMMANDS))
    design = read("docs", "design.md")
    block = re.search(r"commands/<name>\.py(.*?)commands/base\.py", design, re.S)
    usage, man = read("docs", "usage.md"), read("docs", "man", "rbpeek.1")
    for name in commands.COMMANDS:
        if "%s.py" % name not in commands.__doc__:
            problems.append("%s: not in commands/__init__.py's list" % name)
        if not block or not re.search(r"\b%s\b" % name, block.group(1)):
            problems.append("%s: not in docs/design.md's list of commands" % name)
        if not re.search(r"ruby %s\b" % name, usage):
            problems.append("%s: docs/usage.md never shows `ruby %s`" % (name, name))
        if not re.search(r"^\.BI? %s\b" % name, man, re.M):
            problems.append("%s: not in the man page's COMMANDS (docs/man/rbpeek.1)" % name)
    for info in pkgutil.iter_modules(commands.__path__):
        module = importlib.import_module("rbpeeklib.commands." + info.name)
        for c in vars(module).values():
            if isinstance(c, type) and issubclass(c, Command) and c is not Command and c.name not in commands.COMMANDS:
                problems.append("commands/%s.py defines `ruby %s`, which COMMANDS leaves out" % (info.name, c.name))
    return problems, len(names)


# Where the docs list the formats: each list stands between these markers
# (Markdown comments; in the man page, comment lines), one item a format,
# in the table's order.
FORMAT_LISTS = re.compile(r"<!-- formats -->(.*?)<!-- /formats -->|^\.\\\" formats\b[^\n]*\n(.*?)\n\.\\\" /formats$",
                          re.S | re.M)
LISTED_IN = ("README.md", "docs/usage.md", "docs/flamegraph.md", "docs/sampling.md", "docs/man/rbpeek.1")
MUST_LIST = ("docs/usage.md", "docs/flamegraph.md", "docs/man/rbpeek.1")


def format_lists(names):
    """Every marked list of the formats against the table's names: each
    item names its format, as many items as formats."""
    problems, lists = [], 0
    for where in LISTED_IN:
        found = [m.group(1) or m.group(2) for m in FORMAT_LISTS.finditer(read(*where.split("/")))]
        if not found and where in MUST_LIST:
            problems.append("%s lists no formats (between <!-- formats --> and <!-- /formats -->)" % where)
        for text in found:
            lists += 1
            items = [i for i in re.split(r",\s*(?:or\s+|and\s+)?|\s+or\s+|\s+and\s+", " ".join(text.split())) if i]
            named = [i for i, name in zip(items, names) if re.search(r"\b%s\b" % name, i, re.I)]
            if len(items) != len(names) or len(named) != len(names):
                problems.append("%s lists the formats as %r; formats.py has %s, in that order"
                                % (where, items, ", ".join(names)))
    return problems, lists


def check_formats():
    """formats.py's table is the one list of formats: the C writers, the
    options `ruby sample` takes and docs/sampling.md's table shows, the
    flamegraph.md sections and every list in the docs have each of its
    formats and no other; the command line refuses each format's file
    with several processes."""
    from rbpeeklib import cli_multi
    problems = []
    names = [f.name for f in FORMATS]
    header = read("core", "include", "rbpeek.h") + read("core", "include", "rbpeek_profile.h")
    sampling, flamegraph = read("docs", "sampling.md"), read("docs", "flamegraph.md")
    sample = [c for c in registry.command_classes() if c.name == "sample"][0]
    for f in FORMATS:
        if not re.search(r"RBPEEK_API\s+rbpeek_status\s+%s\s*\(" % f.writer, header):
            problems.append("%s: rbpeek_profile.h declares no %s" % (f.name, f.writer))
        if not re.search(r"^#+ .*%s" % f.name, flamegraph, re.M | re.I):
            problems.append("%s: docs/flamegraph.md has no section on it" % f.name)
        if "--%s FILE" % f.name not in sample.usage:
            problems.append("%s: `ruby sample --help` does not show --%s FILE" % (f.name, f.name))
        if "--" + f.name not in cli_multi.ONE_FILE:
            problems.append("%s: the command line (cli_multi.py) would take --%s FILE with several processes"
                            % (f.name, f.name))
    for what, found in (("rbpeek_profile.h's writers", re.findall(r"RBPEEK_API\s+rbpeek_status\s+"
                                                                  r"rbpeek_profile_write_(\w+)\s*\(", header)),
                        ("docs/sampling.md's options", re.findall(r"^\| `--(\w+) FILE` \|", sampling, re.M))):
        if sorted(found) != sorted(names):
            problems.append("%s are %s; formats.py has %s" % (what, ", ".join(sorted(found)), ", ".join(names)))
    lp, nlists = format_lists(names)
    return problems + lp, len(FORMATS), nlists


def section(text, title):
    """A markdown section's text, from its title to the next title of its
    level or above."""
    m = re.search(r"^(#+) %s\s*$" % re.escape(title), text, re.M)
    if not m:
        return None
    end = re.search(r"^#{1,%d} " % len(m.group(1)), text[m.end():], re.M)
    return text[m.end():m.end() + end.start()] if end else text[m.end():]


def tracked_files():
    import subprocess
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, timeout=60).stdout
    except OSError:
        out = ""
    if out.strip():
        return out.split()
    found = []   # not a git checkout (an exported tree): walk it
    for root, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "build"]
        found += [os.path.relpath(os.path.join(root, f), ROOT) for f in files]
    return found


def named_paths_exist(where, text, files):
    """Every path, folder and ctest test a docs section names in backticks
    exists: paths relative to the tree, to core/src, core/include or
    python/rbpeeklib, or a file name found once in the tree; placeholders
    (NAME, X.Y, <...>) and paths outside the tree are not checked."""
    problems = []
    roots = ("", "core/src/", "core/include/", "python/rbpeeklib/")
    dirs = {os.path.dirname(f) + "/" for f in files}
    dirs |= {d[:i + 1] for d in dirs for i in range(len(d)) if d[i] == "/"}
    for tok in re.findall(r"`([^`\s]+)`", text):
        if any(x in tok for x in ("NAME", "X.Y", "<", "*", "(")) or tok.startswith(".."):
            continue
        m = re.fullmatch(r"(unit|tool)\.(\w+)", tok)
        if m:
            ok = (any(f.endswith("/%s.c" % m.group(2)) for f in files if f.startswith("tests/unit/"))
                  if m.group(1) == "unit" else "NAME %s" % tok in read("tests", "CMakeLists.txt"))
            if not ok:
                problems.append("%s names the test %s, which does not exist" % (where, tok))
            continue
        if "/" not in tok and not re.search(r"\.(c|h|py|md|def|sh|1|txt)$", tok):
            continue
        if tok.endswith("/"):
            ok = any(r + tok in dirs for r in roots)
        else:
            ok = any(r + tok in files for r in roots) or \
                ("/" not in tok and sum(os.path.basename(f) == tok for f in files) == 1)
        if not ok:
            problems.append("%s names %s, which is not in the tree" % (where, tok))
    return problems


# The steps of versions.md's checklist, by member of struct rbp_release
RELEASE_GROUPS = {"obj": "objects", "gc": "the GC", "frames": "frames", "inspect": "#inspect",
                  "dump": "dump_all"}


def check_placement():
    problems = []
    files = tracked_files()
    design = section(read("docs", "design.md"), "Where a new command or output format goes")
    if design is None:
        problems.append('docs/design.md has no section "Where a new command or output format goes"')
    else:
        design = design.split("\n\n" + "The library is loaded")[0]
        for what, must in (("- **A command**", "commands/__init__.py"),
                           ("- **A profile output format**", "core/formats.py")):
            if what not in design or must not in design:
                problems.append("docs/design.md's placement section lacks %s (naming %s)" % (what, must))
        problems += named_paths_exist("docs/design.md (where a new command or format goes)", design, files)
    checklist = section(read("docs", "versions.md"), "Adding a release")
    if checklist is None:
        problems.append('docs/versions.md has no section "Adding a release"')
        return problems
    problems += named_paths_exist("docs/versions.md (adding a release)", checklist, files)
    release = read("core", "src", "context", "release.h")
    body = re.search(r"typedef struct rbp_release \{(.*?)\} rbp_release;", release, re.S)
    members = re.findall(r"rbp_\w+_rules (\w+);", body.group(1)) if body else []
    if not members:
        problems.append("context/release.h: no struct rbp_release with groups of rules")
    for m in members:
        step = RELEASE_GROUPS.get(m)
        if step is None:
            problems.append("release.h's group %s: give it a step in versions.md's checklist, and its name "
                            "in RELEASE_GROUPS here" % m)
        elif not re.search(r"^\s*- %s\b" % re.escape(step), checklist, re.M):
            problems.append("docs/versions.md's checklist has no step for release.h's %s (%s)" % (m, step))
    return problems


def check_versions():
    """Version numbers are compared only in context/release.c and layout/."""
    problems = []
    cmp_c = re.compile(r"(ver_(major|minor|patch)|rel(\.|->)(major|minor|patch))\s*(==|!=|<=|>=|<|>)|"
                       r"(?<!-)(==|!=|<=|>=|<|>)\s*[\w>.-]*(ver_(major|minor|patch)|rel(\.|->)(major|minor|patch))\b|"
                       r"\brbp_ver_ge\s*\(")
    cmp_py = re.compile(r"\)\s*(>=|<=|<|>)\s*\(\d+,\s*\d+\)|\(\d+,\s*\d+\)\s*(>=|<=|<|>)\s*\(")
    n = 0
    for top, pattern, exts in (("core/src", cmp_c, (".c", ".h")), ("tests/fuzz", cmp_c, (".c", ".h")),
                               ("python", cmp_py, (".py",))):
        for root, _dirs, names in os.walk(os.path.join(ROOT, top)):
            for name in names:
                if not name.endswith(exts):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, ROOT)
                if rel == "core/src/context/release.c" or rel.startswith("core/src/layout/"):
                    continue
                n += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for i, line in enumerate(f, 1):
                        if pattern.search(line):
                            problems.append("%s:%d compares release versions (ask context/release.h's facts): %s"
                                            % (rel, i, line.strip()))
    return problems, n


def main():
    cp, nc = check_commands()
    fp, nf, nlists = check_formats()
    pp = check_placement()
    vp, nv = check_versions()
    for p in cp + fp + pp + vp:
        print("FAIL: " + p)
    if cp or fp or pp or vp:
        return 1
    print("%d commands and %d output formats are listed where the docs say (the formats in %d lists)"
          % (nc, nf, nlists))
    print("design.md's placement section and versions.md's checklist name files that exist, one step per "
          "group of release facts")
    print("no release version comparison in %d files outside context/release.c and layout/" % nv)
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
