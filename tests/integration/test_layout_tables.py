"""The DWARF-made reference tables against an independent oracle.

    test_layout_tables.py

For every table in layouts/dwarf/ (whose members the built-in tables made
from public facts must reproduce; see tests/unit/layout) whose Ruby is built with DWARF under
$RBPEEK_RUBIES, gdb loads that libruby (or static ruby) and computes every
member of layout_fields.def from its own type information
(gdb/layout_oracle.py); the table must agree on every member, absent ones
included. This checks the tables without trusting libdwarf or rbpeek's
extractor, which produced them.
"""

import glob
import os
import re
import subprocess

import harness
from harness import Failure


def image_of(version):
    root = os.environ.get("RBPEEK_RUBIES", "/var/cache/rbpeek/rubies")
    libs = sorted(glob.glob(os.path.join(root, version, "lib", "libruby.so.%s" % version)))
    return libs[0] if libs else None


def test(workdir):
    tables = sorted(glob.glob(os.path.join(harness.REPO, "layouts", "dwarf", "*.layout")))
    if not tables:
        raise Failure("no layout tables in layouts/dwarf/")
    oracle = os.path.join(harness.HERE, "gdb", "layout_oracle.py")
    fields_def = os.path.join(harness.REPO, "core", "src", "layout", "layout_fields.def")
    for table in tables:
        version = os.path.basename(table)[:-len(".layout")]
        image = image_of(version)
        if not image:
            raise Failure("no DWARF build of Ruby %s to check layouts/%s.layout against "
                          "(run scripts/build-rubies.sh)" % (version, version))
        r = subprocess.run(["gdb", "-q", "-nx", "-batch", image,
                            "-ex", "set $rbpeek_def = \"%s\"" % fields_def,
                            "-ex", "set $rbpeek_layout = \"%s\"" % table,
                            "-ex", "source " + oracle], capture_output=True, text=True, timeout=600)
        m = re.search(r"ORACLE (\d+) (\d+)", r.stdout)
        if not m:
            raise Failure("gdb oracle failed on %s:\n%s" % (image, (r.stdout + r.stderr)[-2000:]))
        agree, differ = int(m.group(1)), int(m.group(2))
        if differ:
            raise Failure("layouts/dwarf/%s.layout disagrees with gdb on %d members:\n%s"
                          % (version, differ, "\n".join(l for l in r.stdout.splitlines() if "MISMATCH" in l)))
        harness.log("layouts/dwarf/%s.layout: all %d members agree with gdb's DWARF reading of %s"
                    % (version, agree, os.path.basename(image)))


if __name__ == "__main__":
    harness.main(test)
