"""The Debian package: `cpack -G DEB` from the build, then

- cpack's run: no warning (a shared object without a soname gave one);
- its control fields: Depends names python3 and the package of every shared
  library its ELF files need (as this machine's dpkg says: libc6, libdwarf1,
  libelf1, ...; CPack has them from dpkg-shlibdeps), Recommends gdb,
  Suggests lldb-16;
- its file list: everything under /usr, and `dpkg -x` into a scratch root
  gives the installcheck file list;
- gdb as installed: the scratch root's usr/share/gdb/auto-load stands in
  for gdb's default $datadir/auto-load (scripts-directory and safe-path set
  to it, nothing else), NO source command: attached to Debian's ruby3.1,
  `ruby bt -a` must equal what the target records of itself, and the
  script gdb ran must be the stub for /usr/bin/ruby3.1 in the root;
- a source tree's plugin `source`d in such a gdb (after the stub ran) is
  the one in use: its rbpeeklib replaces the installed one;
- lldb-16 as installed: the root's usr/lib/python3/dist-packages put on
  lldb's Python path (where Debian's /usr/lib/python3/dist-packages is),
  then the one documented line `command script import rbpeek`;
- /usr/bin/rbpeek from the root: `rbpeek bt -a --json --pid` too, and
  `bt --native`, which must load the root's unwinder by its soname;
- its maintainer scripts, in a second scratch root that `dpkg --root -i`
  installs the package into (so its postinst runs, with DPKG_ROOT set):
  postinst byte-compiles every module of the Python package for
  /usr/bin/python3, whose `rbpeek bt --pid` from that root then compiles
  none; prerm removes every byte-compiled file again, so only the
  package's own files are left; the shlibs file names librbpeek and the
  unwinder by their sonames; the triggers file has libc-bin run
  ldconfig (CPack's postinst, which ran it, is replaced by ours).

    test_install_deb.py BUILD_DIR LAYOUT_JSON CPACK
"""

import glob
import os
import re
import subprocess
import sys

import installcheck
from installcheck import Failure, harness


def deb_field(deb, name):
    r = subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True)
    return r.stdout.strip()


def owner(path):
    """The Debian package holding a library ldd resolved (dpkg knows a
    merged-/usr path under one of its two names)."""
    for cand in (path, "/usr" + path, path[len("/usr"):] if path.startswith("/usr/") else None):
        if cand:
            r = subprocess.run(["dpkg", "-S", cand], capture_output=True, text=True)
            if r.returncode == 0:
                return r.stdout.split(":")[0].split(",")[0].strip()
    return None


def needed_packages(root):
    """The packages of the shared libraries the package's ELF files need."""
    pkgs = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            path = os.path.join(dirpath, n)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                if f.read(4) != b"\x7fELF":
                    continue
            # The libraries the file itself names (DT_NEEDED), as
            # dpkg-shlibdeps reads them: what those need in turn is their
            # own packages' Depends (ldd lists the whole closure: libdw's
            # libbz2 and liblzma are libdw1's to depend on).
            dyn = subprocess.run(["readelf", "-d", path], capture_output=True, text=True).stdout
            needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
            ldd = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
            for line in ldd.splitlines():
                parts = line.split("=>")
                lib = parts[1].split("(")[0].strip() if len(parts) == 2 else ""
                if parts[0].strip() not in needed:
                    continue
                if lib.startswith("/") and not lib.startswith(root):
                    pkgs.setdefault(owner(lib) or "?" + lib, os.path.relpath(path, root))
    return pkgs


def check_control(deb, root):
    depends = deb_field(deb, "Depends")
    names = {alt.split()[0] for dep in depends.split(",") for alt in dep.split("|") if alt.strip()}
    needed = needed_packages(root)
    missing = ["%s (for %s)" % (p, f) for p, f in sorted(needed.items()) if p not in names]
    if "python3" not in names:
        missing.append("python3")
    if missing:
        raise Failure("Depends (%r) lacks: %s" % (depends, ", ".join(missing)))
    for field, want in (("Recommends", "gdb"), ("Suggests", "lldb-16"), ("Architecture", "amd64"),
                        ("Package", "rbpeek")):
        if want not in [v.strip().split()[0] for v in deb_field(deb, field).split(",") if v.strip()]:
            raise Failure("%s lacks %s: %r" % (field, want, deb_field(deb, field)))
    harness.log("control: Depends: %s (covers %s); Recommends: %s; Suggests: %s"
                % (depends, ", ".join(sorted(needed)), deb_field(deb, "Recommends"), deb_field(deb, "Suggests")))


def check_contents(deb):
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
    paths = [line.split(None, 5)[5].split(" -> ")[0] for line in listing.splitlines() if line.strip()]
    outside = [p for p in paths if not (p in ("./", "./usr/") or p.startswith("./usr/"))]
    if outside:
        raise Failure("files outside /usr in the package:\n  %s" % "\n  ".join(outside))
    harness.log("contents: %d entries, all under /usr" % len(paths))


PYTHON = "/usr/bin/python3"  # the python3 the package depends on, and its postinst compiles for


def check_maintainer_scripts(deb, layout, target, workdir):
    """The package installed by dpkg into a scratch root of its own:
    postinst byte-compiles the Python package, rbpeek from there imports
    only byte-compiled modules, prerm removes them all."""
    ctrl = os.path.join(workdir, "control")
    subprocess.run(["dpkg-deb", "-e", deb, ctrl], check=True)
    for script in ("postinst", "prerm"):
        if not os.access(os.path.join(ctrl, script), os.X_OK):
            raise Failure("the package has no executable %s" % script)
    # Every shared object by its soname in the shlibs file (CPack leaves out,
    # with a warning, one that has none)
    with open(os.path.join(ctrl, "shlibs"), encoding="utf-8") as f:
        shlibs = [ln.split()[:2] for ln in f if ln.strip()]
    for soname in ("librbpeek.so." + layout["soversion"], layout["unwinder"]):
        if soname.split(".so.") not in shlibs:
            raise Failure("the package's shlibs file lacks %s: %s" % (soname, shlibs))
    with open(os.path.join(ctrl, "triggers"), encoding="utf-8") as f:
        if "activate-noawait ldconfig" not in [ln.split("#")[0].strip() for ln in f]:
            raise Failure("the package's triggers do not activate ldconfig")

    root = os.path.join(workdir, "dpkg-root")
    for d in ("info", "updates", "triggers"):
        os.makedirs(os.path.join(root, "var", "lib", "dpkg", d))
    open(os.path.join(root, "var", "lib", "dpkg", "status"), "w").close()
    rc, out = installcheck.run(["dpkg", "--root", root, "--force-script-chrootless", "--force-depends",
                                "--force-not-root", "-i", deb], installcheck.clean_env(), workdir)
    if rc != 0:
        raise Failure("dpkg --root %s -i failed (exit %d):\n%s" % (root, rc, out[-3000:]))
    pydir = os.path.join(root, "usr", layout["datadir"], "python")
    tag = subprocess.run([PYTHON, "-c", "import sys; print(sys.implementation.cache_tag)"],
                         capture_output=True, text=True, check=True).stdout.strip()
    sources = glob.glob(os.path.join(pydir, "**", "*.py"), recursive=True)
    uncompiled = [os.path.relpath(py, pydir) for py in sources
                  if not os.path.exists(os.path.join(os.path.dirname(py), "__pycache__", "%s.%s.pyc"
                                                     % (os.path.basename(py)[:-3], tag)))]
    if uncompiled:
        raise Failure("postinst left %d of %d modules without a %s .pyc: %s"
                      % (len(uncompiled), len(sources), tag, ", ".join(uncompiled[:5])))

    # -v says where each module's code came from: a .pyc that matches its
    # source ('...pyc'), or the source, compiled on the spot (a bare path).
    rc, out = installcheck.run([PYTHON, "-v", os.path.join(root, "usr", layout["bindir"], "rbpeek"), "bt",
                                "--pid", str(target.pid)], installcheck.clean_env(), workdir)
    loaded = re.findall(r"^# code object from (\S+)$", out, re.M)
    ours = [path for path in loaded if pydir in path]
    compiled = [path for path in ours if not path.endswith(".pyc'")]
    if rc != 0 or not ours or compiled:
        raise Failure("rbpeek bt from the dpkg root (exit %d) compiled %s:\n%s"
                      % (rc, ", ".join(compiled) or "-", out[-2000:]))
    harness.log("postinst: %d modules byte-compiled (%s); rbpeek bt --pid imported %d of them, none from source"
                % (len(sources), tag, len(ours)))
    # The command line runs that Python, whatever python3 comes first on PATH.
    with open(os.path.join(root, "usr", layout["bindir"], "rbpeek")) as f:
        shebang = f.readline().strip()
    if shebang != "#!" + PYTHON:
        raise Failure("the installed rbpeek starts %r, wanted #!%s" % (shebang, PYTHON))

    packaged = {os.path.normpath(os.path.join(root, line.split(None, 5)[5].split(" -> ")[0]))
                for line in subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True,
                                           check=True).stdout.splitlines() if line.strip()}
    rc, out = installcheck.run(["sh", os.path.join(root, "var", "lib", "dpkg", "info", "rbpeek.prerm"), "remove"],
                               installcheck.clean_env(DPKG_ROOT=root), workdir)
    left = [os.path.relpath(os.path.join(d, n), root) for d, dirs, names in os.walk(pydir) for n in dirs + names
            if os.path.join(d, n) not in packaged]
    if rc != 0 or left:
        raise Failure("prerm (exit %d) left what the package does not hold: %s\n%s"
                      % (rc, ", ".join(left[:5]) or "-", out[-2000:]))
    harness.log("prerm: the Python package's directory holds the package's files only")


def test(build, layout_path, cpack, workdir):
    layout = installcheck.load_layout(layout_path)
    target = installcheck.start_target(workdir)
    try:
        out_dir = os.path.join(workdir, "deb")
        rc, out = installcheck.run([cpack, "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"),
                                    "-B", out_dir], installcheck.clean_env(), workdir)
        debs = glob.glob(os.path.join(out_dir, "*.deb"))
        if rc != 0 or len(debs) != 1:
            raise Failure("cpack -G DEB made %s:\n%s" % (debs, out[-3000:]))
        if "Warning" in out:   # a shared object with no soname was one (issue 37)
            raise Failure("cpack -G DEB warned:\n%s" % out[-3000:])
        deb = debs[0]
        harness.log("built %s (%d kB)" % (os.path.basename(deb), os.path.getsize(deb) // 1024))
        check_contents(deb)
        root = os.path.join(workdir, "root")
        subprocess.run(["dpkg", "-x", deb, root], check=True)
        check_control(deb, root)
        installcheck.check_tree(os.path.join(root, "usr"), layout)

        env = installcheck.clean_env()
        autoload = os.path.join(root, "usr", layout["autoload"])
        out_json = os.path.join(workdir, "gdb.json")
        rc, out = installcheck.run(["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off",
                                    "-iex", "set auto-load scripts-directory " + autoload,
                                    "-iex", "set auto-load safe-path " + autoload,
                                    "-p", str(target.pid), "-ex", "ruby bt -a --json -o " + out_json,
                                    "-ex", "ruby info", "-ex", "info auto-load python-scripts"], env, workdir)
        stub = autoload + os.path.realpath(installcheck.RUBY) + "-gdb.py"
        if not any(ln.split()[:2] == ["Yes", stub] for ln in out.splitlines()):
            raise Failure("gdb did not auto-load %s:\n%s" % (stub, out[-3000:]))
        harness.log("gdb auto-loaded %s" % os.path.relpath(stub, root))
        installcheck.check_bt(target, out_json, out, "gdb with the package's auto-load stubs, no source command")
        installcheck.check_library(out, root, "gdb")

        # A developer's tree plugin, sourced once the installed one is auto-loaded.
        tree_plugin = os.path.join(installcheck.REPO, "gdb-plugin", "rbpeek.py")
        out_json = os.path.join(workdir, "gdb-tree.json")
        rc, out = installcheck.run(["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off",
                                    "-iex", "set auto-load scripts-directory " + autoload,
                                    "-iex", "set auto-load safe-path " + autoload,
                                    "-p", str(target.pid), "-ex", "source " + tree_plugin,
                                    "-ex", "python print('rbpeeklib from', sys.modules['rbpeeklib'].__file__)",
                                    "-ex", "ruby bt -a --json -o " + out_json],
                                   installcheck.clean_env(RBPEEK_LIBRARY=os.path.join(build, "lib", "librbpeek.so")),
                                   workdir)
        want = os.path.join(installcheck.REPO, "python", "rbpeeklib", "__init__.py")
        if "rbpeeklib from " + want not in out:
            raise Failure("the tree's plugin sourced after the auto-loaded one still uses another rbpeeklib:\n"
                          + out[-2000:])
        installcheck.check_bt(target, out_json, out, "gdb, the tree's plugin sourced over the auto-loaded one")

        pymodules = os.path.join(root, "usr", layout["pymodules"])
        out_json = os.path.join(workdir, "lldb.json")
        rc, out = installcheck.run([harness.LLDB, "--no-lldbinit", "-b", "-p", str(target.pid),
                                    "-o", "command script import rbpeek",
                                    "-o", "ruby bt -a --json -o " + out_json, "-o", "ruby info"],
                                   installcheck.clean_env(PYTHONPATH=pymodules), workdir)
        installcheck.check_bt(target, out_json, out, "lldb with `command script import rbpeek`")
        installcheck.check_library(out, root, "lldb")
        installcheck.check_cli(os.path.join(root, "usr"), layout, target, workdir)
        check_maintainer_scripts(deb, layout, target, workdir)
        target.assert_left_running()
    finally:
        target.close()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    harness.main(lambda wd: test(os.path.abspath(sys.argv[1]), sys.argv[2], sys.argv[3], wd))
