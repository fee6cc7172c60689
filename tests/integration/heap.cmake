# ruby heap (census and dump) against the program's own ObjectSpace view:
# one heap of 810,000 objects per Ruby, started once and gcore'd once, read by
# gdb, lldb and the command line, live and on the core.
rbpeek_ruby_test(heap test_heap.py TIMEOUT 1800)
