"""The native_ext test extension (programs/native_ext/), built at test time
for the Ruby under test, as an extension is built for it: its own mkmf
(extconf.rb) against its own headers (Debian's ruby3.1 from ruby3.1-dev),
into the test's work directory. Nothing built is committed.
"""

import os
import shutil
import subprocess

import harness
from harness import Failure

SOURCE = os.path.join(harness.PROGRAMS, "native_ext")


def build(ruby, workdir):
    """Builds native_ext.so for ruby in workdir; returns its path."""
    for name in os.listdir(SOURCE):
        shutil.copy(os.path.join(SOURCE, name), workdir)
    for step in ([ruby, "extconf.rb"], ["make", "V=1"]):
        r = subprocess.run(step, cwd=workdir, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise Failure("building native_ext for %s failed at %s:\n%s" % (ruby, " ".join(step),
                                                                            (r.stdout + r.stderr)[-3000:]))
    path = os.path.join(workdir, "native_ext.so")
    if not os.path.exists(path):
        raise Failure("building native_ext for %s made no native_ext.so" % ruby)
    return path
