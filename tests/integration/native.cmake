# ruby bt --native against the program's own record (test_native.py): one
# parked program per Ruby, with the native_ext extension built for it, serves
# gdb, lldb and the command line, live and on one core (matrix.py).
rbpeek_ruby_test(native test_native.py)
