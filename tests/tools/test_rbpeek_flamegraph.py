#!/usr/bin/env python3
"""Command-line test of rbpeek-flamegraph: what a user sees for good input,
stdin/stdout, malformed or missing input, and bad usage (one clear line on
stderr, exit status 0 / 1 / 2). The SVG itself is tested in
unit/test_flamegraph.c and browser/test_flamegraph_browser.py.

usage: test_rbpeek_flamegraph.py RBPEEK_FLAMEGRAPH
Exit status: 0 pass, 1 fail.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import xml.dom.minidom

GOOD = "main (a.rb:1);work (a.rb:5);leaf (a.rb:9) 7\nmain (a.rb:1);idle 3\n"


class Checker:
    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what)


def run(tool, args, stdin=None):
    r = subprocess.run([tool] + args, input=stdin, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    return r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace")


def one_line(err):
    return err.count("\n") == 1 and err.endswith("\n")


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 1
    tool = sys.argv[1]
    work = tempfile.mkdtemp(prefix="rbpeek-fgtool-")
    c = Checker()
    try:
        def path(name, text=None):
            p = os.path.join(work, name)
            if text is not None:
                with open(p, "wb") as f:
                    f.write(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
            return p

        good = path("good.folded", GOOD)
        out = path("out.svg")
        rc, so, se = run(tool, ["--title", "My <app>", "--width", "800", "-o", out, good])
        c.check(rc == 0 and se == "", "good input: rc=%d stderr=%r" % (rc, se))
        doc = xml.dom.minidom.parse(out)   # raises if not well-formed
        svg = doc.documentElement
        c.check(svg.getAttribute("width") == "800", "width honoured")
        texts = {t.getAttribute("id"): "".join(n.data for n in t.childNodes if n.nodeType == n.TEXT_NODE)
                 for t in svg.getElementsByTagName("text")}
        c.check(texts.get("rbp-title") == "My <app>", "title: %r" % texts.get("rbp-title"))
        c.check(texts.get("rbp-subtitle") == "10 samples", "subtitle: %r" % texts.get("rbp-subtitle"))
        titles = [t.firstChild.data for t in svg.getElementsByTagName("title")]
        c.check("leaf (a.rb:9) (7 samples, 70.00%)" in titles, "leaf tooltip in %r" % titles)

        # stdin in, stdout out.
        rc, so, se = run(tool, ["-"], stdin=GOOD.encode())
        c.check(rc == 0 and so.startswith("<?xml") and so.rstrip().endswith("</svg>"),
                "stdin to stdout: rc=%d" % rc)

        # --inverted and --min-width 0 (keep everything).
        tiny = path("tiny.folded", "big 1000000\nsmall 1\n")
        rc, so, se = run(tool, ["--min-width", "0", "--inverted", tiny])
        c.check(rc == 0 and "<title>small (1 sample" in so and "inverted: true" in so,
                "--min-width 0 keeps tiny frames, --inverted")
        rc, so, se = run(tool, [tiny])
        c.check(rc == 0 and "<title>small " not in so, "default cut-off drops tiny frames")

        # Partly malformed: a warning line, still written.
        mixed = path("mixed.folded", GOOD + "garbage line\n")
        rc, so, se = run(tool, ["-o", out, mixed])
        c.check(rc == 0 and one_line(se) and "warning: skipped 1 malformed line" in se
                and "line 3" in se, "mixed input: rc=%d stderr=%r" % (rc, se))

        # Bad input: exit 1 and one clear line.
        for name, text, want in (
                ("bad.folded", "this is not\na folded file\n", "not in folded-stack format: line 1"),
                ("empty.folded", "", "no samples"),
                ("binary.folded", bytes(range(256)) * 4, None),
        ):
            p = path(name, text)
            rc, so, se = run(tool, ["-o", out, p])
            c.check(rc == 1 and one_line(se) and (want is None or want in se),
                    "%s: rc=%d stderr=%r" % (name, rc, se))
        rc, so, se = run(tool, [os.path.join(work, "missing.folded")])
        c.check(rc == 1 and one_line(se) and "cannot read" in se, "missing: rc=%d %r" % (rc, se))
        rc, so, se = run(tool, ["-o", "/nonexistent-dir/x.svg", good])
        c.check(rc == 1 and one_line(se) and "cannot write" in se, "unwritable: rc=%d %r" % (rc, se))

        # Bad usage: exit 2.
        for args in ([], [good, good], ["--width", "abc", good], ["--width", "10", good],
                     ["--min-width", "-1", good], ["--bogus", good], ["-o"]):
            rc, so, se = run(tool, args)
            c.check(rc == 2 and se.strip() != "", "usage %r: rc=%d" % (args, rc))
        rc, so, se = run(tool, ["--help"])
        c.check(rc == 0 and so.startswith("usage: rbpeek-flamegraph"), "--help: rc=%d" % rc)
    except Exception as e:   # a crash of the checks is a failure, said plainly
        c.check(False, "exception: %r" % e)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%d passed, %d failed" % (c.passed, c.failed))
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
