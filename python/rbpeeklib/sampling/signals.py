"""Whether the target may be let go of safely: the signals pending in it
(/proc), against the signals the debugger stops for; and signal names for
messages. A signal pending when the debugger detaches would be taken by the
target unseen, so `ruby sample` then samples through the debugger."""

import os
import signal


def pending_signals(pid):
    """Signal numbers pending in the kernel for process pid or any of its
    threads (/proc: ShdPnd, SigPnd), or an empty set if unreadable."""
    masks = 0
    paths = ["/proc/%d/status" % pid]
    try:
        paths += ["/proc/%d/task/%s/status" % (pid, t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        pass
    for path in paths:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(("ShdPnd:", "SigPnd:")):
                        masks |= int(line.split()[1], 16)
        except (OSError, ValueError, IndexError):
            continue
    return {n for n in range(1, 65) if masks & (1 << (n - 1))}


def pending_stop_signal(policy, pid):
    """Why the target must stay under the debugger when a signal it stops for
    (policy: the debugger's signal_policy) is already pending: detached, the
    target would take it unseen."""
    for num in sorted(pending_signals(pid)):
        if policy.get(num, (True, True))[0]:
            return "%s is pending in the target, and the debugger stops for it" % signame(num)
    return None


def signame(num):
    """'SIGINT', or 'signal 40' for a number Python has no name for."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return "signal %d" % num
