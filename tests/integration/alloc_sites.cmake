# ruby allocs --sites against the program's own count of each site's
# allocations (test_alloc_sites.py): one program per Ruby, gdb, lldb and the
# command line live (the split within 5 points, the rate within 25%, Ctrl-C,
# the front end killed, nothing left behind), and the refusal on its core.
rbpeek_ruby_test(alloc_sites test_alloc_sites.py LABEL allocs)
