"""Processes as the kernel shows them (/proc): who traces a process, what
a process is called, and its children, for `ruby sample` and `rbpeek top`
(the process tree of --subprocesses, the refusal of a process another
tracer holds). Only /proc is read; nothing here touches a process."""

import os

MAX_CHILDREN = 4096     # a bound on what one /proc read may make us follow


def _status(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return f.read()
    except OSError:
        return None


def status_field(pid, name):
    """A field of /proc/PID/status as text, or None."""
    text = _status(pid)
    if text is None:
        return None
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return None


def tracer_of(pid):
    """The process tracing pid, 0 if none. TracerPid names the tracing
    thread (ptrace ties a tracee to a thread: rbpeek's own tracer is a
    thread of its process); its Tgid is the process."""
    try:
        tid = int(status_field(pid, "TracerPid") or 0)
    except ValueError:
        return 0
    if tid <= 0:
        return 0
    try:
        return int(status_field(tid, "Tgid") or tid)
    except ValueError:
        return tid


def _short_word(w, keep=24):
    """A long path among the arguments as '.../name' (the name says most)."""
    if len(w) <= keep or "/" not in w.rstrip("/"):
        return w
    return ".../" + w.rstrip("/").rsplit("/", 1)[1]


def _is_program_path(pid, word):
    """Whether argv[0] is the path of a file, as exec left it ("/usr/bin/ruby",
    "./bin/puma"), rather than a title the program set for itself ($0 =
    "puma 5.6.5 (tcp://127.0.0.1:9292) [app]", setproctitle), which names
    no file. The path is looked up as the process sees it: from its root
    (a container's) or its working directory."""
    if "/" not in word:
        return False
    try:
        return os.path.exists("/proc/%d/%s/%s" % (pid, "root" if word.startswith("/") else "cwd", word.lstrip("/")))
    except (OSError, ValueError):
        return False


def command_line(pid, width=60):
    """pid's command line as `ps` shows it, shortened to at most width
    characters (a program's path to its name, long paths among the
    arguments to their last part, then cut in the middle), its comm when it
    has none, or None when it is gone.

    A title the program set for itself is what its users know it by, as
    `ps`, `top -c` and `pgrep -f` show it (puma's "puma 5.6.5
    (tcp://127.0.0.1:9292) [app]", "puma: cluster worker 0: 4242 [app]"):
    it is kept whole, never taken for a path ('/' in a URL). Only an
    argv[0] that is a file's path becomes its last part. Not comm: it is
    the executable's name cut to 15 bytes ("ruby3.1" for every worker)."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            words = [w.decode("utf-8", "replace") for w in f.read().split(b"\0") if w]
    except OSError:
        words = []
    if not words:
        try:
            with open("/proc/%d/comm" % pid) as f:
                return "[%s]" % f.read().strip()
        except OSError:
            return None
    if _is_program_path(pid, words[0]):
        words[0] = os.path.basename(words[0].rstrip("/")) or words[0]
    text = " ".join(words)
    # Long paths first, then every path: a script's own path (python3
    # /work/x/tools/rbpeek) is as short as 24 characters and would otherwise
    # push the words that say what runs (rbpeek sample) into the cut.
    for keep in (24, 0):
        if len(text) > width:
            text = " ".join([words[0]] + [_short_word(w, keep) for w in words[1:]])
    if len(text) > width:
        keep = width - 3
        text = text[:(keep + 1) // 2] + "..." + text[len(text) - keep // 2:]
    return text


def refuse_if_traced(pid, mine=()):
    """None when nothing traces pid (or one of mine: this process, its
    debugger); else one line naming the tracer, for a command that must
    trace pid itself."""
    tracer = tracer_of(pid)
    if not tracer or tracer == os.getpid() or tracer in mine:
        return None
    name = command_line(tracer) or "gone"
    return ("process %d is already traced by pid %d (%s): a debugger or another sampler holds it, and a process "
            "has one tracer at a time; end or detach that one, then try again" % (pid, tracer, name))


def children(pid):
    """The pids of pid's children (every thread's children), from
    /proc/PID/task/*/children; [] when it is gone."""
    out = []
    try:
        tasks = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for task in tasks:
        try:
            with open("/proc/%d/task/%s/children" % (pid, task)) as f:
                out.extend(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
        if len(out) >= MAX_CHILDREN:
            break
    return sorted(set(out))


def tree(pid):
    """pid and its descendants, parents before children (breadth first),
    at most MAX_CHILDREN of them."""
    seen, order, todo = {pid}, [pid], [pid]
    while todo and len(order) < MAX_CHILDREN:
        nxt = []
        for p in todo:
            for c in children(p):
                if c not in seen:
                    seen.add(c)
                    order.append(c)
                    nxt.append(c)
        todo = nxt
    return order
