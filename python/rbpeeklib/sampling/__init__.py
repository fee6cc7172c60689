"""The machinery of `ruby sample` (commands/sample.py), below the command:

traced.py        the fast loop: the debugger lets go, rbpeek traces the target
via_debugger.py  the loop through the debugger, stopped by a timed signal
signals.py       whether letting go of the target is safe; signal names
stats.py         what a run counts, and the progress line
report.py        the output files and the summary
"""
