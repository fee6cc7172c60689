#!/usr/bin/env python3
"""tools/rbpeek-factsgen.py against the committed tables: regenerating every
built-in table from the public facts (../shared/facts/ruby-structs), the
line supplements (layouts/lines/) and core/src/layout/layout_fields.def
gives exactly the committed layouts/X.Y.Z.layout files, so no table is
stale after an edit to any of the three, and the generator's own checks
(no two members of a struct share bytes outside a union) hold.

usage: test_factsgen.py
Exit status: 0 pass, 1 fail, 77 skip (no rustc, or no facts beside the checkout).
"""
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FACTS = os.path.join(os.path.dirname(ROOT), "shared", "facts", "ruby-structs")


def main():
    rustc = shutil.which("rustc") or os.path.expanduser("~/.cargo/bin/rustc")
    if not os.path.exists(rustc):
        print("skip: no rustc (the generator has rustc compute offsets)")
        return 77
    if not os.path.isdir(FACTS):
        print("skip: no facts at %s" % FACTS)
        return 77
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "rbpeek-factsgen.py"), "--check"],
                       capture_output=True, text=True, timeout=1200)
    print(r.stdout[-3000:])
    if r.returncode != 0:
        print(r.stderr[-3000:])
        print("FAIL: committed tables differ from what the generator makes; run tools/rbpeek-factsgen.py")
        return 1
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
