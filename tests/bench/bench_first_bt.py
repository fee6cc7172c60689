"""Benchmark: what a first `ruby bt` costs in gdb and lldb, live, on a
many-library target (not a test; prints a table). Issue 37, item 10.

    python3 tests/bench/bench_first_bt.py [--runs N] [--debugger gdb|lldb]
        [--order after|before] [--target puma|libs] [--load CLIENTS]
        [--ruby RUBY] [--debuginfod DELAY] [--tree DIR] [--lldb-settings default|plugin]

The target is a worker of a clustered puma (3 workers x 4 threads, a Sinatra
app, Debian's ruby3.1 with --yjit) when Debian's puma and ruby-sinatra are
installed, otherwise (or --target libs) a ruby3.1 program that loads every
extension a puma worker maps (openssl, zlib, socket, json, date...) and runs
13 threads; --ruby runs that program on another Ruby (one of the matrix,
built with debug info as ruby-build and rbenv build theirs). Each
run is a fresh debugger, as a user's first command:

    gdb -nx -batch -p PID -ex 'source gdb-plugin/rbpeek.py' -ex 'ruby bt'
    lldb-16 --no-lldbinit -b -p PID -o 'command script import ...' -o 'ruby bt'

(--order after; --order before loads the plugin before attaching, as
~/.lldbinit, ~/.gdbinit or gdb's auto-load stub of an installed rbpeek do).
Markers printed from the debugger's Python between the steps split its wall
time and CPU time (the debugger's, all its threads, and lldb-server's) into:

  start    the debugger's own start, its Python ready
  attach   the debugger attaching: stopping the threads, reading every
           module's symbols (and, for lldb unless told otherwise, indexing
           the DWARF of those with debug info: libc6-dbg's)
  plugin   rbpeek's Python imported and librbpeek loaded
  bt       the first `ruby bt`: opening rbpeek's session (from the --stats
           line: `session opened in`) and the command
  exit     detaching and quitting

--load CLIENTS keeps that many keep-alive HTTP clients on the puma app for
the whole run (the user's "under load"). --debuginfod DELAY runs a stand-in
debuginfod server on 127.0.0.1 answering 404 after DELAY seconds, with
DEBUGINFOD_URLS pointing at it and gdb's `debuginfod enabled` on (a user who
answered yes to gdb's question): how many lookups the attach makes and what
they cost (lldb-16 has no debuginfod client). --tree DIR: the source tree
whose plugins are measured (another checkout, for a before/after).
--lldb-settings plugin: nothing extra (the plugin's own choices apply when
it is loaded first); default: `settings set target.preload-symbols true`
after the plugin is imported, as lldb's default, for comparison.
--debugger, --order, --tree and --lldb-settings may each be given more than
once: every combination runs, one run of each per round, so that a change
of load touches them alike; the table gives the medians. The load average
is printed before and after every run: say it with the figures.
"""

import argparse
import http.server
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
RUBY = "/usr/bin/ruby3.1"
LLDB = shutil.which("lldb-16") or "lldb-16"
PHASES = ("start", "attach", "plugin", "bt", "exit")

# Printed by the debugger's Python between steps: wall clock, the
# debugger's CPU (all threads) and its children's (lldb-server) still running.
MARK = ("import os as _o, time as _t\n"
        "def _rbpeek_bench_mark(name):\n"
        "    kids = 0\n"
        "    for task in _o.listdir('/proc/self/task'):\n"
        "        try:\n"
        "            pids = open('/proc/self/task/%s/children' % task).read().split()\n"
        "        except OSError:\n"
        "            pids = []\n"
        "        for p in pids:\n"
        "            try:\n"
        "                f = open('/proc/%s/stat' % p).read().rsplit(')', 1)[1].split()\n"
        "                kids += (int(f[11]) + int(f[12])) / _o.sysconf('SC_CLK_TCK')\n"
        "            except (OSError, IndexError, ValueError):\n"
        "                pass\n"
        "    c = _o.times()\n"
        "    print('RBPEEK-BENCH %s %.6f %.4f %.4f' % (name, _t.time(), c[0] + c[1], kids))\n")

APP = """require "sinatra/base"
class App < Sinatra::Base
  get("/") { (1..200).map { |i| i.to_s * 3 }.join(",").size.to_s }
  get("/sleep") { sleep 0.01; "ok" }
end
"""
PUMA_CONFIG = """workers 3
threads 4, 4
bind "tcp://127.0.0.1:%d"
tag "bench"
"""
# Without puma: the extensions a puma worker maps, and 13 threads.
LIBS = """%w[openssl zlib socket json date digest/sha2 etc io/nonblock io/wait monitor stringio strscan
   cgi/escape].each { |l| require l }
q = Queue.new
ths = 12.times.map { |i| Thread.new { Thread.current.name = "worker #{i}"; q.pop } }
File.write(ARGV[0] + "/ready", Process.pid.to_s)
sleep
"""


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def have_puma():
    r = subprocess.run([RUBY, "-e", 'require "puma"; require "sinatra/base"'], capture_output=True)
    return r.returncode == 0 and shutil.which("puma")


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Puma:
    """A clustered puma (3 workers) serving a Sinatra app; pid: a worker's."""

    def __init__(self, workdir):
        self.port = free_port()
        with open(os.path.join(workdir, "app.rb"), "w") as f:
            f.write(APP)
        with open(os.path.join(workdir, "config.ru"), "w") as f:
            f.write('require_relative "app"\nrun App\n')
        with open(os.path.join(workdir, "puma.rb"), "w") as f:
            f.write(PUMA_CONFIG % self.port)
        self.log = open(os.path.join(workdir, "puma.log"), "w")
        self.proc = subprocess.Popen([shutil.which("puma"), "-C", "puma.rb", "config.ru"], cwd=workdir,
                                     stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=dict(os.environ, RUBYOPT="--yjit"), start_new_session=True)
        deadline = time.time() + 120
        while time.time() < deadline:
            workers = self._workers()
            if len(workers) == 3 and self._serves():
                self.pid = workers[0]
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.3)
        self.close()
        raise SystemExit("puma did not start 3 workers: see %s" % self.log.name)

    def _workers(self):
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                return [int(p) for p in f.read().split()]
        except OSError:
            return []

    def _serves(self):
        import urllib.request
        try:
            return urllib.request.urlopen("http://127.0.0.1:%d/" % self.port, timeout=2).status == 200
        except OSError:
            return False

    def close(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, 15)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()
        self.log.close()


class Libs:
    """A Ruby (ruby3.1 by default) with the extensions loaded and 13 threads, parked."""

    def __init__(self, workdir, ruby):
        prog = os.path.join(workdir, "libs.rb")
        with open(prog, "w") as f:
            f.write(LIBS)
        self.proc = subprocess.Popen([ruby, prog, workdir], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        for _ in range(600):
            if os.path.exists(os.path.join(workdir, "ready")):
                self.pid = self.proc.pid
                time.sleep(0.3)
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.close()
        raise SystemExit("the target program did not start")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


class Load:
    """CLIENTS keep-alive HTTP clients (a Ruby process) on the app until closed."""

    def __init__(self, port, clients, workdir):
        script = os.path.join(workdir, "load.rb")
        with open(script, "w") as f:
            f.write("""require "net/http"
n = ARGV[0].to_i; count = 0; m = Mutex.new
$stdout.sync = true
at_exit { puts "requests #{count}" }
Signal.trap("TERM") { exit }
n.times.map { |i| Thread.new { Net::HTTP.start("127.0.0.1", %d) { |h|
  loop { r = h.get(i.even? ? "/" : "/sleep"); m.synchronize { count += 1 if r.code == "200" } } } } }.each(&:join)
""" % port)
        self.out = os.path.join(workdir, "load.out")
        self.proc = subprocess.Popen([RUBY, script, str(clients)], stdout=open(self.out, "w"),
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.started = time.time()
        time.sleep(3)

    def close(self):
        self.proc.terminate()
        self.proc.wait(20)
        with open(self.out) as f:
            m = re.search(r"requests (\d+)", f.read())
        return "%s requests in %.0f s" % (m.group(1) if m else "?", time.time() - self.started)


class FakeDebuginfod:
    """A stand-in debuginfod server: answers 404 to every request after
    delay seconds (a network round trip), counting them."""

    def __init__(self, delay):
        self.count = 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                time.sleep(delay)
                outer.count += 1
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def argv_for(debugger, tree, pid, order, lldb_settings, debuginfod):
    plugin = os.path.join(tree, "%s-plugin" % debugger, "rbpeek.py")
    if debugger == "gdb":
        load = ["source " + plugin]
        argv = ["gdb", "-nx", "-q", "-batch", "-iex", "python\n" + MARK, "-iex", "python _rbpeek_bench_mark('start')"]
        mark = lambda name: ["python _rbpeek_bench_mark(%r)" % name]  # noqa: E731
        pre, post = "-iex", "-ex"
        if debuginfod:
            argv += ["-iex", "set debuginfod enabled on"]
        attach = ["-p", str(pid)]
    else:
        load = ["command script import " + plugin]
        argv = [LLDB, "--no-lldbinit", "-b", "-O", "script exec(%r)" % MARK, "-O",
                "script _rbpeek_bench_mark('start')",
                # as the test harness: the handshake may wait on a loaded machine
                "-O", "settings set plugin.process.gdb-remote.packet-timeout 30"]
        mark = lambda name: ["script _rbpeek_bench_mark(%r)" % name]  # noqa: E731
        pre, post = "-O", "-o"
        attach = ["-p", str(pid)]
    steps_pre, steps_post = [], []
    if order == "before":
        steps_pre += load + mark("plugin")
        if debugger == "lldb" and lldb_settings == "default":
            steps_pre += ["settings set target.preload-symbols true"]
    steps_post += mark("attach")
    if order == "after":
        steps_post += load + mark("plugin")
    steps_post += ["ruby bt --stats"] + mark("bt")
    for c in steps_pre:
        argv += [pre, c]
    argv += attach
    for c in steps_post:
        argv += [post, c]
    return argv


def run_once(debugger, tree, pid, order, lldb_settings, env, debuginfod):
    argv = argv_for(debugger, tree, pid, order, lldb_settings, debuginfod)
    t0 = time.time()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env, text=True, errors="replace")
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    t_end, cpu_end = time.time(), usage.ru_utime + usage.ru_stime
    marks = {}
    for m in re.finditer(r"^RBPEEK-BENCH (\w+) ([0-9.]+) ([0-9.]+) ([0-9.]+)$", out, re.M):
        marks[m.group(1)] = (float(m.group(2)), float(m.group(3)) + float(m.group(4)))
    opened = re.search(r"session opened in ([0-9.]+) ms", out)
    frames = re.search(r"walked \d+ threads, (\d+) frames", out)
    order_names = ["start"] + (["attach", "plugin"] if order == "after" else ["plugin", "attach"]) + ["bt"]
    if any(n not in marks for n in order_names) or not frames or int(frames.group(1)) < 1:
        tail = "\n".join(out.splitlines()[-15:])
        raise SystemExit("%s did not print every step and a backtrace (status %s):\n%s" % (debugger, proc.returncode,
                                                                                             tail))
    res = {}
    prev_wall, prev_cpu = t0, 0.0
    for n in order_names:
        wall, cpu = marks[n]
        res[n] = (wall - prev_wall, cpu - prev_cpu)
        prev_wall, prev_cpu = wall, cpu
    # wait4 counts lldb-server only if lldb reaped it: never less than the
    # last mark, which read it running
    cpu_end = max(cpu_end, prev_cpu)
    res["exit"] = (t_end - prev_wall, cpu_end - prev_cpu)
    res["total"] = (t_end - t0, cpu_end)
    res["session"] = float(opened.group(1)) / 1000 if opened else None
    return res


def label(cfg, multi):
    d, tree, order, settings = cfg
    parts = [d]
    if multi["tree"]:
        parts.append("tree " + os.path.basename(os.path.normpath(tree)))
    if multi["order"]:
        parts.append("plugin loaded " + order)
    if multi["settings"] and d == "lldb":
        parts.append("preload " + ("lldb's" if settings == "default" else "plugin's"))
    return " ".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--debugger", choices=("gdb", "lldb"), action="append")
    ap.add_argument("--order", choices=("after", "before"), action="append")
    ap.add_argument("--target", choices=("puma", "libs"))
    ap.add_argument("--ruby", default=RUBY, help="the libs target's Ruby (one built with debug info, say)")
    ap.add_argument("--load", type=int, default=0, metavar="CLIENTS")
    ap.add_argument("--debuginfod", type=float, metavar="DELAY")
    ap.add_argument("--tree", action="append")
    ap.add_argument("--lldb-settings", choices=("plugin", "default"), action="append")
    args = ap.parse_args()
    debuggers = args.debugger or ["gdb", "lldb"]
    trees = args.tree or [REPO]
    orders = args.order or ["after"]
    settings = args.lldb_settings or ["plugin"]
    configs = [(d, t, o, s) for t in trees for o in orders for d in debuggers for s in settings
               if d == "lldb" or s == settings[0]]
    multi = {"tree": len(trees) > 1, "order": len(orders) > 1, "settings": len(settings) > 1}
    target = args.target or ("puma" if have_puma() and args.ruby == RUBY else "libs")
    if target == "puma" and not have_puma():
        raise SystemExit("puma and ruby-sinatra are not installed for %s (apt-get install puma ruby-sinatra)" % RUBY)
    if args.load and target != "puma":
        raise SystemExit("--load needs the puma target")
    workdir = tempfile.mkdtemp(prefix="rbpeek-bench-first-bt-")
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    fake = None
    if args.debuginfod is not None:
        fake = FakeDebuginfod(args.debuginfod)
        env["DEBUGINFOD_URLS"] = fake.url
        env["DEBUGINFOD_CACHE_PATH"] = os.path.join(workdir, "debuginfod-cache")
    tgt = load = None
    try:
        tgt = Puma(workdir) if target == "puma" else Libs(workdir, args.ruby)
        with open("/proc/%d/maps" % tgt.pid) as f:
            modules = {line.split(None, 5)[5].strip() for line in f if ".so" in line or "/bin/" in line}
        threads = len(os.listdir("/proc/%d/task" % tgt.pid))
        print("target: %s, pid %d, %d threads, %d mapped files"
              % ("a puma worker" if target == "puma" else "%s with extensions" % args.ruby, tgt.pid, threads,
                 len(modules)))
        if args.load:
            load = Load(tgt.port, args.load, workdir)
        results = {c: [] for c in configs}
        for i in range(args.runs):
            for cfg in configs:   # in rounds, so that a change of load touches every one alike
                d, tree, order, lldb_settings = cfg
                before = loadavg()
                extra = []
                count0 = fake.count if fake else 0
                r = run_once(d, tree, tgt.pid, order, lldb_settings, env, fake is not None)
                if fake:
                    # each run its own cache: every run is a user's first
                    shutil.rmtree(env["DEBUGINFOD_CACHE_PATH"], ignore_errors=True)
                    extra.append("%d debuginfod lookups" % (fake.count - count0))
                r["load"] = (before, loadavg())
                results[cfg].append(r)
                print("run %d %-28s total %5.2f s wall %5.2f s CPU | %s | session %s | load %s -> %s %s"
                      % (i + 1, label(cfg, multi), r["total"][0], r["total"][1],
                         "  ".join("%s %.2f/%.2f" % (p, r[p][0], r[p][1]) for p in PHASES),
                         "%.0f ms" % (r["session"] * 1e3) if r["session"] is not None else "?",
                         r["load"][0], r["load"][1], "; ".join(extra)), flush=True)
        print("\nmedians of %d runs, seconds, wall / CPU:" % args.runs)
        print("| debugger | %s | total | rbpeek's session |" % " | ".join(PHASES))
        print("|---|%s---|---|" % ("---|" * len(PHASES)))
        for cfg in configs:
            rs = results[cfg]
            cells = ["%.2f / %.2f" % (statistics.median(r[p][0] for r in rs), statistics.median(r[p][1] for r in rs))
                     for p in PHASES + ("total",)]
            sess = [r["session"] for r in rs if r["session"] is not None]
            print("| %s | %s | %s |" % (label(cfg, multi), " | ".join(cells),
                                        "%.0f ms" % (statistics.median(sess) * 1e3) if sess else "?"))
        if load:
            print("load: %d clients, %s" % (args.load, load.close()))
            load = None
    finally:
        if load:
            load.close()
        if tgt:
            tgt.close()
        if fake:
            fake.close()
        shutil.rmtree(workdir, ignore_errors=True)

if __name__ == "__main__":
    main()
