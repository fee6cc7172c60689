"""`cmake --install --prefix` into a temporary directory, then moved
elsewhere (an installed tree must not depend on its prefix), then used:

- the file list (installcheck.check_tree), and each man page naming every
  option of its tool's --help;
- gdb with `source <prefix>/share/rbpeek/gdb-plugin/rbpeek.py` (the line
  docs/install.md gives for Rubies the auto-load stubs do not name), gdb
  with the prefix's auto-load directory added (its other route), and
  lldb-16 with `command script import <prefix>/.../lldb-plugin/rbpeek.py`:
  `ruby bt -a` equals what Debian's ruby3.1 records of itself, and
  `ruby info` names the librbpeek under the moved prefix;
- bin/rbpeek (the command line, a link into share/rbpeek/tools): `rbpeek bt
  -a --json --pid` equals the target's record too;
- pkg-config: public_api_bt.c (rbpeek.h's API only) built against the
  prefix, once with the shared and once with the static library, reads the
  same process: its JSON equals the target's record too.

    test_install_prefix.py BUILD_DIR LAYOUT_JSON [CPACK]
"""

import os
import shlex
import shutil
import subprocess
import sys

import installcheck
from installcheck import Failure, harness


def pkg_config(prefix, layout, *args):
    env = installcheck.clean_env(PKG_CONFIG_PATH=os.path.join(prefix, layout["libdir"], "pkgconfig"))
    r = subprocess.run(["pkg-config"] + list(args) + ["rbpeek"], capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise Failure("pkg-config %s rbpeek failed: %s" % (" ".join(args), r.stderr.strip()))
    return shlex.split(r.stdout)  # pkg-config escapes the space in the prefix


def check_pkg_config(prefix, layout, target, workdir):
    src = os.path.join(installcheck.HERE, "public_api_bt.c")
    cflags = pkg_config(prefix, layout, "--cflags")
    libdir = os.path.join(prefix, layout["libdir"])
    builds = {
        "shared": cflags + pkg_config(prefix, layout, "--libs") + ["-Wl,-rpath," + libdir],
        # -Bstatic around -lrbpeek picks librbpeek.a; --static adds its own dependencies.
        "static": cflags + [w for a in pkg_config(prefix, layout, "--static", "--libs")
                            for w in (["-Wl,-Bstatic", a, "-Wl,-Bdynamic"] if a == "-lrbpeek" else [a])],
    }
    for kind, flags in builds.items():
        exe = os.path.join(workdir, "public_api_bt-" + kind)
        argv = ["cc", "-std=c11", "-o", exe, src] + flags
        rc, out = installcheck.run(argv, installcheck.clean_env(), workdir)
        if rc != 0:
            raise Failure("building public_api_bt.c against the install (%s) failed:\n%s" % (kind, out[-3000:]))
        needed = subprocess.run(["ldd", exe], capture_output=True, text=True).stdout
        uses_so = "librbpeek.so" in needed
        if uses_so != (kind == "shared") or (uses_so and libdir not in needed):
            raise Failure("public_api_bt built %s links librbpeek wrongly:\n%s" % (kind, needed))
        out_json = os.path.join(workdir, "bt-%s.json" % kind)
        with open(out_json, "w") as f:
            r = subprocess.run([exe, str(target.pid)], stdout=f, stderr=subprocess.PIPE,
                               text=True, env=installcheck.clean_env(), timeout=120)
        if r.returncode != 0:
            raise Failure("public_api_bt built %s against the install failed: %s" % (kind, r.stderr.strip()))
        installcheck.check_bt(target, out_json, r.stderr, "public_api_bt.c via pkg-config (%s)" % kind)


def test(build, layout_path, workdir):
    layout = installcheck.load_layout(layout_path)
    target = installcheck.start_target(workdir)
    try:
        first = os.path.join(workdir, "first-prefix")
        rc, out = installcheck.run(["cmake", "--install", build, "--prefix", first], installcheck.clean_env(), workdir)
        if rc != 0:
            raise Failure("cmake --install failed:\n" + out[-3000:])
        prefix = os.path.join(workdir, "moved prefix")  # a space, too
        shutil.move(first, prefix)
        installcheck.check_tree(prefix, layout)
        installcheck.check_man_pages(prefix, layout)

        env = installcheck.clean_env()
        gdb_plugin = os.path.join(prefix, layout["datadir"], "gdb-plugin", "rbpeek.py")
        out_json = os.path.join(workdir, "gdb.json")
        rc, out = installcheck.run(["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off",
                                    "-ex", "source " + gdb_plugin, "-p", str(target.pid),
                                    "-ex", "ruby bt -a --json -o " + out_json, "-ex", "ruby info"], env, workdir)
        installcheck.check_bt(target, out_json, out, "gdb, plugin sourced from the prefix")
        installcheck.check_library(out, prefix, "gdb")

        if layout["autoload"]:
            # docs/install.md's other route: gdb's auto-loading pointed at the prefix.
            autoload = os.path.join(prefix, layout["autoload"])
            out_json = os.path.join(workdir, "gdb-autoload.json")
            rc, out = installcheck.run(["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off",
                                        "-iex", "add-auto-load-scripts-directory " + autoload,
                                        "-iex", "add-auto-load-safe-path " + autoload, "-p", str(target.pid),
                                        "-ex", "ruby bt -a --json -o " + out_json], env, workdir)
            installcheck.check_bt(target, out_json, out, "gdb, auto-loading from the prefix's stubs")

        lldb_plugin = os.path.join(prefix, layout["datadir"], "lldb-plugin", "rbpeek.py")
        out_json = os.path.join(workdir, "lldb.json")
        rc, out = installcheck.run([harness.LLDB, "--no-lldbinit", "-b", "-p", str(target.pid),
                                    "-o", 'command script import "%s"' % lldb_plugin,
                                    "-o", "ruby bt -a --json -o " + out_json, "-o", "ruby info"], env, workdir)
        installcheck.check_bt(target, out_json, out, "lldb, plugin imported from the prefix")
        installcheck.check_library(out, prefix, "lldb")

        installcheck.check_cli(prefix, layout, target, workdir)
        check_pkg_config(prefix, layout, target, workdir)
        target.assert_left_running()
    finally:
        target.close()


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    harness.main(lambda wd: test(os.path.abspath(sys.argv[1]), sys.argv[2], wd))
