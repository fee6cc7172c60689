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
  formats   each row of python/rbpeeklib/core/formats.py has its writer in
            rbpeek.h, its option in docs/sampling.md and a section in
            docs/flamegraph.md, and `ruby sample` takes its option

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


def check_formats():
    problems = []
    header = read("core", "include", "rbpeek.h") + read("core", "include", "rbpeek_profile.h")
    sampling, flamegraph = read("docs", "sampling.md"), read("docs", "flamegraph.md")
    sample = [c for c in registry.command_classes() if c.name == "sample"][0]
    for f in FORMATS:
        if not re.search(r"RBPEEK_API\s+rbpeek_status\s+%s\s*\(" % f.writer, header):
            problems.append("%s: rbpeek_profile.h declares no %s" % (f.name, f.writer))
        if "--" + f.name not in sampling:
            problems.append("%s: docs/sampling.md never names --%s" % (f.name, f.name))
        if not re.search(r"^#+ .*%s" % f.name, flamegraph, re.M | re.I):
            problems.append("%s: docs/flamegraph.md has no section on it" % f.name)
        if "--%s FILE" % f.name not in sample.usage:
            problems.append("%s: `ruby sample --help` does not show --%s FILE" % (f.name, f.name))
    return problems, len(FORMATS)


def main():
    cp, nc = check_commands()
    fp, nf = check_formats()
    for p in cp + fp:
        print("FAIL: " + p)
    if cp or fp:
        return 1
    print("%d commands and %d output formats are listed where the docs say" % (nc, nf))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
