# ruby allocs: the allocation count against the target's own GC.stat, the
# refusal of site options with their reason, Ctrl-C, and nothing left behind
# (executable pages, debug registers), on every Ruby and debugger; live only
# (a core is refused before anything runs). The count is exact, so it is
# compared within 5%.
foreach(ruby ${RBPEEK_TEST_RUBIES})
  foreach(dbg ${RBPEEK_TEST_DEBUGGERS})
    rbpeek_plain_test(allocs.${ruby}.${dbg} test_allocs.py ${ruby} ${dbg})
    set_tests_properties(it.allocs.${ruby}.${dbg} PROPERTIES LABELS "integration;allocs")
  endforeach()
endforeach()
