# ruby bt --native against the program's own record (test_native.py): one
# parked program per Ruby, with the native_ext extension built for it, serves
# gdb, lldb and the command line, live and on one core (matrix.py).
rbpeek_ruby_test(native test_native.py)

# GC frames in ruby sample against the program's own GC time
# (test_gc_share.py): one program per Ruby, sampled live by gdb, lldb and
# the command line in turn.
rbpeek_ruby_test(gc_share test_gc_share.py LABEL native)
