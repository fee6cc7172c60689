"""Reading the folded file of several processes' samples (`sample
--subprocesses`, two `--pid`): each stack starts with its process's root
frame "COMMAND (pid N)". The frames' labels are matched however the Ruby
names a method (test_service.py's checks ask these).
"""

import re

from harness import Failure


def is_method(label, method):
    """Whether a frame's label is method's, however this Ruby labels it
    ("work_one", 3.4's "Object#work_one", "Kernel#sleep" or "sleep")."""
    return label == method or re.search(r"[#.]%s$" % re.escape(method), label) is not None


def samples_in(frames, method):
    """Samples under a method ({label: samples}, is_method)."""
    return sum(n for label, n in frames.items() if is_method(label, method))


def stacks_by_pid(path):
    """(pid, frame labels root first, samples) of each stack of a folded file
    whose stacks each start with a process root frame 'COMMAND (pid N)';
    fails on a stack without one."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, n = line.rstrip("\n").rsplit(" ", 1)
            frames = stack.split(";")
            m = re.search(r" \(pid (\d+)\)$", frames[0])
            if not m:
                raise Failure("a stack without its process root frame: %r" % line[:200])
            yield int(m.group(1)), [fr.split(" (")[0] for fr in frames[1:]], int(n)


def folded_by_pid(path):
    """{pid: {frame: samples}} of a folded file (stacks_by_pid)."""
    out = {}
    for pid, labels, n in stacks_by_pid(path):
        d = out.setdefault(pid, {})
        for label in set(labels):
            d[label] = d.get(label, 0) + n
    return out


def idle_by_pid(path):
    """{pid: samples of a thread idle in sleep or Thread.stop}: stacks under
    those methods that do not end waiting for the GVL. A parked thread that
    wakes (a new thread's first sleep, an interrupt check) queues for the
    GVL inside Kernel#sleep, and that moment is no idle one: the profile
    keeps it, under its [GVL wait] frame."""
    out = {}
    for pid, labels, n in stacks_by_pid(path):
        if labels and labels[-1] != "[GVL wait]" and any(is_method(l, m) for l in labels for m in ("sleep", "stop")):
            out[pid] = out.get(pid, 0) + n
    return out
