#!/usr/bin/env python3
"""Browser test of the SVG flamegraph: does it work for a person in a real
browser, not just parse?

It renders a small synthetic profile with rbpeek-flamegraph, then loads a
copy of the SVG in headless Chromium with a test script appended. That
script acts as a user would: hovers a frame, clicks it, checks the zoom,
clicks "Reset Zoom", clicks "Search" (with window.prompt answered), and
writes what it saw as JSON into the document. Chromium's --dump-dom hands
the document back and this script checks the numbers against the profile.
It also saves screenshots (plain, and zoomed + searched) for a human to look
at.

usage: test_flamegraph_browser.py RBPEEK_FLAMEGRAPH OUT_DIR
Exit status: 0 pass, 77 skip (no Chromium), 1 fail.
"""
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

# 100 samples in all, so sample counts are also percentages.
FOLDED = """\
main (app.rb:1);Server#run (server.rb:10);Handler#call (handler.rb:20);JSON.generate (json.rb:5) 30
main (app.rb:1);Server#run (server.rb:10);Handler#call (handler.rb:20);DB#query (db.rb:7);c_func_read 20
main (app.rb:1);Server#run (server.rb:10);Logger#info (logger.rb:3) 9
main (app.rb:1);Server#run (server.rb:10);Logger#info (logger.rb:3);tiny_helper 1
main (app.rb:1);GC.start 15
main (app.rb:1);Worker#loop (worker.rb:2);c_func_sleep 25
"""
WIDTH = 1200
XPAD = 10
SPAN = WIDTH - 2 * XPAD

HARNESS = r"""
<script type="text/ecmascript"><![CDATA[
(function () {
  function frame(name) {
    var gs = document.getElementById('rbp-frames').getElementsByTagName('g');
    for (var i = 0; i < gs.length; i++) {
      var t = gs[i].getElementsByTagName('title')[0].textContent;
      if (t.indexOf(name + ' (') === 0 && t.lastIndexOf(' (') === name.length) return gs[i];
    }
    return null;
  }
  function state(name) {
    var g = frame(name);
    if (!g) return null;
    var r = g.getElementsByTagName('rect')[0];
    return { x: +r.getAttribute('x'), width: +r.getAttribute('width'),
             fill: r.getAttribute('fill'), cls: g.getAttribute('class') || '',
             shown: getComputedStyle(g).display !== 'none',
             label: (g.getElementsByTagName('text')[0] || { textContent: '' }).textContent };
  }
  function click(el) {
    el.dispatchEvent(new MouseEvent('click', { bubbles: true, cancelable: true, view: window }));
  }
  function run() {
    var out = { names: ['main (app.rb:1)', 'Server#run (server.rb:10)',
                        'Handler#call (handler.rb:20)', 'GC.start', 'c_func_read',
                        'c_func_sleep', 'Worker#loop (worker.rb:2)', 'Logger#info (logger.rb:3)',
                        'tiny_helper'] };
    function snap() {
      var s = {};
      out.names.forEach(function (n) { s[n] = state(n); });
      return s;
    }
    try {
      out.before = snap();
      var target = frame('Server#run (server.rb:10)');
      var rect = target.getElementsByTagName('rect')[0];
      rect.dispatchEvent(new MouseEvent('mouseover', { bubbles: true, view: window }));
      out.details = document.getElementById('rbp-details').textContent;
      click(rect);
      out.zoomed = snap();
      out.unzoomShown = getComputedStyle(document.getElementById('rbp-unzoom')).display !== 'none';
      click(document.getElementById('rbp-unzoom'));
      out.unzoomed = snap();
      out.unzoomHidden = getComputedStyle(document.getElementById('rbp-unzoom')).display === 'none';
      // Zooming into a small frame makes room for labels its children lacked.
      click(frame('Logger#info (logger.rb:3)').getElementsByTagName('rect')[0]);
      out.zoomedSmall = snap();
      click(document.getElementById('rbp-unzoom'));
      out.unzoomedSmall = snap();
      // The Search control asks with window.prompt; answer it as a user would.
      window.prompt = function () { return 'c_func'; };
      click(document.getElementById('rbp-search'));
      out.searched = snap();
      out.matched = document.getElementById('rbp-matched').textContent;
      out.matchedShown = getComputedStyle(document.getElementById('rbp-matched')).display !== 'none';
      out.searchLabel = document.getElementById('rbp-search').textContent;
      out.regexPct = rbpSearch('^(GC|Logger)');
      out.regexMatched = document.getElementById('rbp-matched').textContent;
      click(document.getElementById('rbp-search'));   // now "Reset Search"
      out.reset = snap();
      out.resetMatchedHidden = getComputedStyle(document.getElementById('rbp-matched')).display === 'none';
      // Leave the picture zoomed and searched for the screenshot.
      click(frame('Server#run (server.rb:10)').getElementsByTagName('rect')[0]);
      rbpSearch('c_func|Handler');
    } catch (e) {
      out.error = String(e) + (e.stack ? ' ' + e.stack : '');
    }
    var t = document.createElementNS('http://www.w3.org/2000/svg', 'text');
    t.setAttribute('id', 'rbp-test-result');
    t.setAttribute('x', '-1000');
    t.setAttribute('visibility', 'hidden');
    t.textContent = JSON.stringify(out);
    document.documentElement.appendChild(t);
  }
  window.addEventListener('load', function () { setTimeout(run, 0); });
})();
]]></script>
"""


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium(browser, profile_dir, args, timeout=120):
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-dev-shm-usage", "--user-data-dir=" + profile_dir,
           "--virtual-time-budget=3000"] + args
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)


class Checker:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def check(self, cond, what):
        if cond:
            self.passed += 1
        else:
            self.failed += 1
            print("FAIL:", what)

    def near(self, a, b, what, tol=0.15):
        self.check(a is not None and abs(a - b) <= tol, "%s: got %r, want %r" % (what, a, b))


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 1
    tool, out_dir = sys.argv[1], sys.argv[2]
    browser = find_chromium()
    if not browser:
        print("SKIP: no chromium found (apt-get install chromium)")
        return SKIP
    os.makedirs(out_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="rbpeek-browser-")
    try:
        return run(tool, out_dir, work, browser)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def run(tool, out_dir, work, browser):
    folded = os.path.join(work, "synthetic.folded")
    with open(folded, "w") as f:
        f.write(FOLDED)
    svg = os.path.join(out_dir, "flamegraph-browser.svg")
    r = subprocess.run([tool, "--title", "Browser test <&>", "-o", svg, folded],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if r.returncode != 0:
        print("FAIL: rbpeek-flamegraph exited %d: %s" % (r.returncode, r.stderr.decode()))
        return 1
    with open(svg, encoding="utf-8") as f:
        text = f.read()
    if not text.rstrip().endswith("</svg>"):
        print("FAIL: SVG does not end with </svg>")
        return 1
    harness = os.path.join(work, "harness.svg")
    with open(harness, "w", encoding="utf-8") as f:
        f.write(text.rstrip()[: -len("</svg>")] + HARNESS + "</svg>\n")

    # Can this Chromium run here at all? If it cannot start (no display
    # libraries, sandbox trouble), that is a skip, not a failure of ours.
    try:
        r = chromium(browser, os.path.join(work, "profile-dom"),
                     ["--dump-dom", "file://" + harness])
    except subprocess.TimeoutExpired:
        print("SKIP: chromium timed out")
        return SKIP
    dom = r.stdout.decode("utf-8", "replace")
    if r.returncode != 0 and not dom.strip():
        print("SKIP: chromium could not run: %s" % r.stderr.decode("utf-8", "replace")[-500:])
        return SKIP
    m = re.search(r'<text[^>]*id="rbp-test-result"[^>]*>(.*?)</text>', dom, re.S)
    if not m:
        print("FAIL: no test result in the page; the SVG may not have loaded or its script "
              "failed. DOM head:\n" + dom[:2000])
        return 1
    res = json.loads(html.unescape(m.group(1)))
    c = Checker()
    c.check("error" not in res, "script error: %s" % res.get("error"))
    if "error" in res:
        return 1

    b, z, u, s, rs = res["before"], res["zoomed"], res["unzoomed"], res["searched"], res["reset"]
    srv, hnd, gc, main_ = ("Server#run (server.rb:10)", "Handler#call (handler.rb:20)",
                           "GC.start", "main (app.rb:1)")
    # Initial layout: widths proportional to samples.
    c.near(b[srv]["width"], SPAN * 0.60, "Server#run initial width")
    c.near(b[main_]["width"], SPAN, "main initial width")
    c.check(b[gc]["shown"], "GC.start shown before zoom")
    # Hover fills the details line.
    c.check(res["details"] == "Function: Server#run (server.rb:10) (60 samples, 60.00%)",
            "details line on hover: %r" % res["details"])
    # Click zooms: the clicked frame spans the full width, its children scale
    # up, frames outside it hide, ancestors stay as full-width faded parents.
    c.near(z[srv]["width"], SPAN, "zoomed frame width")
    c.near(z[srv]["x"], XPAD, "zoomed frame x")
    c.near(z[hnd]["width"], SPAN * 50 / 60, "child width after zoom")
    c.check(not z[gc]["shown"], "GC.start hidden after zoom")
    c.check(not z["c_func_sleep"]["shown"], "c_func_sleep hidden after zoom")
    c.check(z[main_]["shown"] and "parent" in z[main_]["cls"], "main shown as parent after zoom")
    c.near(z[main_]["width"], SPAN, "parent width after zoom")
    c.check(z[srv]["label"] == srv, "zoomed label is the full name: %r" % z[srv]["label"])
    c.check(res["unzoomShown"], "Reset Zoom shown after zoom")
    # Reset Zoom restores the original layout.
    c.near(u[srv]["width"], b[srv]["width"], "width after Reset Zoom")
    c.check(u[gc]["shown"] and "parent" not in u[main_]["cls"], "all frames back after Reset Zoom")
    c.check(res["unzoomHidden"], "Reset Zoom hidden again")
    zs, us = res["zoomedSmall"], res["unzoomedSmall"]
    c.check(b["tiny_helper"]["label"] == "", "tiny_helper has no label at 1%%: %r"
            % b["tiny_helper"]["label"])
    c.near(zs["tiny_helper"]["width"], SPAN / 10, "tiny_helper width zoomed into Logger#info")
    c.check(zs["tiny_helper"]["label"] == "tiny_helper", "label appears when zoomed: %r"
            % zs["tiny_helper"]["label"])
    c.check(not zs[hnd]["shown"] and zs[srv]["shown"] and "parent" in zs[srv]["cls"],
            "sibling hidden, ancestor faded when zoomed into Logger#info")
    c.check(us["tiny_helper"]["label"] == "", "label gone again after Reset Zoom")
    c.near(us["tiny_helper"]["width"], SPAN / 100, "tiny_helper width after Reset Zoom")
    # Search highlights matches in a distinct colour and reports the share.
    c.check(s["c_func_read"]["fill"] == "rgb(230,0,230)", "c_func_read highlighted")
    c.check(s["c_func_sleep"]["fill"] == "rgb(230,0,230)", "c_func_sleep highlighted")
    c.check(s[gc]["fill"] == b[gc]["fill"], "GC.start keeps its colour")
    c.check(res["matched"] == "Matched: 45.0%", "matched share: %r" % res["matched"])
    c.check(res["matchedShown"], "Matched line shown")
    c.check(res["searchLabel"] == "Reset Search", "Search control becomes Reset Search")
    c.check(res["regexMatched"] == "Matched: 25.0%", "regex search share: %r" % res["regexMatched"])
    c.check(rs["c_func_read"]["fill"] == b["c_func_read"]["fill"], "Reset Search restores colour")
    c.check(res["resetMatchedHidden"], "Matched line hidden after Reset Search")
    # The colours are warm (red high, blue low) and differ between names.
    fills = {n: b[n]["fill"] for n in b}
    for n, fill in fills.items():
        rgb = [int(v) for v in re.findall(r"\d+", fill)]
        c.check(len(rgb) == 3 and rgb[0] >= 200 and rgb[2] <= 60, "warm colour for %s: %s" % (n, fill))
    c.check(len(set(fills.values())) >= len(fills) - 1, "colours vary by name")

    # Screenshots for a human: the plain graph, and the harness state
    # (zoomed into Server#run, searching "c_func|Handler").
    height = int(re.search(r'<svg[^>]*height="(\d+)"', text).group(1))
    size = "--window-size=%d,%d" % (WIDTH, height)
    for name, page in (("flamegraph-browser.png", svg), ("flamegraph-browser-zoomed.png", harness)):
        png = os.path.join(out_dir, name)
        if os.path.exists(png):
            os.unlink(png)
        try:
            chromium(browser, os.path.join(work, "profile-" + name), [
                "--screenshot=" + png, size, "--hide-scrollbars", "file://" + page])
        except subprocess.TimeoutExpired:
            pass
        c.check(os.path.exists(png) and os.path.getsize(png) > 1000, "screenshot %s written" % png)

    print("%d passed, %d failed" % (c.passed, c.failed))
    return 0 if c.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
