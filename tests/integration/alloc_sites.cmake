# ruby allocs --sites against the program's own count of each site's
# allocations (test_alloc_sites.py): one program per Ruby, gdb, lldb and the
# command line live (the split within 5 points, the rate within 25%, Ctrl-C,
# the front end killed, nothing left behind), and the refusal on its core.
# 3.3.8-static is left out, as from it.gc_share and the accuracy runs: the
# split is the tracer's and the VM's, the same as 3.3.8's from the same
# source; the static build's allocator, its symbols and its exact rate are
# it.allocs.3.3.8-static's (50 s of the suite's CPU time saved, 2026-11-28).
set(RBPEEK_ALLOC_SITES_RUBIES ${RBPEEK_TEST_RUBIES})
list(REMOVE_ITEM RBPEEK_ALLOC_SITES_RUBIES 3.3.8-static)
if(RBPEEK_ALLOC_SITES_RUBIES)   # (none given: rbpeek_ruby_test would take every Ruby)
  rbpeek_ruby_test(alloc_sites test_alloc_sites.py LABEL allocs RUBIES ${RBPEEK_ALLOC_SITES_RUBIES})
endif()
