# ruby bt --native against the program's own record (test_native.py): one
# parked program per Ruby, with the native_ext extension built for it, serves
# gdb, lldb and the command line, live and on one core (matrix.py).
rbpeek_ruby_test(native test_native.py)

# GC frames in ruby sample against the program's own GC time
# (test_gc_share.py): one program per Ruby, sampled live by gdb, lldb and
# the command line in turn. The share is measured against the program's
# own clocks: another test beside it starves it (at 28% of a CPU its
# measure and the samples were 5 points apart), so it runs alone, as the
# sampler's accuracy test does.
# 3.3.8-static is left out, as from the accuracy runs (sample.cmake): what this
# measures (the GC's flags read at each stop against the program's own
# clocks) is the VM's and the tracer's, the same as 3.3.8's, built shared
# from the same source; the static build's machine frames are read by
# it.native on it. Running alone, it cost about 20 s of the suite's wall
# time (issue 27).
set(RBPEEK_GC_SHARE_RUBIES ${RBPEEK_TEST_RUBIES})
list(REMOVE_ITEM RBPEEK_GC_SHARE_RUBIES 3.3.8-static)
rbpeek_ruby_test(gc_share test_gc_share.py RUN_SERIAL LABEL native RUBIES ${RBPEEK_GC_SHARE_RUBIES})

# The native stack through YJIT's code (test_native_yjit.py): one program
# under --yjit --yjit-call-threshold=1 per Ruby with YJIT (Debian's ruby3.1,
# the shared 3.3.8 and 3.4.5; 2.7.4, 3.1.2 and 3.3.8-static are built
# without it), serving gdb, lldb and the command line, live and on one core.
rbpeek_ruby_test(native_yjit test_native_yjit.py LABEL native RUBIES ${RBPEEK_YJIT_RUBIES})
